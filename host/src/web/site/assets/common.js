// What every page's script shares: building elements without ever parsing
// what an agent or a peer wrote as HTML, requests that carry the page's
// anti-forgery value, newline-delimited JSON read as it arrives, and a
// one-line message for the person.

/** An element: `h("p", {class: "x"}, "text", child)`. Strings are text. */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value);
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

function csrf() {
  return document.querySelector('meta[name="csrf"]')?.content ?? "";
}

/** The headers of a change: JSON, and the page's anti-forgery value. */
export function changeHeaders() {
  return { "Content-Type": "application/json", "X-Agentsite-Csrf": csrf() };
}

/** Why a request failed, in one line, from the node's `{"error"}` answer. */
export async function failureOf(response) {
  try {
    const body = await response.json();
    if (body && typeof body.error === "string") return body.error;
    if (body?.error?.message) return body.error.message;
  } catch (_) { /* not JSON */ }
  return `the node answered ${response.status} ${response.statusText}`;
}

/** POSTs `body` as JSON; resolves to the answer's JSON, or throws its error. */
export async function postJson(url, body = {}) {
  let response;
  try {
    response = await fetch(url, { method: "POST", headers: changeHeaders(), body: JSON.stringify(body) });
  } catch (e) {
    throw new Error(`the node cannot be reached: ${e.message}`);
  }
  if (!response.ok) throw new Error(await failureOf(response));
  return response.json();
}

/** Calls `onLine` with each JSON object of a newline-delimited stream. */
export async function readLines(response, onLine) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let pending = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    pending += value;
    let end;
    while ((end = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, end).trim();
      pending = pending.slice(end + 1);
      if (line) onLine(JSON.parse(line));
    }
  }
  if (pending.trim()) onLine(JSON.parse(pending));
}

let toastTimer;
/** A short message at the bottom of the page; `bad` for failures. */
export function toast(message, bad = false) {
  const box = document.getElementById("toast");
  if (!box) return;
  box.textContent = message;
  box.classList.toggle("bad", bad);
  box.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { box.hidden = true; }, bad ? 9000 : 4000);
}

/** Sizes as the node writes them. */
export function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}
