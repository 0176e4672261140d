// Mixes two colours, with an interactive view (MCP Apps): the `mix` tool
// names ui://mixer/swatch, an HTML page the agent serves among its
// resources, which clients that support MCP Apps render with the result;
// its buttons call `mix` again through the client.
import { Agent, ToolError, t } from "agentsite";

const agent = new Agent({
  name: "mixer",
  description: "Mixes two colours given as #rrggbb, half and half.",
  tags: ["colour", "mcp-apps"],
});

const SWATCH = "ui://mixer/swatch";

agent.view(SWATCH, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Mix</title>
<style>body { font: 15px system-ui, sans-serif; margin: 12px; } #swatch { width: 6em; height: 3em; border: 1px solid #999; }</style>
</head><body>
<div id="swatch" role="img" aria-label="the mixed colour"></div>
<p>Mixed: <output id="mixed">–</output></p>
<p><button type="button" id="lighter">With white</button></p>
<script>
let next = 1, mixed = "#000000";
const waiting = new Map();
function request(method, params) {
  const id = next++;
  parent.postMessage({ jsonrpc: "2.0", id, method, params }, "*");
  return new Promise((resolve, reject) => waiting.set(id, { resolve, reject }));
}
function show(result) {
  mixed = result.structuredContent.colour;
  document.getElementById("mixed").textContent = mixed;
  document.getElementById("swatch").style.background = mixed;
}
addEventListener("message", (event) => {
  const m = event.data || {};
  if (m.id !== undefined && waiting.has(m.id)) {
    const { resolve, reject } = waiting.get(m.id);
    waiting.delete(m.id);
    m.error ? reject(new Error(m.error.message)) : resolve(m.result);
  } else if (m.method === "ui/notifications/tool-result") {
    show(m.params);
  }
});
document.getElementById("lighter").onclick = async () =>
  show(await request("tools/call", { name: "mix", arguments: { a: mixed, b: "#ffffff" } }));
request("ui/initialize", { protocolVersion: "2026-01-26", appInfo: { name: "mixer", version: "0.1.0" }, appCapabilities: {} })
  .then(() => parent.postMessage({ jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} }, "*"));
</script>
</body></html>
`, { name: "swatch", description: "The mixed colour, shown" });

const HEX = /^#[0-9a-fA-F]{6}$/;

agent.tool("mix", {
  description: "The colour halfway between two colours.",
  input: {
    a: t.string().describe("a colour, #rrggbb"),
    b: t.string().describe("another colour, #rrggbb"),
  },
  readOnly: true,
  app: SWATCH,
}, ({ a, b }) => {
  for (const colour of [a, b]) {
    if (!HEX.test(colour)) throw new ToolError(`a colour is #rrggbb, not ${colour}`);
  }
  const channel = (colour, at) => parseInt(colour.slice(at, at + 2), 16);
  const mixed = [1, 3, 5]
    .map((at) => Math.round((channel(a, at) + channel(b, at)) / 2).toString(16).padStart(2, "0"))
    .join("");
  return { colour: `#${mixed}` };
});
