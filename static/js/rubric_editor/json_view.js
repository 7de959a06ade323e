/* Rubric editor, the JSON view: parses what the author types (debounced), locates syntax errors,
 * and switches between the two views. */

import { debounce } from "./util.js";
import { anchorFor, root, state, textarea } from "./model.js";
import { renderStructured, updateFrozen } from "./form_view.js";
import { renderIssues, renderStatus, validateNow } from "./validation.js";

export function parseText(text) {
  try {
    return { value: JSON.parse(text) };
  } catch (e) {
    return { error: describeParseError(e, text) };
  }
}

export function describeParseError(error, text) {
  // Browsers word (and place) JSON errors differently; find the spot ourselves.
  const found = locateJsonError(text);
  const offset = found ? found.offset : null;
  const message = found ? found.message : String(error.message || error);
  let line = null, column = null;
  if (offset !== null) {
    const before = text.slice(0, offset).split("\n");
    line = before.length;
    column = before[before.length - 1].length + 1;
  }
  const where = line !== null ? "line " + line + ", column " + column : "an unknown position";
  return { message: message, line: line, column: column, where: where };
}

/* {offset, message} of the first JSON syntax error in `text` (RFC 8259), or null. */
export function locateJsonError(text) {
  let i = 0;
  function fail(message, at) { throw { offset: at === undefined ? i : at, message: message }; }
  function what() { return i >= text.length ? "unexpected end of the text" : "unexpected '" + text.charAt(i) + "'"; }
  function ws() { while (i < text.length && " \t\n\r".indexOf(text.charAt(i)) >= 0) i++; }
  function string() {
    i++;
    for (;;) {
      if (i >= text.length) fail("unterminated string");
      const c = text.charAt(i);
      if (c === '"') { i++; return; }
      if (c === "\\") {
        const e = text.charAt(i + 1);
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
    const c = text.charAt(i);
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
      const number = /-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
      number.lastIndex = i;
      const m = number.exec(text);
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

export const rawChanged = debounce(function () {
  const parsed = parseText(textarea.value);
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

export function showView(view) {
  if (view === "structured") rawChanged.flush();
  root.querySelectorAll("[data-view]").forEach(function (button) {
    const active = button.getAttribute("data-view") === view;
    button.classList.toggle("active", active);
    button.setAttribute("aria-selected", active ? "true" : "false");
  });
  root.querySelectorAll("[data-view-panel]").forEach(function (panel) {
    panel.hidden = panel.getAttribute("data-view-panel") !== view;
  });
}

/* Typing in the JSON re-renders the form once the text parses; the tabs switch views. */
export function bindJsonView() {
  textarea.addEventListener("input", function () {
    textarea.classList.remove("has-error");
    state.serverPending = true;  // nothing said about this text yet
    state.serverSeq += 1;  // and nothing said about the text before it counts any more
    renderStatus();
    rawChanged();
  });
  root.querySelectorAll("button[data-view]").forEach(function (button) {
    button.setAttribute("role", "tab");
    button.addEventListener("click", function () { showView(button.getAttribute("data-view")); });
  });
  root.addEventListener("rubric:reveal", function (event) { revealPointer(event.detail.pointer); });
}

/* Shows the field an issue's pointer names (the JSON while the text does not parse). */
export function revealPointer(pointer) {
  if (state.parseError) { showView("raw"); textarea.focus(); return; }
  showView("structured");
  const anchor = anchorFor(pointer);
  if (!anchor) return;
  anchor.scrollIntoView({ block: "center" });
  const input = anchor.querySelector("input, select, textarea");
  if (input && !input.disabled) input.focus();
}
