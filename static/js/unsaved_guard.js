// Never lose an edit: leaving the task form with unsaved changes asks first, both when the
// browser leaves the page (beforeunload: reload, close, typed URL) and on the site's own links.
// "Changed" means the form's values differ from what the page loaded with, so typing a
// change and undoing it does not ask.
(function () {
  "use strict";
  const form = document.getElementById("task-form");
  if (!form) return;
  let initial = null;
  let leaving = false;

  function snapshot() {
    // The rubric editor writes every structured edit into #rubric-json, so the form data covers it.
    const parts = [];
    new FormData(form).forEach(function (value, key) {
      if (key === "csrfmiddlewaretoken") return;
      parts.push(key + "=" + (value instanceof File ? "file:" + value.name + ":" + value.size : value));
    });
    return parts.join("\u0000");
  }

  function dirty() { return initial !== null && !leaving && snapshot() !== initial; }

  // A draft of the unsaved edit, kept in this browser (localStorage) as it is typed, so that a reload or a
  // crash loses nothing: the page offers it back when it opens. One per page and version edited; dropped
  // when the form is sent or the draft is discarded. Attached files cannot be kept (a browser does not let a
  // page refill a file input).
  // The key names the signed-in user too: on a shared browser no one is offered another's draft (and signing
  // out drops every draft: sign_out.js).
  const base = form.querySelector("input[name=base_version]");
  const draftKey = "gymwright:draft:" + (form.dataset.draftOwner || "") + ":" + location.pathname + ":" +
    (base ? base.value : "new");
  let saveTimer = null;

  function fields() {
    const values = [];
    new FormData(form).forEach(function (value, key) {
      if (key === "csrfmiddlewaretoken" || key === "base_version" || value instanceof File) return;
      values.push([key, value]);
    });
    return values;
  }

  function draftRead() {
    try { return JSON.parse(localStorage.getItem(draftKey) || "null"); } catch { return null; }
  }

  function draftSave() {
    saveTimer = null;
    if (document.documentElement.dataset.signingOut) return;  // sign_out.js dropped the drafts: keep none
    try {
      if (dirty()) localStorage.setItem(draftKey, JSON.stringify({ at: Date.now(), fields: fields() }));
      else localStorage.removeItem(draftKey);
    } catch { /* storage full or off: the leave guard still asks */ }
  }

  function draftDrop() {
    try { localStorage.removeItem(draftKey); } catch { /* nothing kept */ }
  }

  function draftRestore(draft) {
    const byName = {};
    draft.fields.forEach(function (pair) { (byName[pair[0]] = byName[pair[0]] || []).push(pair[1]); });
    Array.prototype.forEach.call(form.elements, function (control) {
      if (!control.name || !(control.name in byName) || control.type === "file" || control.type === "hidden") return;
      if (control.type === "checkbox" || control.type === "radio") {
        control.checked = byName[control.name].indexOf(control.value) !== -1;
      } else {
        control.value = byName[control.name][0];
      }
      // The rubric editor and the previews follow their boxes' input events.
      control.dispatchEvent(new Event("input", { bubbles: true }));
      control.dispatchEvent(new Event("change", { bubbles: true }));
    });
  }

  function offerDraft() {
    const draft = draftRead();
    if (!draft || !Array.isArray(draft.fields)) return;
    const current = JSON.stringify(fields());
    if (JSON.stringify(draft.fields) === current) { draftDrop(); return; }
    const bar = document.createElement("div");
    bar.id = "draft-restore";
    bar.className = "card warn";
    bar.setAttribute("role", "status");
    const when = new Date(draft.at).toLocaleString();
    bar.append("This browser kept unsaved changes to this page from " + when + ". ");
    const restore = document.createElement("button");
    restore.type = "button";
    restore.textContent = "Restore them";
    const discard = document.createElement("button");
    discard.type = "button";
    discard.textContent = "Discard";
    bar.append(restore, " ", discard);
    const split = form.closest(".editor-split") || form;  // above the form and the panel beside it
    split.parentNode.insertBefore(bar, split);
    restore.addEventListener("click", function () { draftRestore(draft); bar.remove(); });
    discard.addEventListener("click", function () { draftDrop(); bar.remove(); });
  }

  // After every deferred and module script ran (the rubric editor may normalise the JSON once).
  window.addEventListener("load", function () {
    initial = snapshot();
    form.dataset.guardReady = "true";
    offerDraft();
  });
  form.addEventListener("submit", function () { leaving = true; draftDrop(); });
  form.addEventListener("input", function () {
    delete document.documentElement.dataset.signingOut;  // still here (the leave prompt said stay): keep drafts
    clearTimeout(saveTimer);
    saveTimer = setTimeout(draftSave, 400);
  });
  form.addEventListener("change", function () {
    clearTimeout(saveTimer);
    saveTimer = setTimeout(draftSave, 400);
  });
  window.addEventListener("pagehide", function () { if (saveTimer !== null) { clearTimeout(saveTimer); draftSave(); } });

  window.addEventListener("beforeunload", function (event) {
    if (!dirty()) return;
    event.preventDefault();
    event.returnValue = "";  // older browsers need a value to show the prompt
  });

  document.addEventListener("click", function (event) {
    const link = event.target.closest && event.target.closest("a[href]");
    if (!link || event.defaultPrevented || link.target === "_blank" || event.ctrlKey || event.metaKey ||
        event.shiftKey || link.getAttribute("href").charAt(0) === "#" || !dirty()) return;
    if (window.confirm("You have unsaved changes to this task. Leave without saving?")) {
      leaving = true;  // asked once: the browser's beforeunload prompt would ask again
    } else {
      event.preventDefault();
    }
  });
})();
