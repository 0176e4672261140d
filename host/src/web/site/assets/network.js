// The network page: the chart of calls per second (redrawn as the node's
// samples come in), and agents announced by peers as they arrive.
import { h } from "./common.js";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 600;
const HEIGHT = 160;
const WINDOW = 600; // seconds shown: the node keeps ten minutes

function svg(tag, attributes) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  return element;
}

/** The chart of `rates` ({at, calls, errors} per second), newest at the right. */
function draw(chart, summary, rates) {
  const now = rates.length ? rates[rates.length - 1].at : Math.floor(Date.now() / 1000);
  const peak = Math.max(1, ...rates.map((r) => r.calls));
  const x = (at) => WIDTH - ((now - at) / WINDOW) * WIDTH;
  const y = (value) => HEIGHT - 4 - (value / peak) * (HEIGHT - 16);
  const line = (key) => rates.map((r, i) => `${i ? "L" : "M"}${x(r.at).toFixed(1)},${y(r[key]).toFixed(1)}`).join(" ");
  const parts = [svg("line", { x1: 0, x2: WIDTH, y1: y(peak), y2: y(peak), class: "grid" })];
  const label = svg("text", { x: 4, y: y(peak) - 2, class: "axis" });
  label.textContent = `${peak}/s`;
  parts.push(label);
  if (rates.length) {
    parts.push(svg("path", { d: line("calls"), class: "calls" }), svg("path", { d: line("errors"), class: "errors" }));
  }
  chart.replaceChildren(...parts);
  const minute = rates.slice(-60);
  const calls = minute.reduce((sum, r) => sum + r.calls, 0);
  const errors = minute.reduce((sum, r) => sum + r.errors, 0);
  summary.textContent = rates.length
    ? `Last minute: ${calls} call${calls === 1 ? "" : "s"} (${(calls / Math.max(1, minute.length)).toFixed(1)}/s), ${errors} failed; highest ${peak}/s in the last ${Math.ceil(rates.length / 60)} min.`
    : "No samples yet: the node samples its calls once a second.";
}

const chart = document.getElementById("rates-chart");
const summary = document.getElementById("rates-summary");
draw(chart, summary, JSON.parse(document.getElementById("rates-data").textContent));
setInterval(async () => {
  if (document.hidden) return;
  try {
    const response = await fetch("/network/rates");
    if (response.ok) draw(chart, summary, await response.json());
  } catch (_) {
    // The next tick tries again; the chart keeps its last picture.
  }
}, 2000);

function when(element) {
  element.textContent = new Date(Number(element.dataset.ms)).toLocaleTimeString();
}
document.querySelectorAll("time[data-ms]").forEach(when);

const list = document.getElementById("announcements");
if (list) {
  const shortPeer = (peer) => (peer.length > 12 ? `…${peer.slice(-8)}` : peer);
  const events = new EventSource("/network/announcements");
  events.addEventListener("announced", (event) => {
    const a = JSON.parse(event.data);
    const time = h("time", { datetime: String(a.at), "data-ms": String(a.at) });
    when(time);
    const item = h("li", { "data-id": a.id },
      h("a", { href: `/hub/agents/${encodeURIComponent(a.id)}` }, a.name), " ",
      h("span", { class: "hint" }, `· ${a.tools} tool${a.tools === 1 ? "" : "s"} · from `, h("a", { class: "peer-link", href: `#peer-${a.host}`, title: a.host }, shortPeer(a.host)), " · ", time),
      h("br"), h("span", { class: "description" }, a.description));
    list.prepend(item);
    while (list.children.length > 50) list.lastElementChild.remove();
    document.getElementById("no-announcements").hidden = true;
  });
}
