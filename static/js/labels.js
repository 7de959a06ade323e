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

async function post(url, verdict) {
  const response = await fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRFToken": queue.dataset.csrf },
    body: JSON.stringify({ verdict }),
  });
  if (response.ok) return null;
  try { return (await response.json()).error.message; } catch { return response.statusText; }
}

// A card holds every judged copy of one text against one criterion (review/label_cards.py): its verdict is
// saved on each copy, one request each, and the card says how many were saved.
async function label(item, verdict) {
  const state = item.querySelector(".label-state");
  if (verdict === "skip") { state.textContent = "skipped"; return true; }
  const urls = item.dataset.urls.split(" ").filter(Boolean);
  state.textContent = "saving…";
  let saved = 0;
  let problem = null;
  for (const url of urls) {
    const message = await post(url, verdict);
    if (message === null) saved += 1; else problem = problem || message;
  }
  const words = verdict === "met" ? "met" : "not met";
  if (problem !== null) {
    state.textContent = (saved ? `labelled ${saved} of ${urls.length}: ${words}; ` : "") + "not saved: " + problem;
    item.classList.add("has-error");
    return false;
  }
  state.textContent = "labelled: " + words + (urls.length > 1 ? ` (all ${urls.length})` : "");
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
