/* Rubric editor, the form view: one card per check, each field bound to the rubric object;
 * every edit rewrites the JSON at once and validates. */

import { cssEscape, describe, escapeToken, h, has, isObject, isVisible } from "./util.js";
import { CHOICES, COMMON_KEYS, KIND_LABELS, LABELS, PLACEHOLDERS, TARGET_SUGGESTIONS, TEXTAREA_KEYS, WIDE_KEYS, changeKind, commonProp, kindFieldKeys, kindProps, kindRequired, newCheck, orderCheckKeys, reorder, resolve, rubricProp, serialize, setKey, state, structured, unwrap } from "./model.js";
import { attachIssues, validateNow } from "./validation.js";

let uid = 0;

export function widgetFor(key, prop) {
  if (key === "scale") return "scale";
  if (key === "tags") return "tags";
  if (key === "target") return "target";
  if (!prop) return "json-value"; // no schema loaded: accept any JSON, else text
  const s = unwrap(prop).schema;
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

export function fieldId() { uid += 1; return "re-f" + uid; }

export function structuredChanged() {
  serialize();
  state.parseError = null;
  validateNow();
}

/* One labelled input bound to obj[key]. `pointer` is where errors for it arrive. */
export function field(opts) {
  const obj = opts.obj, key = opts.key, prop = opts.prop, pointer = opts.pointer;
  const widget = opts.widget || widgetFor(key, prop);
  const id = fieldId();
  const value = has(obj, key) ? obj[key] : undefined;
  const u = prop ? unwrap(prop) : { schema: {}, nullable: false, top: {} };
  const dflt = u.top.default !== undefined ? u.top.default : u.schema.default;
  const required = !!opts.required;
  const order = opts.order;
  const wrapper = h("div", { className: "re-field re-w-" + widget + (WIDE_KEYS[key] || opts.wide ? " re-wide" : ""),
                           "data-pointer": pointer, "data-key": key });
  const labelText = opts.label || LABELS[key] || (u.top.title || key);
  const label = h("label", { "for": id, title: u.top.description || u.schema.description || null },
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

  let input;
  if (widget === "checkbox") {
    const effective = value === undefined ? !!dflt : value;
    input = h("input", { type: "checkbox", id: id });
    input.checked = effective === true;
    input.addEventListener("change", function () {
      const checked = input.checked;
      commit(!required && checked === !!dflt && !opts.keepDefault ? undefined : checked);
    });
    return h("div", { className: "re-field re-w-checkbox", "data-pointer": pointer, "data-key": key },
      h("label", { className: "re-check", title: u.top.description || null }, input, " " + labelText));
  }
  if (widget === "select") {
    input = h("select", { id: id });
    const choices = u.schema.enum.slice();
    const current = value === undefined ? dflt : value;
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
      const v = input.value;
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
      const text = input.value.trim();
      if (text === "") { localError(wrapper, null); commit(undefined); return; }
      try {
        const parsed = JSON.parse(text);
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
      const listId = "re-target-suggestions";
      if (!document.getElementById(listId)) {
        document.body.appendChild(h("datalist", { id: listId }, TARGET_SUGGESTIONS.map(function (s) {
          return h("option", { value: s });
        })));
      }
      input.setAttribute("list", listId);
    }
    input.addEventListener("input", function () {
      const raw = input.value;
      const text = raw.trim();
      let next;
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
        else { try { next = JSON.parse(text); } catch { next = raw; } }
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

export function scaleField(obj, key, prop, pointer, wrapper, label, id) {
  const value = obj[key];
  const select = h("select", { id: id },
    h("option", { value: "binary", text: "binary (met / not met)" }),
    h("option", { value: "range", text: "score on a range" }));
  const isRange = isObject(value);
  select.value = isRange ? "range" : "binary";
  const range = h("div", { className: "re-scale-range" });
  function renderRange() {
    range.innerHTML = "";
    if (!isObject(obj[key])) { range.hidden = true; return; }
    range.hidden = false;
    let scaleSchema = null;
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

export function localError(wrapper, message) {
  const existing = wrapper.querySelector(":scope > .re-local-error");
  if (existing) existing.remove();
  if (message) wrapper.appendChild(h("div", { className: "field-error re-local-error", text: message }));
}

export function extraKeys(obj, known, pointer, onChange) {
  const keys = Object.keys(obj).filter(function (k) { return known.indexOf(k) < 0; });
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

export function checkCard(check, list, index, pointer, number) {
  const card = h("div", { className: "check-card re-card", "data-pointer": pointer });
  function structural(focusSelector, focusPointer) {
    serialize();
    renderStructured({ pointer: focusPointer === undefined ? pointer : focusPointer, selector: focusSelector });
    validateNow();
  }
  const tools = h("div", { className: "re-tools" },
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

  const kind = check.kind;
  const order = function (obj) { orderCheckKeys(obj); };
  const kindSelect = h("select", { className: "re-kind", id: fieldId(), "aria-label": "Kind" });
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

  const head = h("div", { className: "check-head" },
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
  const def = state.defsByKind[kind];
  if (def && def.description) {
    card.appendChild(h("div", { className: "muted re-kind-help" }, withCode(def.description.split("\n")[0])));
  }
  const help = kindExample(kind);
  if (help) card.appendChild(help);
  card.appendChild(h("div", { className: "re-card-errors" }));

  const fields = h("div", { className: "check-fields" });
  const props = kindProps(kind);
  const requiredKeys = kindRequired(kind);
  const choice = CHOICES[kind];
  const chosenKeys = choice ? choice.keys.filter(function (k) { return check[k] !== undefined && check[k] !== null; }) : [];
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

  const known = COMMON_KEYS.concat(kindFieldKeys(kind), kind === "group" ? ["checks"] : []);
  const extras = extraKeys(check, known, pointer, function () { structural(null); });
  if (extras) card.appendChild(extras);

  if (kind === "group") {
    const childPointer = pointer + "/checks";
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

export function choiceField(check, choice, chosen, props, pointer, structural) {
  const select = h("select", { id: fieldId(), className: "re-choice-select" });
  choice.keys.forEach(function (k) { select.appendChild(h("option", { value: k, text: LABELS[k] || k })); });
  select.value = chosen;
  select.addEventListener("change", function () {
    const next = select.value;
    const value = check[chosen];
    delete check[chosen];
    check[next] = value === undefined || value === null ? "" : value;
    orderCheckKeys(check);
    structural(".re-choice-select");
  });
  const picker = h("div", { className: "re-field re-choice-picker" },
    h("label", { "for": select.id }, choice.label, h("span", { className: "re-req", title: "required", text: " *" })), select);
  const input = field({ obj: check, key: chosen, prop: props ? props[chosen] : null,
                      pointer: pointer + "/" + escapeToken(chosen), order: orderCheckKeys, label: choice.valueLabel,
                      keepEmpty: true });
  return h("div", { className: "re-choice re-wide" }, picker, input);
}

export function checkList(checks, pointer, prefix) {
  const wrap = h("div", { className: "re-check-list" });
  checks.forEach(function (check, index) {
    wrap.appendChild(checkCard(check, checks, index, pointer + "/" + index, prefix + (index + 1)));
  });
  return wrap;
}

export function addCheckControl(list, pointer, label) {
  const select = h("select", { className: "re-add-kind", "aria-label": "Kind of the new check" });
  state.kinds.forEach(function (k) { select.appendChild(h("option", { value: k, text: KIND_LABELS[k] || k })); });
  const button = h("button", { type: "button", className: "re-add-button",
    onclick: function () {
      list.push(newCheck(select.value));
      serialize();
      renderStructured({ pointer: pointer + "/" + (list.length - 1), selector: "[data-key=id] input" });
      validateNow();
    } }, label);
  return h("div", { className: "re-add" }, select, button);
}

export function rubricFields(rubric) {
  const order = function (obj) { reorder(obj, ["schema", "pass_threshold", "judge", "checks", "probes"]); };
  const judgeSchema = rubricProp("judge");
  const judge = isObject(rubric.judge) ? rubric.judge : {};
  const afterJudge = function () {
    if (!isObject(rubric.judge) && Object.keys(judge).length) setKey(rubric, "judge", judge, order);
    if (isObject(rubric.judge) && !Object.keys(rubric.judge).length) delete rubric.judge;
  };
  const judgeProps = judgeSchema && judgeSchema.properties ? judgeSchema.properties : {};
  const section = h("div", { className: "re-rubric", "data-pointer": "" },
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
    const judgeExtras = extraKeys(rubric.judge, Object.keys(judgeProps).length ? Object.keys(judgeProps) : ["model", "samples", "temperature"],
      "/judge", function () { serialize(); renderStructured(); validateNow(); });
    if (judgeExtras) section.appendChild(judgeExtras);
  }
  const probes = h("details", { className: "re-probes" },
    h("summary", { text: "Probes " + (Array.isArray(rubric.probes) ? "(" + rubric.probes.length + ")" : "") }),
    field({ obj: rubric, key: "probes", prop: { type: "array" }, pointer: "/probes", widget: "json", order: order,
            label: "Probe answers and the most reward each may earn (JSON list)" }));
  if (rubric.probes !== undefined) probes.open = false;
  section.appendChild(probes);
  const extras = extraKeys(rubric, ["schema", "pass_threshold", "judge", "checks", "probes"], "",
    function () { serialize(); renderStructured(); validateNow(); });
  if (extras) section.appendChild(extras);
  return section;
}

export function renderStructured(focus) {
  const rubric = state.rubric;
  const openProbes = structured.querySelector(".re-probes[open]") !== null;
  structured.innerHTML = "";
  const fieldset = h("fieldset", { className: "re-fieldset" });
  const banner = h("div", { className: "re-banner", hidden: true });
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
  const rubricSection = rubricFields(rubric);
  fieldset.appendChild(rubricSection);
  if (openProbes) rubricSection.querySelector(".re-probes").open = true;
  const checksWrap = h("div", { className: "re-checks", "data-pointer": "/checks" },
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
    const anchor = structured.querySelector('[data-pointer="' + cssEscape(focus.pointer) + '"]');
    let target = anchor && (focus.selector ? anchor.querySelector(focus.selector) : null);
    if (!target && anchor && !focus.selector) target = anchor.querySelector("input, select, textarea");
    if (target && !target.disabled) target.focus();
    if (anchor && anchor.scrollIntoView && !isVisible(anchor)) anchor.scrollIntoView({ block: "nearest" });
  }
}

/* While the JSON does not parse, the structured view shows the last good rubric, read-only. */
export function updateFrozen() {
  const fieldset = structured.querySelector(".re-fieldset");
  const banner = structured.querySelector(".re-banner");
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

/* The schema's descriptions mark code with backticks: show it as code, the rest as text (no Markdown). */
export function withCode(text) {
  return String(text).split("`").map(function (part, i) {
    return i % 2 ? h("code", { text: part }) : document.createTextNode(part);
  });
}

let examples = null;

/* The engine's worked example for `kind` (grading/engine/kind_examples.py, put in the page as JSON). */
function kindExample(kind) {
  if (examples === null) {
    const source = document.getElementById("kind-examples");
    try { examples = source ? JSON.parse(source.textContent) : {}; } catch { examples = {}; }
  }
  const example = examples[kind];
  if (!example) return null;
  const files = Object.keys(example.files || {}).map(function (path) {
    return [h("div", { className: "muted", text: "Workspace file " + path }), h("pre", { text: example.files[path] })];
  });
  return h("details", { className: "re-kind-example", "data-kind": kind },
    h("summary", { text: "Example and edge cases" }),
    h("div", { className: "muted", text: "Check" }), h("pre", { text: JSON.stringify(example.check, null, 2) }),
    h("div", { className: "muted", text: "Answer" }), h("pre", { text: example.answer || "(empty)" }),
    [].concat.apply([], files),
    h("div", { className: "muted", text: "Result" }), h("p", { className: "re-example-result", text: example.result }),
    example.edge_cases.length ? h("ul", { className: "re-edge-cases" },
      example.edge_cases.map(function (note) { return h("li", null, withCode(note)); })) : null,
    h("a", { href: (document.querySelector("#rubric-editor .kinds-link")?.getAttribute("href") || "/grading/kinds/") +
             "#kind-" + kind, target: "_blank", text: "All check kinds ›" }));
}
