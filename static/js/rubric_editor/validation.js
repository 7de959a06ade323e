/* Rubric editor, validation: the published schema in the browser (compiled ahead of time by Ajv), the engine through
 * POST /api/rubrics/validate/, and the issues shown at their fields and in the list. */

import { csrfToken, debounce, describe, escapeToken, h, isObject, plural } from "./util.js";
import { PATTERN_WORDS, TYPE_WORDS, anchorFor, errorList, root, state, statusLine, structured, textarea, validateUrl } from "./model.js";

export function ajvMessage(e) {
  const data = e.data;
  const p = e.params || {};
  const lastKey = e.instancePath.split("/").pop();
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

export function schemaIssues(errors) {
  errors = (errors || []).filter(function (e) { return e.keyword !== "if"; });
  const consumed = new Set();
  const issues = [];
  errors.forEach(function (e) {
    if (e.keyword !== "anyOf" && e.keyword !== "oneOf") return;
    const related = errors.filter(function (o) {
      return o !== e && !consumed.has(o) && (o.schemaPath.indexOf(e.schemaPath + "/") === 0 ||
        o.instancePath.indexOf(e.instancePath + "/") === 0);
    });
    const deep = related.filter(function (o) { return o.instancePath !== e.instancePath; });
    consumed.add(e);
    if (deep.length) {
      related.forEach(function (o) { if (o.instancePath === e.instancePath) consumed.add(o); });
      return; // the deeper errors say what is wrong inside the value
    }
    related.forEach(function (o) { consumed.add(o); });
    const types = related.filter(function (o) { return o.keyword === "type"; });
    let message;
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
    const issue = ajvMessage(e);
    issues.push({ pointer: issue.pointer !== undefined ? issue.pointer : e.instancePath, message: issue.message,
                  source: "schema" });
  });
  const seen = {};
  return issues.filter(function (i) {
    const key = i.pointer + "\u0000" + i.message;
    if (seen[key]) return false;
    seen[key] = true;
    return true;
  });
}

export function validateNow() {
  if (state.validator && state.rubric !== null && !state.parseError) {
    try {
      state.validator(state.rubric);
      state.schemaIssues = schemaIssues(state.validator.errors);
    } catch {
      state.schemaIssues = [];
    }
  } else {
    state.schemaIssues = [];
  }
  state.serverPending = !state.serverUnavailable && !state.parseError && state.rubric !== null;
  state.serverSeq += 1;  // an answer still on its way is about text that has changed since: ignored
  renderIssues();
  serverValidate();
}

export const serverValidate = debounce(function () {
  if (state.serverUnavailable || state.parseError || state.rubric === null) {
    state.serverPending = false;
    renderStatus();
    return;
  }
  const seq = ++state.serverSeq;
  function settle(failed) {
    if (seq !== state.serverSeq) return;
    state.serverPending = false;
    state.serverFailed = failed;
    renderIssues();
  }
  const body = JSON.stringify({ rubric: state.rubric, files: fileRoles() });
  fetch(validateUrl, {
    method: "POST", credentials: "same-origin", body: body,
    headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": csrfToken() }
  }).then(function (response) {
    if (response.status === 404 || response.status === 405) { state.serverUnavailable = true; return null; }
    if (!response.ok) return null;
    return response.json();
  }).then(function (data) {
    if (seq !== state.serverSeq) return; // an older answer for text that has changed since
    if (!data) { settle(true); return; }
    state.serverPending = false;
    state.serverFailed = false;
    state.serverIssues = (data.issues || []).map(function (i) {
      return { pointer: i.pointer || "", message: i.message, source: "server" };
    });
    state.serverWarnings = (data.warnings || []).map(function (w) {
      return { pointer: w.pointer || "", message: w.message, source: "warning" };
    });
    renderIssues();
  }).catch(function () { settle(true); /* offline or server error: the save will validate anyway */ });
}, 500);

/* The task's attached files with the roles chosen in the form (the lint warns about tests the
 * agent can change). Files not attached yet are not known here. */
function fileRoles() {
  return Array.prototype.map.call(document.querySelectorAll("select[data-file-path]"), function (select) {
    return { path: select.getAttribute("data-file-path"), role: select.value };
  });
}

document.addEventListener("change", function (event) {
  if (event.target.matches && event.target.matches("select[data-file-path]")) serverValidate();
});

export function currentIssues() {
  const issues = [];
  const covered = {};
  function add(list) {
    list.forEach(function (issue) {
      const key = issue.pointer === null ? "\u0000" + issue.message : issue.pointer;
      if (covered[key]) return;
      covered[key] = true;
      issues.push(issue);
    });
  }
  const unchanged = textarea.value === state.pageText;
  if (unchanged) add(state.pageIssues);
  // The server's own words for a syntax error (its only rubric error without a pointer) come first.
  const saidByServer = unchanged && state.pageIssues.some(function (i) { return i.pointer === null; });
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
      const inside = state.schemaIssues.some(function (s) { return s.pointer.indexOf(issue.pointer + "/") === 0; });
      const anchor = inside ? anchorFor(issue.pointer) : null;
      return !(anchor && anchor.classList.contains("re-field") && anchor.getAttribute("data-pointer") === issue.pointer);
    }));
  }
  return sortByDocument(issues);
}

/* Document order where pointers say it (list indexes), as the engine sorts its issues. */
export function sortByDocument(issues) {
  function key(issue) {
    return issue.pointer === null ? [-2] : issue.pointer.split("/").slice(1).map(function (t) {
      return /^\d+$/.test(t) ? +t : -1;
    });
  }
  return issues.map(function (issue, index) { return { issue: issue, key: key(issue), index: index }; })
    .sort(function (a, b) {
      for (let i = 0; i < Math.max(a.key.length, b.key.length); i++) {
        const x = i < a.key.length ? a.key[i] : -Infinity;
        const y = i < b.key.length ? b.key[i] : -Infinity;
        if (x !== y) return x - y;
      }
      return a.index - b.index;
    })
    .map(function (entry) { return entry.issue; });
}

export function renderIssues() {
  const issues = currentIssues();
  errorList.innerHTML = "";
  issues.forEach(function (issue) {
    const li = h("li", { className: issue.source === "page" ? "server-error" : "re-issue re-issue-" + issue.source,
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
      li.addEventListener("click", function (event) {
        event.preventDefault();
        // The JSON view module shows the pointer (it knows both views).
        root.dispatchEvent(new CustomEvent("rubric:reveal", { detail: { pointer: issue.pointer } }));
      });
      li.classList.add("re-clickable");
    }
    errorList.appendChild(li);
  });
  // Warnings (ways an agent could game the rubric) follow the errors; they do not block saving.
  (state.parseError ? [] : state.serverWarnings || []).forEach(function (warning) {
    const li = h("li", { className: "re-issue re-issue-warning re-clickable", "data-pointer": warning.pointer });
    li.appendChild(h("a", { href: "#", className: "re-pointer", text: "warning " + (warning.pointer || "/") }));
    li.appendChild(document.createTextNode(": " + warning.message));
    li.addEventListener("click", function (event) {
      event.preventDefault();
      root.dispatchEvent(new CustomEvent("rubric:reveal", { detail: { pointer: warning.pointer } }));
    });
    errorList.appendChild(li);
  });
  attachIssues(issues);
  renderStatus(issues);
}

export function renderStatus(issues) {
  issues = issues || currentIssues();
  statusLine.classList.remove("ok", "error");
  if (state.parseError) {
    statusLine.textContent = "JSON syntax error at " + state.parseError.where;
    statusLine.classList.add("error");
    textarea.classList.add("has-error");
    return;
  }
  textarea.classList.remove("has-error");
  // While the server has not judged this text, what it said of the text before is no verdict on this one: the
  // status says "Checking…" (its markers stay until the answer replaces them).
  if (state.serverPending) issues = issues.filter(function (issue) { return issue.source !== "server"; });
  if (issues.length) {
    statusLine.textContent = plural(issues.length, "error");
    statusLine.classList.add("error");
    return;
  }
  if ((!state.validator && !state.schemaFailed && state.schema === null) || state.serverPending) {
    statusLine.textContent = "Checking…";
    return;
  }
  const checks = isObject(state.rubric) && Array.isArray(state.rubric.checks) ? state.rubric.checks : [];
  let count = 0;
  (function walk(list) {
    list.forEach(function (c) { count += 1; if (isObject(c) && Array.isArray(c.checks)) walk(c.checks); });
  })(checks);
  // Children count only through their group, as in the grade's `max`.
  const points = checks.reduce(function (sum, c) {
    return sum + (isObject(c) && typeof c.points === "number" && c.points > 0 ? c.points : 0);
  }, 0);
  statusLine.textContent = "Valid · " + plural(count, "check") + " · " + plural(Math.round(points * 1000) / 1000, "point") +
    (state.validator ? "" : " (schema not loaded: only the server checks it)") +
    (state.serverFailed || state.serverUnavailable ? " (the server did not check it: a save will)" : "");
  statusLine.classList.add("ok");
}

export function attachIssues(issues) {
  issues = issues || currentIssues();
  structured.querySelectorAll(".re-error").forEach(function (el) { el.remove(); });
  structured.querySelectorAll(".has-error").forEach(function (el) { el.classList.remove("has-error"); });
  structured.querySelectorAll("[aria-invalid]").forEach(function (el) { el.removeAttribute("aria-invalid"); });
  structured.querySelectorAll(".re-card-has-child-error").forEach(function (el) {
    el.classList.remove("re-card-has-child-error");
  });
  issues.forEach(function (issue) {
    if (issue.pointer === null) return;
    const anchor = anchorFor(issue.pointer);
    if (!anchor) return;
    const message = h("div", { className: "field-error re-error", "data-pointer": issue.pointer, text: issue.message });
    if (anchor.classList.contains("re-field")) {
      anchor.classList.add("has-error");
      anchor.appendChild(message);
      const control = anchor.querySelector("input, select, textarea");
      if (control) control.setAttribute("aria-invalid", "true");
    } else {
      const box = anchor.querySelector(":scope > .re-card-errors");
      const shown = issue.pointer === anchor.getAttribute("data-pointer") ? message :
        h("div", { className: "field-error re-error", "data-pointer": issue.pointer },
          h("code", { text: issue.pointer.slice((anchor.getAttribute("data-pointer") || "").length + 1) }), ": " + issue.message);
      (box || anchor).appendChild(shown);
    }
    const card = anchor.closest(".re-card");
    if (card) {
      card.classList.add("has-error");
      let outer = card.parentElement && card.parentElement.closest(".re-card");
      while (outer) { outer.classList.add("re-card-has-child-error"); outer = outer.parentElement.closest(".re-card"); }
    }
  });
}


export function readPageIssues() {
  return Array.prototype.map.call(errorList.querySelectorAll("li.server-error"), function (li) {
    const text = li.textContent.trim();
    const split = text.indexOf(": ");
    let pointer = null;
    let message = text;
    if (text.charAt(0) === "/" && split > 0) {
      const full = text.slice(0, split);
      message = text.slice(split + 2);
      // The server's pointers are into the task document; the rubric's own start after /rubric.
      if (full === "/rubric" || full.indexOf("/rubric/") === 0) pointer = full.slice("/rubric".length);
    }
    return { pointer: pointer, message: message, text: text, source: "page" };
  });
}
