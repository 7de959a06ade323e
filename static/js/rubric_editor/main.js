/* Rubric editor: a structured per-check form and the raw JSON, kept in sync.
 *
 * The textarea #rubric-json is the only thing the form submits; the structured view
 * is a projection of it. Structured edits rewrite the JSON at once; JSON edits
 * re-render the structured view once the text parses (debounced), and while it does
 * not parse the structured view is frozen on the last good version so nothing typed
 * in the JSON is overwritten. Field lists and types come from the published JSON
 * Schema (/api/schema/rubric.json); the modules only add order, labels and widgets:
 *
 *   model.js       the page's elements, state, words, schema access, rubric edits
 *   form_view.js   the structured view (one card per check)
 *   json_view.js   the JSON view: parsing, syntax-error positions, tabs
 *   validation.js  the schema in the browser + the engine on the server; issues at their fields
 *   schema_validator.js  the rubric schema compiled by Ajv ahead of time (generated: make editor-validator)
 *
 * Validation never blocks submitting: the server validates again and re-renders.
 */

import { indexSchema, root, schemaUrl, state, structured, textarea } from "./model.js";
import { renderStructured } from "./form_view.js";
import { bindJsonView, parseText, showView } from "./json_view.js";
import { readPageIssues, renderIssues, validateNow } from "./validation.js";
import validateRubric from "./schema_validator.js";

function start() {
  bindJsonView();
  // Enter in a one-line field of the structured view should not submit the whole task.
  structured.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && event.target.tagName === "INPUT") event.preventDefault();
  });

  state.pageIssues = readPageIssues();
  const parsed = parseText(textarea.value);
  if (parsed.error) state.parseError = parsed.error;
  else state.rubric = parsed.value;
  if (state.parseError) showView("raw");
  renderStructured();
  renderIssues();

  const timeout = new Promise(function (resolve, reject) {
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
    state.validator = validateRubric; // compiled ahead of time (make editor-validator): no eval in the page
  }).catch(function (e) {
    state.schemaFailed = true;
    if (window.console) console.warn("rubric editor: no schema from " + schemaUrl, e);
  }).then(function () {
    const reparsed = parseText(textarea.value); // the author may have typed while it loaded
    if (reparsed.error) state.parseError = reparsed.error;
    else { state.parseError = null; state.rubric = reparsed.value; }
    renderStructured();
    validateNow();
    root.setAttribute("data-ready", "true");
  });
}

if (root && textarea) start();
