// Review page keyboard: j / k move between checks, c comments on the current check (or the task),
// a approves, r requests changes, ? shows the help. Keys typed into a field are left alone.
const cards = Array.from(document.querySelectorAll("[data-review-check]"));
const form = document.getElementById("review-form");
const help = document.getElementById("keyboard-help");
let current = -1;

function select(index) {
  if (!cards.length) return;
  current = Math.max(0, Math.min(cards.length - 1, index));
  cards.forEach((card, i) => card.classList.toggle("current", i === current));
  cards[current].scrollIntoView({ block: "nearest" });
  cards[current].focus({ preventScroll: true });
}

function decide(decision) {
  if (!form) return;
  const radio = form.querySelector(`input[name="decision"][value="${decision}"]`);
  if (!radio) return;
  radio.checked = true;
  form.requestSubmit();
}

function typing(target) {
  return target.closest("input, textarea, select, [contenteditable=true]");
}

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.key === "Escape" && help && !help.hidden) { help.hidden = true; return; }
  if (typing(event.target)) return;
  const key = event.key;
  if (key === "j") { select(current + 1); }
  else if (key === "k") { select(current < 0 ? 0 : current - 1); }
  else if (key === "c") {
    const box = current >= 0 ? cards[current].querySelector("textarea[data-check-comment]")
                              : document.getElementById("task-comment");
    if (box) { box.closest("details")?.setAttribute("open", ""); box.focus(); }
  }
  else if (key === "a") { decide("approve"); }
  else if (key === "r") { decide("request_changes"); }
  else if (key === "?") { if (help) help.hidden = !help.hidden; }
  else { return; }
  event.preventDefault();
});

document.getElementById("keyboard-help-toggle")?.addEventListener("click", () => { help.hidden = !help.hidden; });

// The per-check comment boxes sit in the cards but belong to the decision form.
if (form) {
  for (const box of document.querySelectorAll("textarea[data-check-comment]")) box.setAttribute("form", form.id);
}
