// Review threads in the task editor: each thread is shown inside the card of its check.
// The editor redraws its cards as the author types, so the threads are put back after each redraw.
const panel = document.getElementById("review-threads");
const structured = document.getElementById("rubric-structured");

function cardFor(checkId) {
  for (const input of structured.querySelectorAll('.re-card [data-pointer$="/id"] input')) {
    if (input.value === checkId) return input.closest(".re-card");
  }
  return null;
}

function place() {
  for (const thread of panel.querySelectorAll("[data-check-thread]")) {
    placeOne(thread);
  }
  for (const thread of placed) {
    if (!thread.isConnected || !structured.contains(thread)) placeOne(thread);
  }
}

const placed = new Set();

function placeOne(thread) {
  const checkId = thread.dataset.checkThread;
  const card = checkId ? cardFor(checkId) : null;
  if (card) {
    if (thread.parentElement !== card) card.appendChild(thread);
    placed.add(thread);
  } else if (!panel.contains(thread)) {
    panel.appendChild(thread);
    placed.delete(thread);
  }
}

if (panel && structured) {
  let scheduled = false;
  new MutationObserver(() => {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => { scheduled = false; place(); });
  }).observe(structured, { childList: true, subtree: true });
  place();
  // A thread answered in place (Reply, Resolve: htmx swaps in a new one) may be resolved or reopened: count again.
  document.body.addEventListener("htmx:load", () => {
    const count = panel.querySelector("[data-open-threads]");
    if (count) count.textContent = document.querySelectorAll("[data-check-thread] .thread:not(.resolved)").length;
  });
  panel.addEventListener("click", (event) => {
    const link = event.target.closest("[data-goto-check]");
    if (!link) return;
    event.preventDefault();
    const card = cardFor(link.dataset.gotoCheck);
    if (card) card.scrollIntoView({ block: "center" });
  });
}
