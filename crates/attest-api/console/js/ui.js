// DOM helpers. Text from the API is only ever inserted as text nodes (never as HTML).

// h("tag.class#id", {attr: v, onclick: f}, ...children): an element; strings become text nodes.
export function h(spec, attrs = {}, ...children) {
  const [, tag, rest] = spec.match(/^([a-z0-9]+)(.*)$/i);
  const el = document.createElement(tag);
  for (const part of rest.match(/[.#][^.#]+/g) || []) {
    if (part[0] === ".") el.classList.add(part.slice(1));
    else el.id = part.slice(1);
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    // Through the CSSOM: the Content-Security-Policy refuses inline style attributes.
    else if (k === "style") Object.assign(el.style, v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// A banner that stays until the next result: kind is "warn", "error" or "info".
export function banner(kind, title, text, testid) {
  return h(`div.banner.${kind}`, { role: kind === "info" ? "status" : "alert", "data-testid": testid },
    h("strong", {}, title), " ", text);
}

export function errorBox(e) {
  const field = e.field ? ` (field ${e.field})` : "";
  const hint = e.status === 401 ? " — set an API key (top right)."
    : e.status === 403 ? " — this key's scope does not allow it." : "";
  return banner("error", `${e.code || "error"}:`, `${e.message}${field}${hint}`, "error");
}

export function table(headers, rows, attrs = {}) {
  return h("div.scroll", {}, h("table", attrs,
    h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows)));
}

export const num = (x, digits = 3) => (typeof x === "number" ? Number(x.toFixed(digits)).toString() : "—");
export const pct = (x) => (typeof x === "number" ? `${(x * 100).toFixed(1)}%` : "—");

const STOP = new Set(("a an and are as at be by for from has have how in is it its of on or that the this to was " +
  "were what when where which who whom why will with do does did not").split(" "));

// The query's words worth highlighting (lower case, no stop words).
export function terms(query) {
  return [...new Set((query.toLowerCase().match(/[\p{L}\p{N}]+/gu) || []).filter((t) => t.length > 1 && !STOP.has(t)))];
}

function escapeRe(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

// `text` as nodes with each of `words` (whole words, any case) in <mark>.
export function highlightWords(text, words) {
  if (!words.length) return [text];
  const re = new RegExp(`(?<![\\p{L}\\p{N}])(${words.map(escapeRe).join("|")})(?![\\p{L}\\p{N}])`, "giu");
  const out = [];
  let last = 0;
  for (const m of text.matchAll(re)) {
    out.push(text.slice(last, m.index), h("mark", {}, m[0]));
    last = m.index + m[0].length;
  }
  out.push(text.slice(last));
  return out;
}

// `text` with the first occurrence of `span` in <mark class="quote"> (whitespace-insensitive); null if absent.
export function highlightSpan(text, span) {
  const words = span.trim().split(/\s+/).filter(Boolean).map(escapeRe);
  if (!words.length) return null;
  const m = new RegExp(words.join("\\s+"), "i").exec(text);
  if (!m) return null;
  return [text.slice(0, m.index), h("mark.quote", {}, m[0]), text.slice(m.index + m[0].length)];
}

// Asks in the page's confirm dialog; resolves true when confirmed.
export function confirmDialog(title, text, yes = "Drop") {
  const dlg = document.getElementById("confirm-dialog");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-yes").textContent = yes;
  dlg.returnValue = "";
  dlg.showModal();
  return new Promise((resolve) => dlg.addEventListener("close", () => resolve(dlg.returnValue === "yes"), { once: true }));
}

// A labelled input with a help text under it.
export function field(label, input, help) {
  const id = input.id || `f-${Math.random().toString(36).slice(2)}`;
  input.id = id;
  const helpId = help ? `${id}-help` : undefined;
  if (helpId) input.setAttribute("aria-describedby", helpId);
  return h("div.field", {}, h("label", { for: id }, label), input, help ? h("small", { id: helpId }, help) : null);
}
