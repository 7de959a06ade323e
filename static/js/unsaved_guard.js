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

  // After every deferred and module script ran (the rubric editor may normalise the JSON once).
  window.addEventListener("load", function () { initial = snapshot(); form.dataset.guardReady = "true"; });
  form.addEventListener("submit", function () { leaving = true; });

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
