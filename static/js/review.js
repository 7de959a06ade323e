// Review page keyboard: j / k move between checks, c comments on the current check (or the task),
// a / r open the decision (approve / request changes) with the cursor in the task comment, ? shows the
// help. No single key decides: a decision is sent only after a confirming key (Ctrl+Enter in the comment
// box, Enter or the same key again outside it) or the button, and then only after an undo window, so a
// stray key on a page of many tasks approves nothing. Keys typed into a field are left alone.
const cards = Array.from(document.querySelectorAll("[data-review-check]"));
const form = document.getElementById("review-form");
const help = document.getElementById("keyboard-help");
const comment = document.getElementById("task-comment");
const pending = document.getElementById("decision-pending");
const undoBar = document.getElementById("decision-undo");
const DECISION_WORDS = { approve: "Approve", request_changes: "Request changes", comment: "Comment" };
let current = -1;
let opened = "";  // the decision a key opened and not yet confirmed
let timer = null;  // the undo window of a confirmed decision

function select(index) {
  if (!cards.length) return;
  current = Math.max(0, Math.min(cards.length - 1, index));
  cards.forEach((card, i) => card.classList.toggle("current", i === current));
  cards[current].scrollIntoView({ block: "nearest" });
  cards[current].focus({ preventScroll: true });
}

function chosen() {
  return form?.querySelector('input[name="decision"]:checked')?.value || "";
}

function open(decision) {
  if (!form || timer) return;
  const radio = form.querySelector(`input[name="decision"][value="${decision}"]`);
  if (!radio) return;
  radio.checked = true;
  opened = decision;
  pending.querySelector("[data-decision-word]").textContent = DECISION_WORDS[decision] || decision;
  pending.hidden = false;
  form.classList.add("deciding");
  form.scrollIntoView({ block: "nearest" });
  comment?.focus();
}

function closeOpened() {
  opened = "";
  if (pending) pending.hidden = true;
  form?.classList.remove("deciding");
}

function cancelOpened() {
  const radio = form?.querySelector('input[name="decision"]:checked');
  if (radio) radio.checked = false;
  closeOpened();
  comment?.blur();
}

function confirm() {
  if (!form || timer) return;
  closeOpened();
  form.requestSubmit();
}

function undo() {
  clearTimeout(timer);
  timer = null;
  undoBar.hidden = true;
  form.classList.remove("sending");
  for (const control of form.querySelectorAll("[data-locked]")) { control.disabled = false; control.removeAttribute("data-locked"); }
  if (chosen()) open(chosen());  // back to the open decision: edit the comment, send again, or Esc
}

// Every way of sending the decision (a key, Enter, the button) waits out the undo window first.
form?.addEventListener("submit", (event) => {
  if (timer) { event.preventDefault(); return; }
  if (!chosen() || !undoBar) return;  // the server says "Choose a decision."
  event.preventDefault();
  const seconds = Number(undoBar.dataset.seconds) || 5;
  undoBar.querySelector("[data-decision-word]").textContent = DECISION_WORDS[chosen()] || chosen();
  undoBar.querySelector("[data-seconds-left]").textContent = String(seconds);
  undoBar.hidden = false;
  form.classList.add("sending");
  for (const control of form.querySelectorAll("button[type=submit], input[name=decision]")) {
    if (!control.disabled) { control.disabled = true; control.setAttribute("data-locked", ""); }
  }
  undoBar.querySelector("[data-undo]").focus();
  let left = seconds;
  const tick = () => {
    left -= 1;
    if (left > 0) {
      undoBar.querySelector("[data-seconds-left]").textContent = String(left);
      timer = setTimeout(tick, 1000);
      return;
    }
    for (const control of form.querySelectorAll("[data-locked]")) control.disabled = false;
    form.submit();  // no submit event: the window has passed
  };
  timer = setTimeout(tick, 1000);
});

undoBar?.querySelector("[data-undo]")?.addEventListener("click", undo);

function typing(target) {
  return target.closest("input, textarea, select, [contenteditable=true]");
}

document.addEventListener("keydown", (event) => {
  if (timer && event.key === "Escape") { undo(); event.preventDefault(); return; }
  if (opened && event.target === comment) {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { confirm(); event.preventDefault(); }
    else if (event.key === "Escape") { cancelOpened(); event.preventDefault(); }
    return;
  }
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.key === "Escape" && help && !help.hidden) { help.hidden = true; return; }
  if (typing(event.target)) return;
  const key = event.key;
  if (opened && (key === "Enter" || (key === "a" && opened === "approve") || (key === "r" && opened === "request_changes"))) {
    confirm();
  }
  else if (opened && key === "Escape") { cancelOpened(); }
  else if (key === "j") { select(current + 1); }
  else if (key === "k") { select(current < 0 ? 0 : current - 1); }
  else if (key === "c") {
    const box = current >= 0 ? cards[current].querySelector("textarea[data-check-comment]") : comment;
    if (box) { box.closest("details")?.setAttribute("open", ""); box.focus(); }
  }
  else if (key === "a") { open("approve"); }
  else if (key === "r") { open("request_changes"); }
  else if (key === "?") { if (help) help.hidden = !help.hidden; }
  else { return; }
  event.preventDefault();
});

document.getElementById("keyboard-help-toggle")?.addEventListener("click", () => { help.hidden = !help.hidden; });
pending?.querySelector("[data-cancel]")?.addEventListener("click", cancelOpened);

// The per-check comment boxes sit in the cards but belong to the decision form.
if (form) {
  for (const box of document.querySelectorAll("textarea[data-check-comment]")) box.setAttribute("form", form.id);
}
