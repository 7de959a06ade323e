// Preview pages: show the probe text only for the probe policy; keep the selected rollout
// highlighted while the progress fragment re-renders every second; confirm a cancel.
(function () {
  "use strict";
  let selectedId = null;

  function syncProbe(form) {
    const select = form.querySelector("select[name=policy]");
    const probe = form.querySelector("[data-probe-text]");
    if (select && probe) probe.hidden = select.value !== "probe";
  }

  function markSelected() {
    document.querySelectorAll("tr.rollout-row").forEach(function (row) {
      row.classList.toggle("selected", row.dataset.rolloutId === selectedId);
    });
  }

  // The CSP allows no inline style attribute, so the bar's widths arrive as data-percent.
  function sizeSegments(root) {
    root.querySelectorAll(".stacked-progress > [data-percent]").forEach(function (segment) {
      const percent = parseFloat(segment.dataset.percent);
      segment.style.width = (isFinite(percent) ? Math.max(0, Math.min(100, percent)) : 0) + "%";
    });
  }

  function init(root) {
    sizeSegments(root);
    root.querySelectorAll("form[data-preview-form]").forEach(function (form) {
      syncProbe(form);
      const select = form.querySelector("select[name=policy]");
      if (select && !select.dataset.bound) {
        select.dataset.bound = "1";
        select.addEventListener("change", function () { syncProbe(form); });
      }
    });
    const detail = document.getElementById("rollout-detail");
    if (detail && !selectedId) selectedId = detail.dataset.rolloutId;
    markSelected();
  }

  document.addEventListener("click", function (event) {
    const row = event.target.closest && event.target.closest("tr.rollout-row");
    if (row) {
      selectedId = row.dataset.rolloutId;
      markSelected();
      // The row's link works without JavaScript; with htmx the panel loads in place, and the address names the
      // rollout shown (replaced, not pushed), so a reload or a shared address opens the same one.
      const link = row.querySelector("a[href]");
      if (window.htmx && link) {
        if (event.target.closest("a")) event.preventDefault();
        history.replaceState(history.state, "", link.getAttribute("href"));
      }
    }
  });

  document.addEventListener("submit", function (event) {
    if (event.target.id === "cancel-form" && !window.confirm("Cancel this preview? Queued rollouts will not run.")) {
      event.preventDefault();
    }
  });

  document.addEventListener("htmx:afterSwap", function () { init(document); });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { init(document); });
  } else {
    init(document);
  }
})();
