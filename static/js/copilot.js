/* The rubric copilot in the task editor: ask for drafted checks, show each with its test results,
 * and let the author accept, edit or drop them. Accepted checks are appended to the rubric's JSON
 * (the textarea the form submits); nothing is saved until the author saves the task.
 * Everything the model wrote is shown with textContent, never as HTML.
 */

const panel = document.getElementById("copilot");

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function resultLine(result) {
  const wanted = result.expected ? " (wanted " + result.expected + ")" : "";
  return result.answer + ": " + result.got + wanted;
}

function renderSuggestion(list, item, index) {
  const li = el("li", null, "copilot-suggestion" + (item.preselected ? "" : " flagged"));
  li.dataset.checkId = item.check.id;
  const id = "copilot-accept-" + index;
  const accept = el("input");
  accept.type = "checkbox";
  accept.id = id;
  accept.checked = item.preselected;
  accept.className = "copilot-accept";
  const label = el("label", item.weight + " · " + item.check.points + " points · " + item.check.kind + " · " + item.check.id);
  label.htmlFor = id;
  li.append(accept, " ", label);
  if (item.rationale) li.append(el("p", item.rationale, "muted"));
  const status = item.status === "ok" ? "Passed its tests" : item.status === "needs_sandbox" ? "Needs a sandbox run" : "Marked";
  li.append(el("p", status + (item.problems.length ? ": " + item.problems.join("; ") : "") + ".", item.status === "ok" ? "ok" : "warn"));
  if (item.results.length) {
    const details = el("details");
    details.append(el("summary", "Test results"));
    const ul = el("ul");
    item.results.forEach(function (r) { ul.append(el("li", resultLine(r))); });
    details.append(ul);
    li.append(details);
  }
  const editLabel = el("label", "Check (JSON; edit before adding)");
  const edit = el("textarea");
  edit.className = "copilot-check";
  edit.rows = 4;
  edit.spellcheck = false;
  edit.value = JSON.stringify(item.check, null, 2);
  edit.id = "copilot-check-" + index;
  editLabel.htmlFor = edit.id;
  li.append(editLabel, edit);
  list.append(li);
}

function renderExample(list, example, index) {
  const li = el("li", null, "copilot-example");
  const box = el("input");
  box.type = "checkbox";
  box.id = "copilot-example-" + index;
  box.className = "copilot-example-accept";
  box.checked = true;
  const label = el("label", example.name + (example.flaw ? " (" + example.flaw + ")" : ""));
  label.htmlFor = box.id;
  li.append(box, " ", label, el("pre", example.answer));
  li.exampleAnswer = { name: example.name, answer: example.answer, expect: "fail" };
  list.append(li);
}

/* Ticked degraded answers go into the form's example answers (a JSON list), named apart from those there. */
function addExamples(list, status) {
  const box = document.getElementById("examples-json");
  if (!box) return;
  let examples;
  try { examples = JSON.parse(box.value.trim() || "[]"); } catch {
    status.textContent = "The example answers' JSON does not parse; fix it before adding answers.";
    return;
  }
  if (!Array.isArray(examples)) {
    status.textContent = "The example answers must be a JSON list; fix it before adding answers.";
    return;
  }
  const names = new Set(examples.map(function (e) { return e && e.name; }));
  let added = 0;
  Array.from(list.querySelectorAll("li.copilot-example")).forEach(function (row) {
    if (!row.querySelector(".copilot-example-accept").checked) return;
    const example = Object.assign({}, row.exampleAnswer);
    let name = example.name, n = 2;
    while (names.has(name)) { name = example.name + " (" + n + ")"; n += 1; }
    example.name = name;
    names.add(name);
    examples.push(example);
    row.remove();
    added += 1;
  });
  box.value = JSON.stringify(examples, null, 2);
  box.dispatchEvent(new Event("input", { bubbles: true }));
  status.textContent = added + " answers added to the example answers: save the task to keep them.";
  list.parentElement.hidden = list.children.length === 0;
}

function start() {
  const button = panel.querySelector("#copilot-draft");
  const addButton = panel.querySelector("#copilot-add");
  const status = panel.querySelector("#copilot-status");
  const list = panel.querySelector("#copilot-suggestions");
  const rubricText = document.getElementById("rubric-json");
  const form = document.getElementById("task-form");
  const exampleList = panel.querySelector("#copilot-example-list");
  panel.querySelector("#copilot-add-examples").addEventListener("click", function () { addExamples(exampleList, status); });

  button.addEventListener("click", function () {
    const csrf = form.querySelector("input[name=csrfmiddlewaretoken]");
    const prompt = document.getElementById("id_prompt");
    const reference = document.getElementById("id_solution_answer");
    let rubric;
    try { rubric = JSON.parse(rubricText.value); } catch { rubric = undefined; }
    const body = {};
    if (prompt) body.prompt = prompt.value;
    if (reference) body.reference = reference.value;
    if (rubric && typeof rubric === "object" && !Array.isArray(rubric)) body.rubric = rubric;
    button.disabled = true;
    status.textContent = "Drafting and testing checks…";
    list.replaceChildren();
    exampleList.replaceChildren();
    exampleList.parentElement.hidden = true;
    addButton.hidden = true;
    fetch(panel.dataset.draftUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": csrf ? csrf.value : "" },
      body: JSON.stringify(body)
    }).then(function (response) {
      return response.json().then(function (data) { return { ok: response.ok, data: data }; });
    }).then(function (reply) {
      if (!reply.ok) {
        const error = reply.data && reply.data.error ? reply.data.error.message : "The copilot could not draft.";
        status.textContent = error;
        return;
      }
      const data = reply.data;
      data.suggestions.forEach(function (item, index) { renderSuggestion(list, item, index); });
      status.textContent = data.suggestions.length + " checks drafted with " + data.model + ", " + data.survived +
        " passed their tests and are ticked. Untick to drop; edit the JSON to change one.";
      addButton.hidden = data.suggestions.length === 0;
      (data.examples || []).forEach(function (example, index) { renderExample(exampleList, example, index); });
      exampleList.parentElement.hidden = exampleList.children.length === 0;
    }).catch(function () {
      status.textContent = "The copilot did not answer; try again.";
    }).then(function () { button.disabled = false; });
  });

  addButton.addEventListener("click", function () {
    let rubric;
    try { rubric = JSON.parse(rubricText.value); } catch {
      status.textContent = "The rubric's JSON does not parse; fix it before adding checks.";
      return;
    }
    if (!rubric || typeof rubric !== "object" || Array.isArray(rubric)) rubric = { schema: "gymwright.rubric/v1", checks: [] };
    if (!Array.isArray(rubric.checks)) rubric.checks = [];
    let added = 0;
    const rows = Array.from(list.querySelectorAll("li.copilot-suggestion"));
    for (const row of rows) {
      if (!row.querySelector(".copilot-accept").checked) continue;
      let check;
      try { check = JSON.parse(row.querySelector(".copilot-check").value); } catch {
        status.textContent = "The check " + row.dataset.checkId + " is not valid JSON; fix it or untick it.";
        return;
      }
      rubric.checks.push(check);
      added += 1;
    }
    rows.forEach(function (row) { if (row.querySelector(".copilot-accept").checked) row.remove(); });
    rubricText.value = JSON.stringify(rubric, null, 2);
    rubricText.dispatchEvent(new Event("input", { bubbles: true }));
    status.textContent = added + " checks added to the rubric: save the task to keep them in a new version.";
    addButton.hidden = list.children.length === 0;
  });
}

if (panel) start();
