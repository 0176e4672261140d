"""Splits a bill between people, with an interactive view (MCP Apps): the
``split`` tool names ``ui://split/panel``, an HTML page the agent serves
among its resources, which clients that support MCP Apps render with the
tool's result; its buttons call ``split`` again through the client."""

from agentsite import Agent, ToolError

agent = Agent(
    "split",
    description="Splits a bill evenly between people, to the cent.",
    tags=["money", "bill", "mcp-apps"],
)

PANEL = "ui://split/panel"

agent.view(
    PANEL,
    """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Split</title>
<style>body { font: 15px system-ui, sans-serif; margin: 12px; } output { font-weight: 600; }</style>
</head><body>
<p>Each of <output id="people">–</output> pays <output id="each">–</output></p>
<p><button type="button" id="fewer">One fewer</button> <button type="button" id="more">One more</button></p>
<script>
let next = 1, bill = 0, people = 1;
const waiting = new Map();
function request(method, params) {
  const id = next++;
  parent.postMessage({ jsonrpc: "2.0", id, method, params }, "*");
  return new Promise((resolve, reject) => waiting.set(id, { resolve, reject }));
}
function show(result) {
  const split = result.structuredContent;
  bill = split.bill; people = split.people;
  document.getElementById("people").textContent = split.people;
  document.getElementById("each").textContent = split.each.toFixed(2);
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
async function again(change) {
  show(await request("tools/call", { name: "split", arguments: { bill, people: Math.max(1, people + change) } }));
}
document.getElementById("fewer").onclick = () => again(-1);
document.getElementById("more").onclick = () => again(1);
request("ui/initialize", { protocolVersion: "2026-01-26", appInfo: { name: "split", version: "0.1.0" }, appCapabilities: {} })
  .then(() => parent.postMessage({ jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} }, "*"));
</script>
</body></html>
""",
    name="panel",
    description="The split's interactive view",
)


@agent.tool(read_only=True, app=PANEL)
def split(bill: float, people: int) -> dict:
    """What each person pays when a bill is split evenly.

    Args:
        bill: the whole bill
        people: how many share it (1 or more)
    """
    if people < 1:
        raise ToolError(f"a bill is split between 1 or more people, not {people}")
    return {"bill": bill, "people": people, "each": round(bill / people, 2)}
