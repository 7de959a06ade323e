// Judge labelling queue: y / n label the current item (saved through the API, no reload),
// s skips, j / k move. Keys typed into a field are left alone.
const queue = document.getElementById("label-queue");
const items = queue ? Array.from(queue.querySelectorAll("[data-label-item]")) : [];
let current = -1;

function select(index) {
  if (!items.length) return;
  current = Math.max(0, Math.min(items.length - 1, index));
  items.forEach((item, i) => item.classList.toggle("current", i === current));
  items[current].scrollIntoView({ block: "nearest" });
  items[current].focus({ preventScroll: true });
}

async function label(item, verdict) {
  const state = item.querySelector(".label-state");
  if (verdict === "skip") { state.textContent = "skipped"; return true; }
  state.textContent = "saving…";
  const response = await fetch(item.dataset.url, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRFToken": queue.dataset.csrf },
    body: JSON.stringify({ verdict }),
  });
  if (!response.ok) {
    let message = response.statusText;
    try { message = (await response.json()).error.message; } catch (e) { /* keep the status text */ }
    state.textContent = "not saved: " + message;
    item.classList.add("has-error");
    return false;
  }
  state.textContent = verdict === "met" ? "labelled: met" : "labelled: not met";
  item.dataset.labelled = verdict;
  item.classList.remove("has-error");
  return true;
}

async function act(index, verdict) {
  if (index < 0) return;
  if (await label(items[index], verdict)) select(index + 1);
}

queue?.addEventListener("click", (event) => {
  const button = event.target.closest("[data-verdict]");
  if (!button) return;
  const index = items.indexOf(button.closest("[data-label-item]"));
  select(index);
  act(index, button.dataset.verdict);
});

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.target.closest("input, textarea, select")) return;
  const verdicts = { y: "met", n: "not_met", s: "skip" };
  if (event.key === "j") select(current + 1);
  else if (event.key === "k") select(current < 0 ? 0 : current - 1);
  else if (verdicts[event.key]) { if (current < 0) select(0); act(current, verdicts[event.key]); }
  else return;
  event.preventDefault();
});
