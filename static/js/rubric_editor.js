/* Rubric editor: a structured per-check form and the raw JSON, kept in sync.
 *
 * The textarea #rubric-json is the only thing the form submits; the structured view
 * is a projection of it. Structured edits rewrite the JSON at once; JSON edits
 * re-render the structured view once the text parses (debounced), and while it does
 * not parse the structured view is frozen on the last good version so nothing typed
 * in the JSON is overwritten. Field lists and types come from the published JSON
 * Schema (/api/schema/rubric.json); this file only adds order, labels and widgets.
 *
 * Validation never blocks submitting: the server validates again and re-renders.
 */
(function () {
  "use strict";

  var root = document.getElementById("rubric-editor");
  var textarea = document.getElementById("rubric-json");
  if (!root || !textarea) return;

  var structured = document.getElementById("rubric-structured");
  var errorList = document.getElementById("rubric-errors");
  var statusLine = document.getElementById("rubric-status");
  var schemaUrl = root.getAttribute("data-schema-url") || "/api/schema/rubric.json";
  var validateUrl = root.getAttribute("data-validate-url") || "/api/rubrics/validate/";

  // ------------------------------------------------------------------ hand-written order and words

  var COMMON_KEYS = ["id", "kind", "points", "required", "title", "tags", "target"];
  var KIND_FIELDS = {
    string_match: ["expected", "mode", "case_sensitive", "normalize_whitespace"],
    regex: ["pattern", "flags", "must_match", "min_count"],
    number: ["expected", "tolerance", "rel_tolerance", "extract"],
    json_field: ["pointer", "op", "expected"],
    file_exists: ["path"],
    file_content: ["path", "contains", "regex", "equals", "sha256"],
    table_cell: ["path", "sheet", "row", "column", "expected", "tolerance"],
    text_similarity: ["metric", "reference", "threshold"],
    command: ["run", "expect_exit", "timeout_s"],
    python: ["code", "function", "args", "timeout_s"],
    llm_judge: ["criterion", "reference", "scale", "samples", "model"],
    group: ["aggregate"]
  };
  var KIND_LABELS = {
    string_match: "String match", regex: "Regex", number: "Number", json_field: "JSON field",
    file_exists: "File exists", file_content: "File content", table_cell: "Table cell",
    text_similarity: "Text similarity", command: "Command", python: "Python", llm_judge: "LLM judge",
    group: "Group"
  };
  var LABELS = {
    id: "Id", points: "Points", required: "Required (gate)", title: "Title", tags: "Tags", target: "Target",
    expected: "Expected", mode: "Mode", case_sensitive: "Case sensitive",
    normalize_whitespace: "Normalise whitespace", pattern: "Pattern", flags: "Flags", must_match: "Must match",
    min_count: "Min. matches", tolerance: "Tolerance", rel_tolerance: "Relative tolerance",
    extract: "Extract (regex, one group)", pointer: "JSON pointer", op: "Operator", path: "Path",
    contains: "Contains", regex: "Regex", equals: "Equals", sha256: "SHA-256", sheet: "Sheet", row: "Row",
    column: "Column", metric: "Metric", reference: "Reference", threshold: "Threshold", run: "Command",
    expect_exit: "Expected exit code", timeout_s: "Timeout (s)", code: "Code (defines check(ctx))",
    "function": "Function (module:callable)", args: "Args (JSON object)", criterion: "Criterion",
    scale: "Scale", samples: "Samples", model: "Judge model", aggregate: "Aggregate",
    pass_threshold: "Pass threshold", temperature: "Judge temperature", probes: "Probes (JSON)"
  };
  var PLACEHOLDERS = {
    target: "answer", tags: "comma, separated", path: "report.md", pointer: "/totals/0",
    "function": "checks:totals_match", extract: "total: (\\S+)", flags: "e.g. im", run: "pytest -q tests/",
    sheet: "name or 0-based index", row: "label or 0-based index", column: "label or 0-based index",
    model: "judge"
  };
  // Free text that is usually longer than a line.
  var TEXTAREA_KEYS = { criterion: 3, reference: 3, code: 6, equals: 3, contains: 2 };
  // Fields that read better across the whole card.
  var WIDE_KEYS = { criterion: 1, reference: 1, code: 1, equals: 1, contains: 1, run: 1, pattern: 1,
                    expected: 1, args: 1 };
  // Kinds that take exactly one of some keys (the engine checks it; RUBRIC.md says so).
  var CHOICES = {
    file_content: { label: "Match by", valueLabel: "Value", keys: ["contains", "regex", "equals", "sha256"] },
    python: { label: "Defined by", valueLabel: "Source", keys: ["code", "function"] }
  };
  var STARTERS = {
    file_content: { contains: "" },
    python: { code: "def check(ctx):\n    return True\n" }
  };
  var TARGET_SUGGESTIONS = ["answer", "trajectory", "file:", "stdout:"];
  var PATTERN_WORDS = {
    "^[a-z0-9_]{1,64}$": "a check id: 1 to 64 lowercase letters, digits or underscores",
    "^[0-9a-f]{64}$": "a sha256: 64 lowercase hex digits",
    "^[aimsx]*$": "flag letters from 'aimsx', e.g. 'im'",
    "^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$": "'module:function', e.g. 'checks:totals_match'",
    "^(answer|trajectory|file:[\\s\\S]+|stdout:[\\s\\S]+)$":
      "a target: 'answer', 'trajectory', 'file:<workspace path>' or 'stdout:<command>'"
  };
  var TYPE_WORDS = { string: "a string", integer: "an integer", number: "a number", boolean: "true or false",
                     array: "a list", object: "an object", "null": "null" };

  // ------------------------------------------------------------------ state

  var state = {
    rubric: null,          // the last rubric that parsed (the structured view shows it)
    parseError: null,      // {message, line, column} while the JSON does not parse
    schema: null,          // the published schema, once loaded
    schemaFailed: false,
    defsByKind: {},        // kind -> its $defs entry
    kinds: Object.keys(KIND_FIELDS),
    validator: null,       // compiled Ajv function
    schemaIssues: [],      // from Ajv, pointers into the rubric
    serverIssues: [],      // from POST /api/rubrics/validate/
    serverSeq: 0,
    serverUnavailable: false,
    pageIssues: [],        // rendered by the server with the page; valid while the text is unchanged
    pageText: textarea.value
  };
  var stash = new WeakMap(); // check -> {kind: {key: value}} of fields dropped by a kind change
  var uid = 0;

  // ------------------------------------------------------------------ small helpers

  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (name) {
        var value = attrs[name];
        if (value === undefined || value === null || value === false) return;
        if (name === "text") el.textContent = value;
        else if (name === "className") el.className = value;
        else if (name.slice(0, 2) === "on") el.addEventListener(name.slice(2), value);
        else el.setAttribute(name, value === true ? "" : value);
      });
    }
    for (var i = 2; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === null || child === undefined || child === false) continue;
      if (Array.isArray(child)) child.forEach(function (c) { if (c) el.appendChild(c); });
      else el.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return el;
  }

  function debounce(fn, ms) {
    var timer = null;
    var wrapped = function () {
      clearTimeout(timer);
      timer = setTimeout(function () { timer = null; fn(); }, ms);
    };
    wrapped.flush = function () { if (timer !== null) { clearTimeout(timer); timer = null; fn(); } };
    return wrapped;
  }

  function escapeToken(token) { return String(token).replace(/~/g, "~0").replace(/\//g, "~1"); }
  function isObject(value) { return value !== null && typeof value === "object" && !Array.isArray(value); }
  function has(obj, key) { return Object.prototype.hasOwnProperty.call(obj, key); }
  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

  function describe(value) {
    if (value === null) return "null";
    if (Array.isArray(value)) return "a list";
    if (typeof value === "object") return "an object";
    var text = JSON.stringify(value);
    return text.length <= 60 ? text : text.slice(0, 57) + "...";
  }

  function csrfToken() {
    try {
      var headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
      if (headers["X-CSRFToken"]) return headers["X-CSRFToken"];
    } catch (e) { /* fall through to the cookie */ }
    var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    if (match) return decodeURIComponent(match[1]);
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  // ------------------------------------------------------------------ schema access

  function resolve(node) {
    var guard = 0;
    while (node && node.$ref && state.schema && guard++ < 10) {
      var name = node.$ref.replace(/^#\/\$defs\//, "");
      node = (state.schema.$defs || {})[name];
    }
    return node || {};
  }

  function indexSchema(schema) {
    state.defsByKind = {};
    var kinds = [];
    Object.keys(schema.$defs || {}).forEach(function (name) {
      var def = schema.$defs[name];
      var kind = def && def.properties && def.properties.kind && def.properties.kind.const;
      if (typeof kind === "string") { state.defsByKind[kind] = def; def.__name = name; kinds.push(kind); }
    });
    if (kinds.length) {
      // Hand order first, then any kind the schema has that this file does not know yet.
      state.kinds = Object.keys(KIND_FIELDS).filter(function (k) { return kinds.indexOf(k) >= 0; })
        .concat(kinds.filter(function (k) { return !has(KIND_FIELDS, k); }));
    }
  }

  function kindProps(kind) {
    var def = state.defsByKind[kind];
    return def ? def.properties || {} : null;
  }

  function kindRequired(kind) {
    var def = state.defsByKind[kind];
    return def ? def.required || [] : [];
  }

  function kindFieldKeys(kind) {
    var props = kindProps(kind);
    var hand = KIND_FIELDS[kind] || [];
    if (!props) return hand.slice();
    var keys = hand.filter(function (k) { return has(props, k); });
    Object.keys(props).forEach(function (k) {
      if (COMMON_KEYS.indexOf(k) < 0 && keys.indexOf(k) < 0 && !(kind === "group" && k === "checks")) keys.push(k);
    });
    return keys;
  }

  function commonProp(key) {
    var anyDef = state.defsByKind[state.kinds[0]];
    return anyDef && anyDef.properties ? anyDef.properties[key] : null;
  }

  function rubricProp(key) {
    if (!state.schema) return null;
    if (key === "judge") return resolve((state.schema.properties || {}).judge);
    return (state.schema.properties || {})[key] || null;
  }

  /* {schema, nullable} with `anyOf: [X, {type: null}]` unwrapped. */
  function unwrap(prop) {
    prop = resolve(prop);
    if (prop.anyOf) {
      var rest = prop.anyOf.filter(function (p) { return p.type !== "null"; });
      var nullable = rest.length < prop.anyOf.length;
      if (rest.length === 1) return { schema: resolve(rest[0]), nullable: nullable, top: prop };
      return { schema: { anyOf: rest }, nullable: nullable, top: prop };
    }
    return { schema: prop, nullable: false, top: prop };
  }

  function widgetFor(key, prop) {
    if (key === "scale") return "scale";
    if (key === "tags") return "tags";
    if (key === "target") return "target";
    if (!prop) return "json-value"; // no schema loaded: accept any JSON, else text
    var s = unwrap(prop).schema;
    if (s.enum) return "select";
    if (s.type === "boolean") return "checkbox";
    if (s.type === "integer" || s.type === "number") return "number";
    if (s.type === "string") return TEXTAREA_KEYS[key] ? "textarea" : "text";
    if (s.type === "object" || s.type === "array") return "json";
    if (s.anyOf && s.anyOf.every(function (p) { return ["string", "integer", "number"].indexOf(resolve(p).type) >= 0; })) {
      return "scalar";
    }
    return "json-value";
  }

  function fitsType(value, prop) {
    if (!prop) return true;
    var u = unwrap(prop);
    if (value === null) return u.nullable;
    var types = u.schema.anyOf ? u.schema.anyOf.map(function (p) { return resolve(p).type; }) : [u.schema.type];
    if (types.indexOf(undefined) >= 0) return true;
    return types.some(function (t) {
      if (t === "integer") return typeof value === "number" && Math.floor(value) === value;
      if (t === "array") return Array.isArray(value);
      if (t === "object") return isObject(value);
      return typeof value === t;
    });
  }

  // ------------------------------------------------------------------ document editing

  function serialize() {
    textarea.value = JSON.stringify(state.rubric, null, 2);
  }

  /* Keys in a readable order: common keys, the kind's fields, children, then the rest. */
  function orderCheckKeys(check) {
    var order = COMMON_KEYS.concat(kindFieldKeys(check.kind), ["checks"]);
    reorder(check, order);
  }

  function reorder(obj, order) {
    var keys = Object.keys(obj);
    var sorted = order.filter(function (k) { return has(obj, k); })
      .concat(keys.filter(function (k) { return order.indexOf(k) < 0; }));
    if (sorted.join("\u0000") === keys.join("\u0000")) return;
    var copy = {};
    keys.forEach(function (k) { copy[k] = obj[k]; delete obj[k]; });
    sorted.forEach(function (k) { obj[k] = copy[k]; });
  }

  function setKey(obj, key, value, order) {
    var isNew = !has(obj, key);
    if (value === undefined) delete obj[key];
    else obj[key] = value;
    if (isNew && value !== undefined && order) order(obj);
  }

  function allIds(checks, out) {
    (checks || []).forEach(function (c) {
      if (isObject(c)) {
        if (typeof c.id === "string") out[c.id] = true;
        if (Array.isArray(c.checks)) allIds(c.checks, out);
      }
    });
    return out;
  }

  function newCheck(kind) {
    var taken = allIds(state.rubric.checks, {});
    var n = 1;
    while (taken[kind + "_" + n]) n++;
    var check = { id: kind + "_" + n, kind: kind, points: 1 };
    fillRequired(check);
    return check;
  }

  function fillRequired(check) {
    var props = kindProps(check.kind) || {};
    kindRequired(check.kind).forEach(function (key) {
      if (has(check, key)) return;
      if (key === "checks" && check.kind === "group") check.checks = [newCheck("string_match")];
      else if (props[key] && unwrap(props[key]).schema.type === "string") check[key] = "";
      // Numbers stay missing: the editor shows "required" at the field until one is typed.
    });
    var starter = STARTERS[check.kind] || {};
    var choice = CHOICES[check.kind];
    var chosen = choice ? choice.keys.some(function (k) { return check[k] !== undefined && check[k] !== null; }) : false;
    Object.keys(starter).forEach(function (key) {
      if (!has(check, key) && !chosen) check[key] = starter[key];
    });
    orderCheckKeys(check);
  }

  /* Keeps the common keys and whatever of the old kind's fields the new kind also has. */
  function changeKind(check, kind) {
    var oldKind = check.kind;
    var newProps = kindProps(kind);
    var newKeys = kindFieldKeys(kind);
    var saved = stash.get(check) || {};
    var dropped = {};
    var next = {};
    Object.keys(check).forEach(function (key) {
      if (key === "kind") return;
      var keep = COMMON_KEYS.indexOf(key) >= 0 ||
        (newKeys.indexOf(key) >= 0 || (kind === "group" && key === "checks")) &&
        (!newProps || fitsType(check[key], newProps[key]));
      if (keep) next[key] = check[key];
      else dropped[key] = check[key];
    });
    if (typeof oldKind === "string") saved[oldKind] = dropped;
    var restored = saved[kind] || {};
    Object.keys(restored).forEach(function (key) { if (!has(next, key)) next[key] = restored[key]; });
    Object.keys(check).forEach(function (key) { delete check[key]; });
    Object.keys(next).forEach(function (key) { check[key] = next[key]; });
    check.kind = kind;
    stash.set(check, saved);
    fillRequired(check);
  }

  // ------------------------------------------------------------------ structured view

  function fieldId() { uid += 1; return "re-f" + uid; }

  function structuredChanged() {
    serialize();
    state.parseError = null;
    validateNow();
  }

  /* One labelled input bound to obj[key]. `pointer` is where errors for it arrive. */
  function field(opts) {
    var obj = opts.obj, key = opts.key, prop = opts.prop, pointer = opts.pointer;
    var widget = opts.widget || widgetFor(key, prop);
    var id = fieldId();
    var value = has(obj, key) ? obj[key] : undefined;
    var u = prop ? unwrap(prop) : { schema: {}, nullable: false, top: {} };
    var dflt = u.top.default !== undefined ? u.top.default : u.schema.default;
    var required = !!opts.required;
    var order = opts.order;
    var wrapper = h("div", { className: "re-field re-w-" + widget + (WIDE_KEYS[key] || opts.wide ? " re-wide" : ""),
                             "data-pointer": pointer, "data-key": key });
    var labelText = opts.label || LABELS[key] || (u.top.title || key);
    var label = h("label", { "for": id, title: u.top.description || u.schema.description || null },
      labelText, required ? h("span", { className: "re-req", title: "required", text: " *" }) : null);

    function commit(next) {
      setKey(obj, key, next, order);
      if (opts.afterChange) opts.afterChange();
      structuredChanged();
    }

    function textValue(v) {
      if (v === undefined || v === null) return "";
      return typeof v === "string" ? v : JSON.stringify(v);
    }

    var input;
    if (widget === "checkbox") {
      var effective = value === undefined ? !!dflt : value;
      input = h("input", { type: "checkbox", id: id });
      input.checked = effective === true;
      input.addEventListener("change", function () {
        var checked = input.checked;
        commit(!required && checked === !!dflt && !opts.keepDefault ? undefined : checked);
      });
      return h("div", { className: "re-field re-w-checkbox", "data-pointer": pointer, "data-key": key },
        h("label", { className: "re-check", title: u.top.description || null }, input, " " + labelText));
    }
    if (widget === "select") {
      input = h("select", { id: id });
      var choices = u.schema.enum.slice();
      var current = value === undefined ? dflt : value;
      if (!required && dflt === undefined) input.appendChild(h("option", { value: "", text: "—" }));
      if (current !== undefined && current !== null && choices.indexOf(current) < 0) {
        input.appendChild(h("option", { value: "\u0000invalid", text: describe(current) + " (not allowed)" }));
      }
      choices.forEach(function (choice) {
        input.appendChild(h("option", { value: choice, text: choice + (choice === dflt ? " (default)" : "") }));
      });
      input.value = current === undefined || current === null ? "" :
        (choices.indexOf(current) >= 0 ? current : "\u0000invalid");
      input.addEventListener("change", function () {
        var v = input.value;
        if (v === "\u0000invalid") return;
        commit(v === "" || (v === dflt && !required) ? undefined : v);
      });
    } else if (widget === "textarea" || widget === "json") {
      input = h("textarea", { id: id, rows: TEXTAREA_KEYS[key] || 3, spellcheck: widget === "json" ? "false" : null,
                              className: widget === "json" || key === "code" ? "mono" : null,
                              placeholder: PLACEHOLDERS[key] || null });
      input.value = widget === "json" ? (value === undefined ? "" : JSON.stringify(value, null, 2)) : textValue(value);
      input.addEventListener("input", function () {
        if (widget === "textarea") {
          commit(input.value === "" && !required && !opts.keepEmpty ? undefined : input.value);
          return;
        }
        var text = input.value.trim();
        if (text === "") { localError(wrapper, null); commit(undefined); return; }
        try {
          var parsed = JSON.parse(text);
          localError(wrapper, null);
          commit(parsed);
        } catch (e) {
          localError(wrapper, "not valid JSON yet: " + e.message);
        }
      });
    } else if (widget === "scale") {
      return scaleField(obj, key, prop, pointer, wrapper, label, id);
    } else {
      input = h("input", { id: id, type: "text", autocomplete: "off",
                           placeholder: PLACEHOLDERS[key] || (dflt !== undefined && dflt !== null ? String(dflt) : null),
                           inputmode: widget === "number" ? "decimal" : null });
      if (widget === "tags") input.value = Array.isArray(value) ? value.join(", ") : textValue(value);
      else if (widget === "json-value" && prop) input.value = value === undefined ? "" : JSON.stringify(value);
      else input.value = textValue(value);
      if (widget === "target") {
        var listId = "re-target-suggestions";
        if (!document.getElementById(listId)) {
          document.body.appendChild(h("datalist", { id: listId }, TARGET_SUGGESTIONS.map(function (s) {
            return h("option", { value: s });
          })));
        }
        input.setAttribute("list", listId);
      }
      input.addEventListener("input", function () {
        var raw = input.value;
        var text = raw.trim();
        var next;
        if (widget === "tags") {
          next = text === "" ? undefined : raw.split(",").map(function (t) { return t.trim(); })
            .filter(function (t) { return t; });
        } else if (widget === "number") {
          // What was typed goes into the JSON as it is, so a typo shows as a type error at the field.
          next = text === "" ? undefined : (/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text) ? Number(text) : raw);
        } else if (widget === "scalar") {
          next = text === "" ? undefined : (/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text) ? Number(text) : raw);
        } else if (widget === "json-value") {
          if (text === "") next = undefined;
          else { try { next = JSON.parse(text); } catch (e) { next = raw; } }
        } else {
          next = raw === "" && !required && !opts.keepEmpty ? undefined : raw;
        }
        commit(next);
      });
    }
    wrapper.appendChild(label);
    wrapper.appendChild(input);
    return wrapper;
  }

  function scaleField(obj, key, prop, pointer, wrapper, label, id) {
    var value = obj[key];
    var select = h("select", { id: id },
      h("option", { value: "binary", text: "binary (met / not met)" }),
      h("option", { value: "range", text: "score on a range" }));
    var isRange = isObject(value);
    select.value = isRange ? "range" : "binary";
    var range = h("div", { className: "re-scale-range" });
    function renderRange() {
      range.innerHTML = "";
      if (!isObject(obj[key])) { range.hidden = true; return; }
      range.hidden = false;
      var scaleSchema = null;
      if (prop) {
        (resolve(prop).anyOf || []).forEach(function (p) { if (resolve(p).properties) scaleSchema = resolve(p); });
      }
      ["min", "max"].forEach(function (bound) {
        range.appendChild(field({ obj: obj[key], key: bound, label: bound === "min" ? "Scale min" : "Scale max",
                                  prop: scaleSchema ? scaleSchema.properties[bound] : { type: "number" },
                                  pointer: pointer + "/" + bound }));
      });
    }
    select.addEventListener("change", function () {
      if (select.value === "range") obj[key] = isObject(obj[key]) ? obj[key] : { min: 0, max: 10 };
      else delete obj[key];
      orderCheckKeys(obj);
      renderRange();
      structuredChanged();
    });
    renderRange();
    wrapper.appendChild(label);
    wrapper.appendChild(select);
    wrapper.appendChild(range);
    return wrapper;
  }

  function localError(wrapper, message) {
    var existing = wrapper.querySelector(":scope > .re-local-error");
    if (existing) existing.remove();
    if (message) wrapper.appendChild(h("div", { className: "field-error re-local-error", text: message }));
  }

  function extraKeys(obj, known, pointer, onChange) {
    var keys = Object.keys(obj).filter(function (k) { return known.indexOf(k) < 0; });
    if (!keys.length) return null;
    return h("div", { className: "re-extras" }, keys.map(function (key) {
      return h("div", { className: "re-field re-extra", "data-pointer": pointer + "/" + escapeToken(key) },
        h("span", { className: "muted" }, "Other key "),
        h("code", { text: key }), ": ",
        h("code", { className: "re-extra-value", text: describe(obj[key]) }), " ",
        h("button", { type: "button", className: "re-mini danger", title: "Remove this key",
                      onclick: function () { delete obj[key]; onChange(); } }, "remove"));
    }));
  }

  function checkCard(check, list, index, pointer, number) {
    var card = h("div", { className: "check-card re-card", "data-pointer": pointer });
    function structural(focusSelector, focusPointer) {
      serialize();
      renderStructured({ pointer: focusPointer === undefined ? pointer : focusPointer, selector: focusSelector });
      validateNow();
    }
    var tools = h("div", { className: "re-tools" },
      h("button", { type: "button", className: "re-mini re-move-up", title: "Move up", "aria-label": "Move up",
                    disabled: index === 0 ? true : null,
                    onclick: function () {
                      list.splice(index - 1, 0, list.splice(index, 1)[0]);
                      structural(".re-move-up", pointer.replace(/\d+$/, String(index - 1)));
                    } }, "↑"),
      h("button", { type: "button", className: "re-mini re-move-down", title: "Move down", "aria-label": "Move down",
                    disabled: index === list.length - 1 ? true : null,
                    onclick: function () {
                      list.splice(index + 1, 0, list.splice(index, 1)[0]);
                      structural(".re-move-down", pointer.replace(/\d+$/, String(index + 1)));
                    } }, "↓"),
      h("button", { type: "button", className: "re-mini danger re-remove", title: "Remove check",
                    "aria-label": "Remove check",
                    onclick: function () {
                      list.splice(index, 1);
                      structural(":scope > .re-add > .re-add-button", pointer.replace(/\/\d+$/, ""));
                    } }, "✕"));

    if (!isObject(check)) {
      card.appendChild(h("div", { className: "check-head" }, h("span", { className: "re-number", text: number }),
        h("span", { className: "muted", text: "This entry is " + describe(check) + ", not a check; edit it in the JSON tab." }),
        h("span", { className: "re-spacer" }), tools));
      card.appendChild(h("div", { className: "re-card-errors" }));
      return card;
    }

    var kind = check.kind;
    var order = function (obj) { orderCheckKeys(obj); };
    var kindSelect = h("select", { className: "re-kind", id: fieldId(), "aria-label": "Kind" });
    if (typeof kind !== "string" || state.kinds.indexOf(kind) < 0) {
      kindSelect.appendChild(h("option", { value: "", text: kind === undefined ? "(no kind)" : describe(kind) + " (unknown)" }));
    }
    state.kinds.forEach(function (k) { kindSelect.appendChild(h("option", { value: k, text: KIND_LABELS[k] || k })); });
    kindSelect.value = state.kinds.indexOf(kind) >= 0 ? kind : "";
    kindSelect.addEventListener("change", function () {
      if (!kindSelect.value) return;
      changeKind(check, kindSelect.value);
      structural(".re-kind");
    });

    var head = h("div", { className: "check-head" },
      h("span", { className: "re-number", text: number }),
      field({ obj: check, key: "id", prop: commonProp("id"), pointer: pointer + "/id", required: true, order: order,
              widget: "text" }),
      h("div", { className: "re-field re-kind-field", "data-pointer": pointer + "/kind" },
        h("label", { "for": kindSelect.id }, "Kind"), kindSelect),
      field({ obj: check, key: "points", prop: commonProp("points"), pointer: pointer + "/points", required: true,
              order: order, widget: "number" }),
      h("span", { className: "re-spacer" }),
      tools);
    card.appendChild(head);
    var def = state.defsByKind[kind];
    if (def && def.description) {
      card.appendChild(h("div", { className: "muted re-kind-help", text: def.description.split("\n")[0] }));
    }
    card.appendChild(h("div", { className: "re-card-errors" }));

    var fields = h("div", { className: "check-fields" });
    var props = kindProps(kind);
    var requiredKeys = kindRequired(kind);
    var choice = CHOICES[kind];
    var chosenKeys = choice ? choice.keys.filter(function (k) { return check[k] !== undefined && check[k] !== null; }) : [];
    kindFieldKeys(kind).forEach(function (key) {
      if (choice && chosenKeys.length <= 1 && choice.keys.indexOf(key) >= 0) {
        // "Exactly one of": one picker and one input instead of several mostly-empty fields.
        if (key === choice.keys[0]) fields.appendChild(choiceField(check, choice, chosenKeys[0] || choice.keys[0], props, pointer, structural));
        return;
      }
      fields.appendChild(field({ obj: check, key: key, prop: props ? props[key] : null, pointer: pointer + "/" + escapeToken(key),
                                 required: requiredKeys.indexOf(key) >= 0, order: order }));
    });
    ["title", "tags", "target"].forEach(function (key) {
      fields.appendChild(field({ obj: check, key: key, prop: commonProp(key), pointer: pointer + "/" + key, order: order }));
    });
    fields.appendChild(field({ obj: check, key: "required", prop: commonProp("required") || { type: "boolean", default: false },
                               pointer: pointer + "/required", order: order, widget: "checkbox" }));
    card.appendChild(fields);

    var known = COMMON_KEYS.concat(kindFieldKeys(kind), kind === "group" ? ["checks"] : []);
    var extras = extraKeys(check, known, pointer, function () { structural(null); });
    if (extras) card.appendChild(extras);

    if (kind === "group") {
      var childPointer = pointer + "/checks";
      if (!Array.isArray(check.checks)) {
        card.appendChild(h("div", { className: "re-children", "data-pointer": childPointer },
          h("p", { className: "muted", text: "'checks' is " + describe(check.checks) + "; edit it in the JSON tab." })));
      } else {
        card.appendChild(h("div", { className: "re-children", "data-pointer": childPointer },
          h("div", { className: "re-children-label muted", text: "Child checks" }),
          checkList(check.checks, childPointer, number + "."),
          addCheckControl(check.checks, childPointer, "Add child check")));
      }
    }
    return card;
  }

  function choiceField(check, choice, chosen, props, pointer, structural) {
    var select = h("select", { id: fieldId(), className: "re-choice-select" });
    choice.keys.forEach(function (k) { select.appendChild(h("option", { value: k, text: LABELS[k] || k })); });
    select.value = chosen;
    select.addEventListener("change", function () {
      var next = select.value;
      var value = check[chosen];
      delete check[chosen];
      check[next] = value === undefined || value === null ? "" : value;
      orderCheckKeys(check);
      structural(".re-choice-select");
    });
    var picker = h("div", { className: "re-field re-choice-picker" },
      h("label", { "for": select.id }, choice.label, h("span", { className: "re-req", title: "required", text: " *" })), select);
    var input = field({ obj: check, key: chosen, prop: props ? props[chosen] : null,
                        pointer: pointer + "/" + escapeToken(chosen), order: orderCheckKeys, label: choice.valueLabel,
                        keepEmpty: true });
    return h("div", { className: "re-choice re-wide" }, picker, input);
  }

  function checkList(checks, pointer, prefix) {
    var wrap = h("div", { className: "re-check-list" });
    checks.forEach(function (check, index) {
      wrap.appendChild(checkCard(check, checks, index, pointer + "/" + index, prefix + (index + 1)));
    });
    return wrap;
  }

  function addCheckControl(list, pointer, label) {
    var select = h("select", { className: "re-add-kind", "aria-label": "Kind of the new check" });
    state.kinds.forEach(function (k) { select.appendChild(h("option", { value: k, text: KIND_LABELS[k] || k })); });
    var button = h("button", { type: "button", className: "re-add-button",
      onclick: function () {
        list.push(newCheck(select.value));
        serialize();
        renderStructured({ pointer: pointer + "/" + (list.length - 1), selector: "[data-key=id] input" });
        validateNow();
      } }, label);
    return h("div", { className: "re-add" }, select, button);
  }

  function rubricFields(rubric) {
    var order = function (obj) { reorder(obj, ["schema", "pass_threshold", "judge", "checks", "probes"]); };
    var judgeSchema = rubricProp("judge");
    var judge = isObject(rubric.judge) ? rubric.judge : {};
    var afterJudge = function () {
      if (!isObject(rubric.judge) && Object.keys(judge).length) setKey(rubric, "judge", judge, order);
      if (isObject(rubric.judge) && !Object.keys(rubric.judge).length) delete rubric.judge;
    };
    var judgeProps = judgeSchema && judgeSchema.properties ? judgeSchema.properties : {};
    var section = h("div", { className: "re-rubric", "data-pointer": "" },
      h("div", { className: "re-card-errors" }),
      h("div", { className: "re-rubric-fields" },
        field({ obj: rubric, key: "pass_threshold", prop: rubricProp("pass_threshold") || { type: "number" },
                pointer: "/pass_threshold", order: order }),
        isObject(rubric.judge) || rubric.judge === undefined ? [
          field({ obj: judge, key: "model", prop: judgeProps.model || { type: "string" }, pointer: "/judge/model",
                  afterChange: afterJudge }),
          field({ obj: judge, key: "samples", label: "Judge samples", prop: judgeProps.samples || { type: "integer" },
                  pointer: "/judge/samples", afterChange: afterJudge }),
          field({ obj: judge, key: "temperature", prop: judgeProps.temperature || { type: "number" },
                  pointer: "/judge/temperature", afterChange: afterJudge })
        ] : h("div", { className: "re-field", "data-pointer": "/judge" },
          h("span", { className: "muted", text: "judge is " + describe(rubric.judge) + "; edit it in the JSON tab." }))));
    if (isObject(rubric.judge)) {
      var judgeExtras = extraKeys(rubric.judge, Object.keys(judgeProps).length ? Object.keys(judgeProps) : ["model", "samples", "temperature"],
        "/judge", function () { serialize(); renderStructured(); validateNow(); });
      if (judgeExtras) section.appendChild(judgeExtras);
    }
    var probes = h("details", { className: "re-probes" },
      h("summary", { text: "Probes " + (Array.isArray(rubric.probes) ? "(" + rubric.probes.length + ")" : "") }),
      field({ obj: rubric, key: "probes", prop: { type: "array" }, pointer: "/probes", widget: "json", order: order,
              label: "Probe answers and the most reward each may earn (JSON list)" }));
    if (rubric.probes !== undefined) probes.open = false;
    section.appendChild(probes);
    var extras = extraKeys(rubric, ["schema", "pass_threshold", "judge", "checks", "probes"], "",
      function () { serialize(); renderStructured(); validateNow(); });
    if (extras) section.appendChild(extras);
    return section;
  }

  function renderStructured(focus) {
    var rubric = state.rubric;
    var openProbes = structured.querySelector(".re-probes[open]") !== null;
    structured.innerHTML = "";
    var fieldset = h("fieldset", { className: "re-fieldset" });
    var banner = h("div", { className: "re-banner", hidden: true });
    structured.appendChild(banner);
    structured.appendChild(fieldset);
    if (!state.schema && !state.schemaFailed) {
      fieldset.appendChild(h("p", { className: "muted", text: "Loading the rubric schema…" }));
      return;
    }
    if (!isObject(rubric)) {
      fieldset.appendChild(h("p", { className: "muted",
        text: rubric === null ? "No rubric yet: write one in the JSON tab." :
          "The rubric must be a JSON object; edit it in the JSON tab." }));
      updateFrozen();
      return;
    }
    if (state.schemaFailed) {
      fieldset.appendChild(h("p", { className: "muted re-note",
        text: "The rubric schema could not be loaded, so fields take any JSON value and only the server checks them." }));
    }
    var rubricSection = rubricFields(rubric);
    fieldset.appendChild(rubricSection);
    if (openProbes) rubricSection.querySelector(".re-probes").open = true;
    var checksWrap = h("div", { className: "re-checks", "data-pointer": "/checks" },
      h("div", { className: "re-card-errors" }));
    if (Array.isArray(rubric.checks)) {
      checksWrap.appendChild(checkList(rubric.checks, "/checks", ""));
      checksWrap.appendChild(addCheckControl(rubric.checks, "/checks", "Add check"));
    } else if (rubric.checks === undefined) {
      checksWrap.appendChild(h("button", { type: "button", onclick: function () {
        rubric.checks = [];
        reorder(rubric, ["schema", "pass_threshold", "judge", "checks", "probes"]);
        rubric.checks.push(newCheck("string_match"));
        serialize(); renderStructured(); validateNow();
      } }, "Add a checks list"));
    } else {
      checksWrap.appendChild(h("p", { className: "muted", text: "'checks' is " + describe(rubric.checks) + "; edit it in the JSON tab." }));
    }
    fieldset.appendChild(checksWrap);
    updateFrozen();
    attachIssues();
    if (focus && focus.pointer !== undefined) {
      var anchor = structured.querySelector('[data-pointer="' + cssEscape(focus.pointer) + '"]');
      var target = anchor && (focus.selector ? anchor.querySelector(focus.selector) : null);
      if (!target && anchor && !focus.selector) target = anchor.querySelector("input, select, textarea");
      if (target && !target.disabled) target.focus();
      if (anchor && anchor.scrollIntoView && !isVisible(anchor)) anchor.scrollIntoView({ block: "nearest" });
    }
  }

  function isVisible(el) {
    var r = el.getBoundingClientRect();
    return r.top >= 0 && r.bottom <= (window.innerHeight || document.documentElement.clientHeight);
  }

  function cssEscape(value) {
    return window.CSS && CSS.escape ? CSS.escape(value) : String(value).replace(/["\\]/g, "\\$&");
  }

  /* While the JSON does not parse, the structured view shows the last good rubric, read-only. */
  function updateFrozen() {
    var fieldset = structured.querySelector(".re-fieldset");
    var banner = structured.querySelector(".re-banner");
    if (!fieldset || !banner) return;
    fieldset.disabled = !!state.parseError;
    banner.hidden = !state.parseError;
    if (!state.parseError) banner.textContent = "";
    else if (isObject(state.rubric)) {
      banner.textContent = "The JSON has a syntax error (" + state.parseError.where + "), so the checks below are " +
        "the last version that parsed and cannot be edited here. Fix the JSON in the JSON tab.";
    } else {
      banner.textContent = "The JSON has a syntax error (" + state.parseError.where + "). Fix it in the JSON tab.";
    }
  }

  // ------------------------------------------------------------------ JSON → structured

  function parseText(text) {
    try {
      return { value: JSON.parse(text) };
    } catch (e) {
      return { error: describeParseError(e, text) };
    }
  }

  function describeParseError(error, text) {
    // Browsers word (and place) JSON errors differently; find the spot ourselves.
    var found = locateJsonError(text);
    var offset = found ? found.offset : null;
    var message = found ? found.message : String(error.message || error);
    var line = null, column = null;
    if (offset !== null) {
      var before = text.slice(0, offset).split("\n");
      line = before.length;
      column = before[before.length - 1].length + 1;
    }
    var where = line !== null ? "line " + line + ", column " + column : "an unknown position";
    return { message: message, line: line, column: column, where: where };
  }

  /* {offset, message} of the first JSON syntax error in `text` (RFC 8259), or null. */
  function locateJsonError(text) {
    var i = 0;
    function fail(message, at) { throw { offset: at === undefined ? i : at, message: message }; }
    function what() { return i >= text.length ? "unexpected end of the text" : "unexpected '" + text.charAt(i) + "'"; }
    function ws() { while (i < text.length && " \t\n\r".indexOf(text.charAt(i)) >= 0) i++; }
    function string() {
      i++;
      for (;;) {
        if (i >= text.length) fail("unterminated string");
        var c = text.charAt(i);
        if (c === '"') { i++; return; }
        if (c === "\\") {
          var e = text.charAt(i + 1);
          if (e === "u") {
            if (!/^[0-9a-fA-F]{4}$/.test(text.substr(i + 2, 4))) fail("bad \\u escape");
            i += 6;
          } else if ('"\\/bfnrt'.indexOf(e) >= 0 && e !== "") i += 2;
          else fail("bad escape \\" + e);
        } else if (c < " ") fail(c === "\n" ? "line break inside a string (write \\n)" : "control character inside a string");
        else i++;
      }
    }
    function value() {
      ws();
      var c = text.charAt(i);
      if (c === "{") {
        i++; ws();
        if (text.charAt(i) === "}") { i++; return; }
        for (;;) {
          ws();
          if (text.charAt(i) !== '"') fail(what() + "; expected a key in double quotes");
          string(); ws();
          if (text.charAt(i) !== ":") fail(what() + "; expected ':' after the key");
          i++; value(); ws();
          if (text.charAt(i) === ",") { i++; continue; }
          if (text.charAt(i) === "}") { i++; return; }
          fail(what() + "; expected ',' or '}'");
        }
      } else if (c === "[") {
        i++; ws();
        if (text.charAt(i) === "]") { i++; return; }
        for (;;) {
          value(); ws();
          if (text.charAt(i) === ",") { i++; continue; }
          if (text.charAt(i) === "]") { i++; return; }
          fail(what() + "; expected ',' or ']'");
        }
      } else if (c === '"') {
        string();
      } else if (text.substr(i, 4) === "true" || text.substr(i, 4) === "null") {
        i += 4;
      } else if (text.substr(i, 5) === "false") {
        i += 5;
      } else {
        var number = /-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
        number.lastIndex = i;
        var m = number.exec(text);
        if (!m || !m[0] || m[0] === "-") fail(what() + "; expected a value");
        i += m[0].length;
      }
    }
    try {
      value(); ws();
      if (i < text.length) fail(what() + " after the end of the JSON");
      return null;
    } catch (e) {
      if (e && typeof e.offset === "number") return e;
      return null;
    }
  }

  var rawChanged = debounce(function () {
    var parsed = parseText(textarea.value);
    if (parsed.error) {
      state.parseError = parsed.error;
      updateFrozen();
      renderIssues();
      return;
    }
    state.parseError = null;
    state.rubric = parsed.value;
    renderStructured();
    validateNow();
  }, 300);

  textarea.addEventListener("input", function () {
    textarea.classList.remove("has-error");
    rawChanged();
  });

  // ------------------------------------------------------------------ validation

  /* Dispatch on `kind` instead of a plain oneOf, so errors come only from the check's own kind. */
  function dispatchSchema(schema) {
    var copy = JSON.parse(JSON.stringify(schema));
    var kinds = [];
    var refs = {};
    Object.keys(copy.$defs || {}).forEach(function (name) {
      var def = copy.$defs[name];
      var kind = def && def.properties && def.properties.kind && def.properties.kind.const;
      if (typeof kind === "string") { kinds.push(kind); refs["#/$defs/" + name] = kind; }
    });
    function walk(node) {
      if (Array.isArray(node)) { node.forEach(walk); return; }
      if (!isObject(node)) return;
      if (Array.isArray(node.oneOf) && node.oneOf.length > 1 &&
          node.oneOf.every(function (n) { return n && refs[n.$ref]; })) {
        var branches = node.oneOf;
        delete node.oneOf;
        node.type = "object";
        node.required = ["kind"];
        node.properties = { kind: { enum: branches.map(function (n) { return refs[n.$ref]; }) } };
        node.allOf = branches.map(function (n) {
          return { "if": { properties: { kind: { "const": refs[n.$ref] } }, required: ["kind"] }, then: { $ref: n.$ref } };
        });
      }
      Object.keys(node).forEach(function (k) { walk(node[k]); });
    }
    walk(copy);
    return copy;
  }

  function compileValidator(schema) {
    var lib = window.ajv2020;
    var Ajv = lib && (lib.Ajv2020 || lib.default || lib);
    if (typeof Ajv !== "function") throw new Error("Ajv (static/vendor/ajv-8.17.1/ajv2020.min.js) is not loaded");
    var ajv = new Ajv({ allErrors: true, strict: false, verbose: true });
    return ajv.compile(dispatchSchema(schema));
  }

  function ajvMessage(e) {
    var data = e.data;
    var p = e.params || {};
    var lastKey = e.instancePath.split("/").pop();
    switch (e.keyword) {
      case "required":
        return { pointer: e.instancePath + "/" + escapeToken(p.missingProperty),
                 message: "required key '" + p.missingProperty + "' is missing" };
      case "additionalProperties":
        return { pointer: e.instancePath + "/" + escapeToken(p.additionalProperty),
                 message: "unknown key '" + p.additionalProperty + "'; remove it or check its spelling" };
      case "pattern":
        return { message: describe(data) + " is not " + (PATTERN_WORDS[p.pattern] || "a string matching " + p.pattern) };
      case "enum":
        if (lastKey === "kind") {
          return { message: "unknown check kind " + describe(data) + "; expected one of: " + p.allowedValues.join(", ") };
        }
        return { message: describe(data) + " is not allowed here; expected one of: " + p.allowedValues.join(", ") };
      case "const":
        return { message: describe(data) + " is not allowed here; expected " + JSON.stringify(p.allowedValue) };
      case "type":
        return { message: describe(data) + " has the wrong type; expected " +
                 String(p.type).split(",").map(function (t) { return TYPE_WORDS[t] || t; }).join(" or ") };
      case "not":
        if (e.parentSchema && e.parentSchema.not && e.parentSchema.not.const === 0) {
          return { message: "must not be 0: use a positive number for a reward, a negative one for a penalty" };
        }
        return { message: describe(data) + " is not allowed here" };
      case "minimum": return { message: describe(data) + " is out of range; expected a number ≥ " + p.limit };
      case "maximum": return { message: describe(data) + " is out of range; expected a number ≤ " + p.limit };
      case "exclusiveMinimum": return { message: describe(data) + " is out of range; expected a number > " + p.limit };
      case "exclusiveMaximum": return { message: describe(data) + " is out of range; expected a number < " + p.limit };
      case "minLength": return { message: p.limit === 1 ? "must not be empty" : "must be at least " + p.limit + " characters" };
      case "maxLength": return { message: "must be at most " + p.limit + " characters" };
      case "minItems":
        if (lastKey === "checks") {
          return { message: e.instancePath === "/checks" ? "the rubric needs at least one check" :
                   "a group needs at least one child check in 'checks'" };
        }
        return { message: "must have at least " + p.limit + " item(s)" };
      default:
        return { message: e.message };
    }
  }

  function schemaIssues(errors) {
    errors = (errors || []).filter(function (e) { return e.keyword !== "if"; });
    var consumed = new Set();
    var issues = [];
    errors.forEach(function (e) {
      if (e.keyword !== "anyOf" && e.keyword !== "oneOf") return;
      var related = errors.filter(function (o) {
        return o !== e && !consumed.has(o) && (o.schemaPath.indexOf(e.schemaPath + "/") === 0 ||
          o.instancePath.indexOf(e.instancePath + "/") === 0);
      });
      var deep = related.filter(function (o) { return o.instancePath !== e.instancePath; });
      consumed.add(e);
      if (deep.length) {
        related.forEach(function (o) { if (o.instancePath === e.instancePath) consumed.add(o); });
        return; // the deeper errors say what is wrong inside the value
      }
      related.forEach(function (o) { consumed.add(o); });
      var types = related.filter(function (o) { return o.keyword === "type"; });
      var message;
      if (types.length === related.length && related.length) {
        message = describe(e.data) + " has the wrong type; expected " + types.map(function (o) {
          return TYPE_WORDS[o.params.type] || o.params.type;
        }).filter(function (t, i, all) { return all.indexOf(t) === i; }).join(" or ");
      } else {
        message = related.map(function (o) { return ajvMessage(o).message; })
          .filter(function (m, i, all) { return all.indexOf(m) === i; }).join(" — or — ") || e.message;
      }
      issues.push({ pointer: e.instancePath, message: message, source: "schema" });
    });
    errors.forEach(function (e) {
      if (consumed.has(e)) return;
      var issue = ajvMessage(e);
      issues.push({ pointer: issue.pointer !== undefined ? issue.pointer : e.instancePath, message: issue.message,
                    source: "schema" });
    });
    var seen = {};
    return issues.filter(function (i) {
      var key = i.pointer + "\u0000" + i.message;
      if (seen[key]) return false;
      seen[key] = true;
      return true;
    });
  }

  function validateNow() {
    if (state.validator && state.rubric !== null && !state.parseError) {
      try {
        state.validator(state.rubric);
        state.schemaIssues = schemaIssues(state.validator.errors);
      } catch (e) {
        state.schemaIssues = [];
      }
    } else {
      state.schemaIssues = [];
    }
    renderIssues();
    serverValidate();
  }

  var serverValidate = debounce(function () {
    if (state.serverUnavailable || state.parseError || state.rubric === null) return;
    var seq = ++state.serverSeq;
    var body = JSON.stringify({ rubric: state.rubric });
    fetch(validateUrl, {
      method: "POST", credentials: "same-origin", body: body,
      headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": csrfToken() }
    }).then(function (response) {
      if (response.status === 404 || response.status === 405) { state.serverUnavailable = true; return null; }
      if (!response.ok) return null;
      return response.json();
    }).then(function (data) {
      if (!data || seq !== state.serverSeq) return; // an older answer for text that has changed since
      state.serverIssues = (data.issues || []).map(function (i) {
        return { pointer: i.pointer || "", message: i.message, source: "server" };
      });
      renderIssues();
    }).catch(function () { /* offline or server error: the save will validate anyway */ });
  }, 500);

  function currentIssues() {
    var issues = [];
    var covered = {};
    function add(list) {
      list.forEach(function (issue) {
        var key = issue.pointer === null ? "\u0000" + issue.message : issue.pointer;
        if (covered[key]) return;
        covered[key] = true;
        issues.push(issue);
      });
    }
    var unchanged = textarea.value === state.pageText;
    if (unchanged) add(state.pageIssues);
    // The server's own words for a syntax error (its only rubric error without a pointer) come first.
    var saidByServer = unchanged && state.pageIssues.some(function (i) { return i.pointer === null; });
    if (state.parseError && !saidByServer) {
      issues.push({ pointer: null, source: "parse",
                    message: "JSON syntax error at " + state.parseError.where + ": " + state.parseError.message });
    }
    if (!state.parseError) {
      add(state.schemaIssues);
      // The engine says at a field what the schema already said more precisely inside it
      // (a union like `scale` fails as a whole there); keep the precise one only.
      add(state.serverIssues.filter(function (issue) {
        if (!issue.pointer) return true;
        var inside = state.schemaIssues.some(function (s) { return s.pointer.indexOf(issue.pointer + "/") === 0; });
        var anchor = inside ? anchorFor(issue.pointer) : null;
        return !(anchor && anchor.classList.contains("re-field") && anchor.getAttribute("data-pointer") === issue.pointer);
      }));
    }
    return sortByDocument(issues);
  }

  /* Document order where pointers say it (list indexes), as the engine sorts its issues. */
  function sortByDocument(issues) {
    function key(issue) {
      return issue.pointer === null ? [-2] : issue.pointer.split("/").slice(1).map(function (t) {
        return /^\d+$/.test(t) ? +t : -1;
      });
    }
    return issues.map(function (issue, index) { return { issue: issue, key: key(issue), index: index }; })
      .sort(function (a, b) {
        for (var i = 0; i < Math.max(a.key.length, b.key.length); i++) {
          var x = i < a.key.length ? a.key[i] : -Infinity;
          var y = i < b.key.length ? b.key[i] : -Infinity;
          if (x !== y) return x - y;
        }
        return a.index - b.index;
      })
      .map(function (entry) { return entry.issue; });
  }

  function renderIssues() {
    var issues = currentIssues();
    errorList.innerHTML = "";
    issues.forEach(function (issue) {
      var li = h("li", { className: issue.source === "page" ? "server-error" : "re-issue re-issue-" + issue.source,
                         "data-pointer": issue.pointer === null ? null : issue.pointer });
      if (issue.source === "page") {
        li.textContent = issue.text;
      } else if (issue.pointer !== null) {
        li.appendChild(h("a", { href: "#", className: "re-pointer", text: issue.pointer || "/" }));
        li.appendChild(document.createTextNode(": " + issue.message));
      } else {
        li.textContent = issue.message;
      }
      if (issue.pointer !== null) {
        li.addEventListener("click", function (event) { event.preventDefault(); revealPointer(issue.pointer); });
        li.classList.add("re-clickable");
      }
      errorList.appendChild(li);
    });
    attachIssues(issues);
    renderStatus(issues);
  }

  function renderStatus(issues) {
    statusLine.classList.remove("ok", "error");
    if (state.parseError) {
      statusLine.textContent = "JSON syntax error at " + state.parseError.where;
      statusLine.classList.add("error");
      textarea.classList.add("has-error");
      return;
    }
    textarea.classList.remove("has-error");
    if (issues.length) {
      statusLine.textContent = plural(issues.length, "error");
      statusLine.classList.add("error");
      return;
    }
    if (!state.validator && !state.schemaFailed && state.schema === null) {
      statusLine.textContent = "Checking…";
      return;
    }
    var checks = isObject(state.rubric) && Array.isArray(state.rubric.checks) ? state.rubric.checks : [];
    var count = 0;
    (function walk(list) {
      list.forEach(function (c) { count += 1; if (isObject(c) && Array.isArray(c.checks)) walk(c.checks); });
    })(checks);
    // Children count only through their group, as in the grade's `max`.
    var points = checks.reduce(function (sum, c) {
      return sum + (isObject(c) && typeof c.points === "number" && c.points > 0 ? c.points : 0);
    }, 0);
    statusLine.textContent = "Valid · " + plural(count, "check") + " · " + plural(Math.round(points * 1000) / 1000, "point") +
      (state.validator ? "" : " (schema not loaded: only the server checks it)");
    statusLine.classList.add("ok");
  }

  function anchorFor(pointer) {
    var p = pointer;
    for (;;) {
      var el = structured.querySelector('[data-pointer="' + cssEscape(p) + '"]');
      if (el) return el;
      if (p === "") return null;
      p = p.slice(0, p.lastIndexOf("/"));
    }
  }

  function attachIssues(issues) {
    issues = issues || currentIssues();
    structured.querySelectorAll(".re-error").forEach(function (el) { el.remove(); });
    structured.querySelectorAll(".has-error").forEach(function (el) { el.classList.remove("has-error"); });
    structured.querySelectorAll("[aria-invalid]").forEach(function (el) { el.removeAttribute("aria-invalid"); });
    structured.querySelectorAll(".re-card-has-child-error").forEach(function (el) {
      el.classList.remove("re-card-has-child-error");
    });
    issues.forEach(function (issue) {
      if (issue.pointer === null) return;
      var anchor = anchorFor(issue.pointer);
      if (!anchor) return;
      var message = h("div", { className: "field-error re-error", "data-pointer": issue.pointer, text: issue.message });
      if (anchor.classList.contains("re-field")) {
        anchor.classList.add("has-error");
        anchor.appendChild(message);
        var control = anchor.querySelector("input, select, textarea");
        if (control) control.setAttribute("aria-invalid", "true");
      } else {
        var box = anchor.querySelector(":scope > .re-card-errors");
        var shown = issue.pointer === anchor.getAttribute("data-pointer") ? message :
          h("div", { className: "field-error re-error", "data-pointer": issue.pointer },
            h("code", { text: issue.pointer.slice((anchor.getAttribute("data-pointer") || "").length + 1) }), ": " + issue.message);
        (box || anchor).appendChild(shown);
      }
      var card = anchor.closest(".re-card");
      if (card) {
        card.classList.add("has-error");
        var outer = card.parentElement && card.parentElement.closest(".re-card");
        while (outer) { outer.classList.add("re-card-has-child-error"); outer = outer.parentElement.closest(".re-card"); }
      }
    });
  }

  function revealPointer(pointer) {
    if (state.parseError) { showView("raw"); textarea.focus(); return; }
    showView("structured");
    var anchor = anchorFor(pointer);
    if (!anchor) return;
    anchor.scrollIntoView({ block: "center" });
    var input = anchor.querySelector("input, select, textarea");
    if (input && !input.disabled) input.focus();
  }

  // ------------------------------------------------------------------ tabs

  function showView(view) {
    if (view === "structured") rawChanged.flush();
    root.querySelectorAll("[data-view]").forEach(function (button) {
      var active = button.getAttribute("data-view") === view;
      button.classList.toggle("active", active);
      button.setAttribute("aria-selected", active ? "true" : "false");
    });
    root.querySelectorAll("[data-view-panel]").forEach(function (panel) {
      panel.hidden = panel.getAttribute("data-view-panel") !== view;
    });
  }

  root.querySelectorAll("button[data-view]").forEach(function (button) {
    button.setAttribute("role", "tab");
    button.addEventListener("click", function () { showView(button.getAttribute("data-view")); });
  });

  // Enter in a one-line field of the structured view should not submit the whole task.
  structured.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && event.target.tagName === "INPUT") event.preventDefault();
  });

  // ------------------------------------------------------------------ start

  function readPageIssues() {
    return Array.prototype.map.call(errorList.querySelectorAll("li.server-error"), function (li) {
      var text = li.textContent.trim();
      var split = text.indexOf(": ");
      var pointer = null;
      var message = text;
      if (text.charAt(0) === "/" && split > 0) {
        var full = text.slice(0, split);
        message = text.slice(split + 2);
        // The server's pointers are into the task document; the rubric's own start after /rubric.
        if (full === "/rubric" || full.indexOf("/rubric/") === 0) pointer = full.slice("/rubric".length);
      }
      return { pointer: pointer, message: message, text: text, source: "page" };
    });
  }

  function start() {
    state.pageIssues = readPageIssues();
    var parsed = parseText(textarea.value);
    if (parsed.error) state.parseError = parsed.error;
    else state.rubric = parsed.value;
    if (state.parseError) showView("raw");
    renderStructured();
    renderIssues();

    var timeout = new Promise(function (resolve, reject) {
      setTimeout(function () { reject(new Error("timed out")); }, 8000);
    });
    Promise.race([
      fetch(schemaUrl, { credentials: "same-origin", headers: { "Accept": "application/json" } }).then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      }),
      timeout
    ]).then(function (schema) {
      state.schema = schema;
      indexSchema(schema);
      try {
        state.validator = compileValidator(schema);
      } catch (e) {
        if (window.console) console.warn("rubric editor: schema did not compile", e);
      }
    }).catch(function (e) {
      state.schemaFailed = true;
      if (window.console) console.warn("rubric editor: no schema from " + schemaUrl, e);
    }).then(function () {
      var reparsed = parseText(textarea.value); // the author may have typed while it loaded
      if (reparsed.error) state.parseError = reparsed.error;
      else { state.parseError = null; state.rubric = reparsed.value; }
      renderStructured();
      validateNow();
      root.setAttribute("data-ready", "true");
    });
  }

  start();
})();
