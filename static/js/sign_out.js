// Signing out drops the unsaved task drafts this browser kept (unsaved_guard.js): on a shared browser the
// next person must not find someone's unsaved rubric in localStorage.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    if (!event.target.matches("form[data-sign-out]")) return;
    document.documentElement.dataset.signingOut = "true";  // a pending draft save on the way out keeps nothing
    try {
      Object.keys(localStorage)
        .filter(function (key) { return key.startsWith("gymwright:draft:"); })
        .forEach(function (key) { localStorage.removeItem(key); });
    } catch { /* storage off: nothing was kept */ }
  });
})();
