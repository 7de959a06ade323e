// A refused save's summary at the top of the form: focused when the page opens (read out, in view), and each
// link goes to its field and puts the cursor in it.
const summary = document.getElementById("error-summary");
if (summary) {
  summary.focus();
  summary.addEventListener("click", (event) => {
    const link = event.target.closest("a[data-field]");
    if (!link) return;
    const field = document.getElementById(`field-${link.dataset.field}`);
    if (!field) return;
    event.preventDefault();
    // The rubric's JSON box is hidden while the checks view shows: go to the editor, which shows each error.
    const target = field.offsetParent ? field : field.closest("#rubric-editor") || field;
    target.scrollIntoView({ block: "center" });
    target.querySelector("input:not([type=hidden]), textarea, select")?.focus({ preventScroll: true });
  });
}
