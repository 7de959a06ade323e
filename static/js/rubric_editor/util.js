/* Rubric editor: small DOM and text helpers shared by the editor's modules. */


export function h(tag, attrs) {
  const el = document.createElement(tag);
  if (attrs) {
    Object.keys(attrs).forEach(function (name) {
      const value = attrs[name];
      if (value === undefined || value === null || value === false) return;
      if (name === "text") el.textContent = value;
      else if (name === "className") el.className = value;
      else if (name.slice(0, 2) === "on") el.addEventListener(name.slice(2), value);
      else el.setAttribute(name, value === true ? "" : value);
    });
  }
  for (let i = 2; i < arguments.length; i++) {
    const child = arguments[i];
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) child.forEach(function (c) { if (c) el.appendChild(c); });
    else el.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return el;
}

export function debounce(fn, ms) {
  let timer = null;
  const wrapped = function () {
    clearTimeout(timer);
    timer = setTimeout(function () { timer = null; fn(); }, ms);
  };
  wrapped.flush = function () { if (timer !== null) { clearTimeout(timer); timer = null; fn(); } };
  return wrapped;
}

export function escapeToken(token) { return String(token).replace(/~/g, "~0").replace(/\//g, "~1"); }
export function isObject(value) { return value !== null && typeof value === "object" && !Array.isArray(value); }
export function has(obj, key) { return Object.prototype.hasOwnProperty.call(obj, key); }
export function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

export function describe(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "an object";
  const text = JSON.stringify(value);
  return text.length <= 60 ? text : text.slice(0, 57) + "...";
}

export function csrfToken() {
  try {
    const headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
    if (headers["X-CSRFToken"]) return headers["X-CSRFToken"];
  } catch { /* fall through to the cookie */ }
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  if (match) return decodeURIComponent(match[1]);
  const input = document.querySelector("input[name=csrfmiddlewaretoken]");
  return input ? input.value : "";
}

export function isVisible(el) {
  const r = el.getBoundingClientRect();
  return r.top >= 0 && r.bottom <= (window.innerHeight || document.documentElement.clientHeight);
}

export function cssEscape(value) {
  return window.CSS && CSS.escape ? CSS.escape(value) : String(value).replace(/["\\]/g, "\\$&");
}
