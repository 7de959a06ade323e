// Refuse, before sending, any file larger than the server's upload cap, so that a
// too-large file never costs the user a round trip (the server refuses it too).
document.addEventListener("change", (event) => {
  const input = event.target;
  if (!(input instanceof HTMLInputElement) || input.type !== "file") return;
  const cap = Number(document.body.dataset.uploadMaxBytes || 0);
  if (!cap) return;
  const tooBig = [...input.files].filter((file) => file.size > cap);
  input.setCustomValidity(tooBig.length
    ? `${tooBig.map((f) => f.name).join(", ")}: larger than the ${Math.round(cap / 1048576)} MB upload limit`
    : "");
  if (tooBig.length) input.reportValidity();
});
document.addEventListener("submit", (event) => {
  const bad = [...event.target.querySelectorAll("input[type=file]")].find((input) => !input.checkValidity());
  if (bad) { event.preventDefault(); bad.reportValidity(); }
}, true);
