// Fragments marked data-swap-errors answer a refused request (400, 409, ...) with an HTML
// fragment that says why; htmx drops 4xx/5xx bodies by default, so swap them in. (This was
// an hx-on attribute, which needs eval; the Content-Security-Policy allows none.)
document.addEventListener("htmx:beforeSwap", (event) => {
  const elt = event.target;
  if (elt && elt.closest && elt.closest("[data-swap-errors]")) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});
