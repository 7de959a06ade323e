// The task form's role per file being attached: one select for each chosen file, sent as
// `upload_role:<name>`, so that a task's first version can already protect its tests (the rubric lint
// reads these selects as it reads the attached files' ones). A file that looks like a test starts protected.
const input = document.querySelector('#task-form input[type=file][name=files]');
const box = document.getElementById("upload-roles");
const choice = document.getElementById("upload-role-choice");
const TEST_NAME = /(^|\/)(tests?\/|test_[^/]*\.py$|[^/]*_test\.py$|[^/]*\.test\.[jt]s$)/;

function render() {
  box.replaceChildren();
  for (const file of input.files) {
    const field = document.createElement("div");
    field.className = "field upload-role";
    const label = document.createElement("label");
    const select = choice.content.querySelector("select").cloneNode(true);
    const id = `upload-role-${box.children.length}`;
    select.id = id;
    select.name = `${box.dataset.prefix}${file.name}`;
    select.setAttribute("data-file-path", file.name);
    select.value = TEST_NAME.test(file.name) ? "protected" : "workspace";
    label.htmlFor = id;
    label.textContent = `Role of ${file.name}`;
    field.append(label, select);
    box.append(field);
  }
  box.hidden = !input.files.length;
  // The rubric lint looks at file roles again (static/js/rubric_editor/validation.js listens for this).
  box.querySelector("select")?.dispatchEvent(new Event("change", { bubbles: true }));
}

if (input && box && choice) {
  input.addEventListener("change", render);
  if (input.files.length) render();  // a file list the browser kept across a reload
}
