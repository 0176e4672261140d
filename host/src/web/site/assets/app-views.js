// The views of an agent's tools (MCP Apps, SEP-1865) on its page. Each
// view runs in a frame whose own policy (app_view.rs) gives it an opaque
// origin and no network; this page is its host: it answers the view's
// JSON-RPC messages over postMessage and calls the agent's tools for it
// through the page's own route, with the page's anti-forgery header, so
// the node's grants and rules apply to every call a view makes.
import { postJson } from "./common.js";

const PROTOCOL_VERSION = "2026-01-26";
/** The most a view may have the page call at once. */
const MAX_IN_FLIGHT = 4;
/** The largest message read from a view, as JSON text. */
const MAX_MESSAGE = 1024 * 1024;
const MIN_HEIGHT = 120;
const MAX_HEIGHT = 1600;

const article = document.querySelector("article.agent");
const base = `/hub/agents/${encodeURIComponent(article.dataset.id)}`;
const tools = JSON.parse(document.getElementById("tools-data").textContent);

/** Whether the view may call `tool`: MCP Apps' visibility, both by default. */
function forApp(tool) {
  const visibility = tool.app?.visibility;
  return !visibility || visibility.length === 0 || visibility.includes("app");
}

/** The MCP descriptor of a tool, as the view's host context names it. */
function descriptor(tool) {
  const described = { name: tool.name, description: tool.description, inputSchema: tool.inputSchema };
  if (tool.title) described.title = tool.title;
  if (tool.app) described._meta = { ui: tool.app };
  return described;
}

class View {
  constructor(box, tool) {
    this.box = box;
    this.tool = tool;
    this.frame = null;
    this.ready = false;
    this.pending = [];
    this.inFlight = 0;
    this.loads = 0;
    this.onMessage = (event) => this.receive(event);
  }

  problem(text) {
    const line = this.box.querySelector(".view-problem");
    line.hidden = !text;
    line.textContent = text || "";
  }

  open() {
    if (this.frame) return;
    const frame = document.createElement("iframe");
    frame.className = "view";
    frame.title = `View of ${this.tool.name}`;
    frame.setAttribute("sandbox", "allow-scripts allow-forms");
    frame.setAttribute("referrerpolicy", "no-referrer");
    frame.setAttribute("allow", "");
    frame.style.height = `${MIN_HEIGHT * 2}px`;
    frame.src = `${base}/views?uri=${encodeURIComponent(this.tool.app.resourceUri)}`;
    // A view that navigates its frame elsewhere is no longer the agent's
    // view: nothing more is sent to it.
    frame.addEventListener("load", () => {
      this.loads += 1;
      if (this.loads > 1) this.close("the view left its page; it was closed");
    });
    this.frame = frame;
    window.addEventListener("message", this.onMessage);
    this.box.querySelector(".open-view").hidden = true;
    this.box.append(frame);
  }

  close(reason) {
    window.removeEventListener("message", this.onMessage);
    this.frame?.remove();
    this.frame = null;
    this.ready = false;
    this.pending = [];
    this.box.querySelector(".open-view").hidden = false;
    this.problem(reason);
  }

  post(message) {
    // The frame's origin is opaque ("null"): it can only be addressed as "*".
    this.frame?.contentWindow?.postMessage(message, "*");
  }

  /** Sends a notification now, or once the view said it is initialized. */
  notify(method, params) {
    const message = { jsonrpc: "2.0", method, params };
    if (this.ready) this.post(message); else this.pending.push(message);
  }

  /** The tool was called from the page: the view shows its input and result. */
  called(args, result) {
    this.open();
    this.notify("ui/notifications/tool-input", { arguments: args });
    this.notify("ui/notifications/tool-result", result);
  }

  receive(event) {
    if (!this.frame || event.source !== this.frame.contentWindow) return;
    const message = event.data;
    if (!message || typeof message !== "object" || message.jsonrpc !== "2.0") return;
    let size;
    try { size = JSON.stringify(message).length; } catch (_) { return; }
    if (size > MAX_MESSAGE || typeof message.method !== "string" || message.method.length > 100) {
      if (message.id !== undefined) this.fail(message.id, -32600, "the message is not one this page reads");
      return;
    }
    if (message.id === undefined) {
      this.notification(message.method, message.params || {});
    } else if (typeof message.id === "string" || Number.isInteger(message.id)) {
      this.request(message.id, message.method, message.params || {});
    }
  }

  notification(method, params) {
    switch (method) {
      case "ui/notifications/initialized":
        this.ready = true;
        for (const message of this.pending.splice(0)) this.post(message);
        break;
      case "ui/notifications/size-changed": {
        const height = Number(params.height);
        if (Number.isFinite(height)) {
          this.frame.style.height = `${Math.min(MAX_HEIGHT, Math.max(MIN_HEIGHT, Math.ceil(height)))}px`;
        }
        break;
      }
      default:
        break; // Logging and other notifications are not shown here.
    }
  }

  answer(id, result) {
    this.post({ jsonrpc: "2.0", id, result });
  }

  fail(id, code, message) {
    this.post({ jsonrpc: "2.0", id, error: { code, message } });
  }

  async request(id, method, params) {
    switch (method) {
      case "ui/initialize":
        return this.answer(id, {
          protocolVersion: PROTOCOL_VERSION,
          hostInfo: { name: "agentsite", version: article.dataset.nodeVersion || "" },
          hostCapabilities: { serverTools: {}, logging: {}, sandbox: { permissions: {}, csp: {} } },
          hostContext: {
            toolInfo: { tool: descriptor(this.tool) },
            theme: matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light",
            displayMode: "inline",
            availableDisplayModes: ["inline"],
            platform: "web",
            locale: navigator.language,
            timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
          },
        });
      case "ping":
        return this.answer(id, {});
      case "ui/request-display-mode":
        return this.answer(id, { mode: "inline" });
      case "tools/call":
        return this.callTool(id, params);
      case "ui/open-link":
        return this.fail(id, -32000, "this page does not open links for views");
      case "ui/message":
      case "ui/update-model-context":
        return this.fail(id, -32000, "there is no conversation on this page");
      default:
        return this.fail(id, -32601, `${method} is not answered by this page`);
    }
  }

  async callTool(id, params) {
    const tool = tools.find((t) => t.name === params.name);
    if (!tool || !forApp(tool)) {
      return this.fail(id, -32602, `the view may not call ${String(params.name).slice(0, 100)}`);
    }
    const args = params.arguments ?? {};
    if (typeof args !== "object" || Array.isArray(args)) {
      return this.fail(id, -32602, "arguments must be a JSON object");
    }
    if (this.inFlight >= MAX_IN_FLIGHT) {
      return this.fail(id, -32000, `a view may have ${MAX_IN_FLIGHT} calls running at once`);
    }
    this.inFlight += 1;
    try {
      const answer = await postJson(`${base}/call`, { tool: tool.name, arguments: args });
      this.answer(id, answer.output);
    } catch (e) {
      this.fail(id, -32603, e.message);
    } finally {
      this.inFlight -= 1;
    }
  }
}

for (const box of document.querySelectorAll(".app-view")) {
  const tool = tools[Number(box.dataset.tool)];
  const view = new View(box, tool);
  box.querySelector(".open-view").addEventListener("click", () => { view.problem(""); view.open(); });
  // agent.js says when the tool was called from its form.
  box.closest(".tool").addEventListener("tool-called", (event) =>
    view.called(event.detail.arguments, event.detail.result));
}
