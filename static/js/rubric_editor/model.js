/* Rubric editor, the model: the rubric document: the page's elements, the editor's state, the hand-written
 * order and words, schema access and edits of the rubric object (no rendering). */

import { cssEscape, has, isObject } from "./util.js";

// The page's elements (module scripts run once the document is parsed).
export const root = document.getElementById("rubric-editor");
export const textarea = document.getElementById("rubric-json");
export const structured = document.getElementById("rubric-structured");
export const errorList = document.getElementById("rubric-errors");
export const statusLine = document.getElementById("rubric-status");
export const schemaUrl = (root && root.getAttribute("data-schema-url")) || "/api/schema/rubric.json";
export const validateUrl = (root && root.getAttribute("data-validate-url")) || "/api/rubrics/validate/";

// ------------------------------------------------------------------ hand-written order and words

export const COMMON_KEYS = ["id", "kind", "points", "required", "title", "tags", "target"];
export const KIND_FIELDS = {
  string_match: ["expected", "mode", "case_sensitive", "normalize_whitespace", "normalize_unicode"],
  regex: ["pattern", "flags", "must_match", "min_count", "normalize_unicode"],
  number: ["expected", "tolerance", "rel_tolerance", "extract", "normalize_unicode"],
  json_field: ["pointer", "op", "expected"],
  file_exists: ["path"],
  file_content: ["path", "contains", "not_contains", "regex", "equals", "sha256", "normalize_unicode"],
  table_cell: ["path", "sheet", "row", "column", "expected", "tolerance", "normalize_unicode"],
  text_similarity: ["metric", "reference", "threshold", "normalize_unicode"],
  command: ["run", "expect_exit", "timeout_s"],
  python: ["code", "function", "args", "timeout_s"],
  tests: ["files", "runner", "select", "credit", "timeout_s"],
  llm_judge: ["criterion", "reference", "scale", "samples", "model"],
  group: ["aggregate"]
};
export const KIND_LABELS = {
  string_match: "String match", regex: "Regex", number: "Number", json_field: "JSON field",
  file_exists: "File exists", file_content: "File content", table_cell: "Table cell",
  text_similarity: "Text similarity", command: "Command", python: "Python", tests: "Tests", llm_judge: "LLM judge",
  group: "Group"
};
export const LABELS = {
  id: "Id", points: "Points", required: "Required (gate)", title: "Title", tags: "Tags", target: "Target",
  expected: "Expected", mode: "Mode", case_sensitive: "Case sensitive",
  normalize_whitespace: "Normalise whitespace", normalize_unicode: "Normalise Unicode", pattern: "Pattern",
  flags: "Flags", must_match: "Must match",
  min_count: "Min. matches", tolerance: "Tolerance", rel_tolerance: "Relative tolerance",
  extract: "Extract (regex, one group)", pointer: "JSON pointer", op: "Operator", path: "Path",
  contains: "Contains", regex: "Regex", equals: "Equals", sha256: "SHA-256", sheet: "Sheet", row: "Row",
  column: "Column", metric: "Metric", reference: "Reference", threshold: "Threshold", run: "Command",
  expect_exit: "Expected exit code", timeout_s: "Timeout (s)", code: "Code (defines check(ctx))",
  "function": "Function (module:callable)", args: "Args (JSON object)", criterion: "Criterion",
  scale: "Scale", samples: "Samples", model: "Judge model", aggregate: "Aggregate",
  files: "Test files (JSON list; role protected or grader)", runner: "Runner",
  select: "Select test ids (JSON list; all when empty)", credit: "Credit",
  pass_threshold: "Pass threshold", temperature: "Judge temperature", probes: "Probes (JSON)"
};
export const PLACEHOLDERS = {
  target: "answer", tags: "comma, separated", path: "report.md", pointer: "/totals/0",
  "function": "checks:totals_match", extract: "total: (\\S+)", flags: "e.g. im", run: "pytest -q tests/",
  sheet: "name or 0-based index", row: "label or 0-based index", column: "label or 0-based index",
  model: "judge"
};
// Free text that is usually longer than a line.
export const TEXTAREA_KEYS = { criterion: 3, reference: 3, code: 6, equals: 3, contains: 2 };
// Fields that read better across the whole card.
export const WIDE_KEYS = { criterion: 1, reference: 1, code: 1, equals: 1, contains: 1, run: 1, pattern: 1,
                  expected: 1, args: 1 };
// Kinds that take exactly one of some keys (the engine checks it; RUBRIC.md says so).
export const CHOICES = {
  file_content: { label: "Match by", valueLabel: "Value", keys: ["contains", "not_contains", "regex", "equals", "sha256"] },
  python: { label: "Defined by", valueLabel: "Source", keys: ["code", "function"] }
};
export const STARTERS = {
  file_content: { contains: "" },
  python: { code: "def check(ctx):\n    return True\n" },
  tests: { files: [] }
};
export const TARGET_SUGGESTIONS = ["answer", "trajectory", "file:", "stdout:"];
export const PATTERN_WORDS = {
  "^[a-z0-9_]{1,64}$": "a check id: 1 to 64 lowercase letters, digits or underscores",
  "^[0-9a-f]{64}$": "a sha256: 64 lowercase hex digits",
  "^[aimsx]*$": "flag letters from 'aimsx', e.g. 'im'",
  "^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$": "'module:function', e.g. 'checks:totals_match'",
  "^(answer|trajectory|file:[\\s\\S]+|stdout:[\\s\\S]+)$":
    "a target: 'answer', 'trajectory', 'file:<workspace path>' or 'stdout:<command>'"
};
export const TYPE_WORDS = { string: "a string", integer: "an integer", number: "a number", boolean: "true or false",
                   array: "a list", object: "an object", "null": "null" };

// ------------------------------------------------------------------ state

export const state = {
  rubric: null,          // the last rubric that parsed (the structured view shows it)
  parseError: null,      // {message, line, column} while the JSON does not parse
  schema: null,          // the published schema, once loaded
  schemaFailed: false,
  defsByKind: {},        // kind -> its $defs entry
  kinds: Object.keys(KIND_FIELDS),
  validator: null,       // schema_validator.js, set once the schema is loaded
  schemaIssues: [],      // from Ajv, pointers into the rubric
  serverIssues: [],      // from POST /api/rubrics/validate/
  serverWarnings: [],    // its lint warnings (not errors)
  serverSeq: 0,
  serverUnavailable: false,
  // Text the server has not judged yet (typed, or sent and not answered): the status says "Checking…", never
  // "Valid", until the server agrees, so that the page never calls valid what a save refuses (regex syntax
  // is Python's, which the browser cannot check).
  serverPending: false,
  serverFailed: false,   // the last check could not reach the server: "Valid" says the server did not check it
  pageIssues: [],        // rendered by the server with the page; valid while the text is unchanged
  pageText: textarea ? textarea.value : ""
};
export const stash = new WeakMap(); // check -> {kind: {key: value}} of fields dropped by a kind change

// ------------------------------------------------------------------ schema access

export function resolve(node) {
  let guard = 0;
  while (node && node.$ref && state.schema && guard++ < 10) {
    const name = node.$ref.replace(/^#\/\$defs\//, "");
    node = (state.schema.$defs || {})[name];
  }
  return node || {};
}

export function indexSchema(schema) {
  state.defsByKind = {};
  const kinds = [];
  Object.keys(schema.$defs || {}).forEach(function (name) {
    const def = schema.$defs[name];
    const kind = def && def.properties && def.properties.kind && def.properties.kind.const;
    if (typeof kind === "string") { state.defsByKind[kind] = def; def.__name = name; kinds.push(kind); }
  });
  if (kinds.length) {
    // Hand order first, then any kind the schema has that this file does not know yet.
    state.kinds = Object.keys(KIND_FIELDS).filter(function (k) { return kinds.indexOf(k) >= 0; })
      .concat(kinds.filter(function (k) { return !has(KIND_FIELDS, k); }));
  }
}

export function kindProps(kind) {
  const def = state.defsByKind[kind];
  return def ? def.properties || {} : null;
}

export function kindRequired(kind) {
  const def = state.defsByKind[kind];
  return def ? def.required || [] : [];
}

export function kindFieldKeys(kind) {
  const props = kindProps(kind);
  const hand = KIND_FIELDS[kind] || [];
  if (!props) return hand.slice();
  const keys = hand.filter(function (k) { return has(props, k); });
  Object.keys(props).forEach(function (k) {
    if (COMMON_KEYS.indexOf(k) < 0 && keys.indexOf(k) < 0 && !(kind === "group" && k === "checks")) keys.push(k);
  });
  return keys;
}

export function commonProp(key) {
  const anyDef = state.defsByKind[state.kinds[0]];
  return anyDef && anyDef.properties ? anyDef.properties[key] : null;
}

export function rubricProp(key) {
  if (!state.schema) return null;
  if (key === "judge") return resolve((state.schema.properties || {}).judge);
  return (state.schema.properties || {})[key] || null;
}

/* {schema, nullable} with `anyOf: [X, {type: null}]` unwrapped. */
export function unwrap(prop) {
  prop = resolve(prop);
  if (prop.anyOf) {
    const rest = prop.anyOf.filter(function (p) { return p.type !== "null"; });
    const nullable = rest.length < prop.anyOf.length;
    if (rest.length === 1) return { schema: resolve(rest[0]), nullable: nullable, top: prop };
    return { schema: { anyOf: rest }, nullable: nullable, top: prop };
  }
  return { schema: prop, nullable: false, top: prop };
}


export function fitsType(value, prop) {
  if (!prop) return true;
  const u = unwrap(prop);
  if (value === null) return u.nullable;
  const types = u.schema.anyOf ? u.schema.anyOf.map(function (p) { return resolve(p).type; }) : [u.schema.type];
  if (types.indexOf(undefined) >= 0) return true;
  return types.some(function (t) {
    if (t === "integer") return typeof value === "number" && Math.floor(value) === value;
    if (t === "array") return Array.isArray(value);
    if (t === "object") return isObject(value);
    return typeof value === t;
  });
}

// ------------------------------------------------------------------ document editing

export function serialize() {
  textarea.value = JSON.stringify(state.rubric, null, 2);
}

/* Keys in a readable order: common keys, the kind's fields, children, then the rest. */
export function orderCheckKeys(check) {
  const order = COMMON_KEYS.concat(kindFieldKeys(check.kind), ["checks"]);
  reorder(check, order);
}

export function reorder(obj, order) {
  const keys = Object.keys(obj);
  const sorted = order.filter(function (k) { return has(obj, k); })
    .concat(keys.filter(function (k) { return order.indexOf(k) < 0; }));
  if (sorted.join("\u0000") === keys.join("\u0000")) return;
  const copy = {};
  keys.forEach(function (k) { copy[k] = obj[k]; delete obj[k]; });
  sorted.forEach(function (k) { obj[k] = copy[k]; });
}

export function setKey(obj, key, value, order) {
  const isNew = !has(obj, key);
  if (value === undefined) delete obj[key];
  else obj[key] = value;
  if (isNew && value !== undefined && order) order(obj);
}

export function allIds(checks, out) {
  (checks || []).forEach(function (c) {
    if (isObject(c)) {
      if (typeof c.id === "string") out[c.id] = true;
      if (Array.isArray(c.checks)) allIds(c.checks, out);
    }
  });
  return out;
}

export function newCheck(kind) {
  const taken = allIds(state.rubric.checks, {});
  let n = 1;
  while (taken[kind + "_" + n]) n++;
  const check = { id: kind + "_" + n, kind: kind, points: 1 };
  fillRequired(check);
  return check;
}

export function fillRequired(check) {
  const props = kindProps(check.kind) || {};
  kindRequired(check.kind).forEach(function (key) {
    if (has(check, key)) return;
    if (key === "checks" && check.kind === "group") check.checks = [newCheck("string_match")];
    else if (props[key] && unwrap(props[key]).schema.type === "string") check[key] = "";
    // Numbers stay missing: the editor shows "required" at the field until one is typed.
  });
  const starter = STARTERS[check.kind] || {};
  const choice = CHOICES[check.kind];
  const chosen = choice ? choice.keys.some(function (k) { return check[k] !== undefined && check[k] !== null; }) : false;
  Object.keys(starter).forEach(function (key) {
    if (!has(check, key) && !chosen) check[key] = starter[key];
  });
  orderCheckKeys(check);
}

/* Keeps the common keys and whatever of the old kind's fields the new kind also has. */
export function changeKind(check, kind) {
  const oldKind = check.kind;
  const newProps = kindProps(kind);
  const newKeys = kindFieldKeys(kind);
  const saved = stash.get(check) || {};
  const dropped = {};
  const next = {};
  Object.keys(check).forEach(function (key) {
    if (key === "kind") return;
    const keep = COMMON_KEYS.indexOf(key) >= 0 ||
      (newKeys.indexOf(key) >= 0 || (kind === "group" && key === "checks")) &&
      (!newProps || fitsType(check[key], newProps[key]));
    if (keep) next[key] = check[key];
    else dropped[key] = check[key];
  });
  if (typeof oldKind === "string") saved[oldKind] = dropped;
  const restored = saved[kind] || {};
  Object.keys(restored).forEach(function (key) { if (!has(next, key)) next[key] = restored[key]; });
  Object.keys(check).forEach(function (key) { delete check[key]; });
  Object.keys(next).forEach(function (key) { check[key] = next[key]; });
  check.kind = kind;
  stash.set(check, saved);
  fillRequired(check);
}

/* The element of the structured view that shows `pointer`, or its nearest ancestor's. */
export function anchorFor(pointer) {
  let p = pointer;
  for (;;) {
    const el = structured.querySelector('[data-pointer="' + cssEscape(p) + '"]');
    if (el) return el;
    if (p === "") return null;
    p = p.slice(0, p.lastIndexOf("/"));
  }
}
