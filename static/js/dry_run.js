// Dry-run grading panel (templates/grading/_dry_run_panel.html).
//
// Posts the rubric CURRENTLY in the editor (the #rubric-json textarea, unsaved) with the
// candidate answer and workspace files, and swaps the server's HTML fragment in. While a
// judge job runs, the fragment polls itself with htmx (hx-trigger="every 1s").
(function () {
  "use strict";

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  function showError(result, message) {
    result.innerHTML = '<div class="dry-run-output" data-status="invalid"><p class="error"><strong>' +
      escapeHtml(message) + "</strong></p></div>";
  }

  function cleanFolder(value) {
    return value.trim().replace(/^\/+/, "").replace(/\/+$/, "");
  }

  function init(panel) {
    if (panel.dataset.dryRunReady) return;
    panel.dataset.dryRunReady = "1";
    const form = panel.querySelector("[data-dry-run-form]");
    const result = panel.querySelector("[data-dry-run-result]");
    const button = panel.querySelector("[data-dry-run-submit]");
    const busy = panel.querySelector("[data-dry-run-busy]");
    const maxBytes = parseInt(panel.dataset.maxBytes || "0", 10);

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      // Let the structured rubric editor write its state into the textarea first.
      document.dispatchEvent(new CustomEvent("gymwright:rubric-sync"));
      const source = document.querySelector(panel.dataset.rubricSource || "#rubric-json");
      const body = new FormData();
      form.querySelectorAll('input[type=hidden], textarea[name="answer"]').forEach(function (field) {
        body.append(field.name, field.value);
      });
      body.append("rubric", source ? source.value : "");

      const answerFile = form.querySelector("[data-dry-run-answer-file]").files[0];
      const folder = cleanFolder(form.querySelector("[data-dry-run-folder]").value);
      const files = Array.prototype.slice.call(form.querySelector("[data-dry-run-files]").files);
      const total = files.reduce(function (sum, file) { return sum + file.size; }, 0);
      if (maxBytes && (total > maxBytes || (answerFile && answerFile.size > maxBytes))) {
        showError(result, "The files are larger than the upload limit (" +
          Math.round(maxBytes / 1048576) + " MB).");
        return;
      }
      if (answerFile) body.append("answer_file", answerFile, answerFile.name);
      files.forEach(function (file) {
        const relative = file.webkitRelativePath || file.name;
        body.append("files", file, file.name);
        body.append("paths", folder ? folder + "/" + relative : relative);
      });

      const csrf = form.querySelector("input[name=csrfmiddlewaretoken]");
      button.disabled = true;
      if (busy) busy.hidden = false;
      fetch(form.action, {
        method: "POST",
        body: body,
        credentials: "same-origin",
        headers: { "X-CSRFToken": csrf ? csrf.value : "", "HX-Request": "true" },
      }).then(function (response) {
        const type = response.headers.get("Content-Type") || "";
        return response.text().then(function (text) {
          if (type.indexOf("application/json") !== -1) {
            let message = "The server refused the request (" + response.status + ").";
            try { message = JSON.parse(text).error.message || message; } catch { /* keep the default */ }
            showError(result, message);
          } else if (!text.trim()) {
            showError(result, "The server answered " + response.status + " with no content.");
          } else {
            result.innerHTML = text;
            if (window.htmx) window.htmx.process(result);
          }
        });
      }).catch(function (error) {
        showError(result, "Could not reach the server: " + error.message);
      }).finally(function () {
        button.disabled = false;
        if (busy) busy.hidden = true;
      });
    });

    // "Add to example answers": the answer (and its workspace files, as text) joins the editor's
    // example-answers JSON, saved with the next version (grading.engine.models.ExampleAnswer).
    const examples = document.querySelector("#examples-json");
    const keep = panel.querySelector("[data-dry-run-keep]");
    if (examples && keep) {
      keep.hidden = false;
      const note = keep.querySelector("[data-dry-run-keep-note]");
      keep.querySelector("[data-dry-run-keep-add]").addEventListener("click", function () {
        const name = keep.querySelector("[data-dry-run-keep-name]").value.trim();
        const expectValue = keep.querySelector("[data-dry-run-keep-expect]").value;
        const answer = form.querySelector('textarea[name="answer"]').value;
        let list;
        try {
          list = JSON.parse(examples.value.trim() || "[]");
        } catch {
          note.textContent = "The example answers field is not valid JSON; fix it first.";
          return;
        }
        if (!Array.isArray(list)) { note.textContent = "The example answers field must be a JSON list."; return; }
        if (!name) { note.textContent = "Give the example a name."; return; }
        if (list.some(function (item) { return item && item.name === name; })) {
          note.textContent = "There is already an example named \u201c" + name + "\u201d.";
          return;
        }
        const folder = cleanFolder(form.querySelector("[data-dry-run-folder]").value);
        const files = Array.prototype.slice.call(form.querySelector("[data-dry-run-files]").files);
        if (files.some(function (file) { return file.size > 262144; })) {
          note.textContent = "Example files are text of at most 256 KiB each; attach larger ones to the task.";
          return;
        }
        Promise.all(files.map(function (file) {
          const relative = file.webkitRelativePath || file.name;
          return file.text().then(function (content) {
            return { path: folder ? folder + "/" + relative : relative, content: content };
          });
        })).then(function (contents) {
          const example = { name: name, answer: answer, expect: expectValue };
          if (contents.length) example.files = contents;
          list.push(example);
          examples.value = JSON.stringify(list, null, 2);
          examples.dispatchEvent(new Event("input", { bubbles: true }));
          note.textContent = "Added \u201c" + name + "\u201d: saved with the next version.";
        });
      });
    }

    // Ctrl/Cmd+Enter in the answer grades it.
    form.querySelector('textarea[name="answer"]').addEventListener("keydown", function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
  }

  function initAll(root) {
    (root || document).querySelectorAll("[data-dry-run]").forEach(init);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { initAll(); });
  } else {
    initAll();
  }
  document.addEventListener("htmx:load", function (event) {
    if (event.detail && event.detail.elt && event.detail.elt.querySelectorAll) initAll(event.detail.elt);
  });
})();
