// A conversation: its entries as they are stored and as they happen (the
// reply's words while the model writes them), each tool call folded under
// its summary, goals shown live; sending, renaming, deleting.
import { h, postJson, toast } from "./common.js";
import { markdown, renderOutput, tree } from "./result.js";
import { goalView } from "./goal.js";

document.getElementById("new-conversation")?.addEventListener("click", async () => {
  try {
    location.href = (await postJson("/chat", {})).url;
  } catch (e) {
    toast(e.message, true);
  }
});

const head = document.getElementById("conversation");
if (head) follow(head.dataset.id, head.dataset.operator === "true");

// A goal on its own page (started here, from the command line or over MCP).
const goalHolder = document.getElementById("goal-view");
if (goalHolder) goalHolder.append(goalView(goalHolder.dataset.goal).view);

function follow(id, operator) {
  const log = document.getElementById("log");
  const streamState = document.getElementById("stream-state");
  const form = document.getElementById("composer");
  const send = document.getElementById("send");
  const shownGoals = new Map();
  let last = 0;
  let pending = null;
  // What the node is doing for the answer, from the message until the
  // answer is done: shown before the first word, so a person knows it works.
  let working = null;
  function showWorking(text) {
    if (!working) {
      working = h("p", { class: "working", role: "status", "aria-live": "polite" },
        h("span", { class: "spinner", "aria-hidden": "true" }), h("span", { class: "text" }));
      append(working);
    } else if (working !== log.lastElementChild) {
      log.append(working);
    }
    working.querySelector(".text").textContent = text;
  }
  function hideWorking() {
    if (working) { working.remove(); working = null; }
  }

  const atBottom = () => window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
  function append(element) {
    const stick = atBottom();
    log.append(element);
    if (stick) element.scrollIntoView({ block: "end" });
  }

  function render(entry) {
    switch (entry.kind) {
      case "person":
        return h("div", { class: "bubble person", "data-seq": entry.seq },
          h("span", { class: "who" }, entry.team_up ? "you · team up" : "you"), entry.text);
      case "reply": {
        // How far the tools answered: amber when a part was not done, red
        // when none was; the text names what and why.
        const how = { partial: ["pill-warn", "partly answered"], not_answered: ["pill-bad", "not answered"] }[entry.answered];
        return h("div", { class: `bubble reply${how ? ` ${entry.answered}` : ""}`, "data-seq": entry.seq },
          h("span", { class: "who" }, `model ${entry.model}`),
          ...(how ? [h("span", { class: `pill ${how[0]}`, "data-answered": entry.answered }, how[1])] : []),
          markdown(entry.text));
      }
      case "tool_use": {
        const failed = entry.output.isError;
        return h("details", { class: `tool-use${failed ? " failed" : ""}`, "data-seq": entry.seq },
          h("summary", {}, `${failed ? "✗" : "✓"} ${entry.agent}.${entry.tool} · ${entry.elapsed_ms.toFixed(1)} ms · on ${entry.node}`),
          h("p", { class: "hint" }, "arguments"), tree(entry.arguments),
          h("p", { class: "hint" }, failed ? "error" : "result"), ...renderOutput(entry.output));
      }
      case "goal": {
        const shown = shownGoals.get(entry.goal);
        if (shown) {
          shown.resume();
          return h("p", { class: "hint", "data-seq": entry.seq }, "(the team's goal goes on above)");
        }
        const goal = goalView(entry.goal);
        shownGoals.set(entry.goal, goal);
        return goal.view;
      }
      case "problem":
        return h("p", { class: "note problem", role: "alert", "data-seq": entry.seq }, entry.text);
      default:
        return h("p", { class: "hint" }, `(an entry of kind ${entry.kind})`);
    }
  }

  function idle(isIdle) {
    if (send) send.disabled = !isIdle;
    if (isIdle) {
      hideWorking();
      if (pending) { pending.remove(); pending = null; }
    }
  }

  const events = new EventSource(`/chat/${encodeURIComponent(id)}/events?after=0`);
  events.addEventListener("open", () => { streamState.hidden = true; });
  events.addEventListener("error", () => {
    streamState.textContent = "The connection to the node was lost; reconnecting…";
    streamState.hidden = false;
  });
  events.addEventListener("entry", (event) => {
    const entry = JSON.parse(event.data);
    if (entry.seq <= last) return;
    last = entry.seq;
    if (entry.kind === "reply" && pending) { pending.remove(); pending = null; }
    append(render(entry));
    if (entry.kind === "person") {
      idle(false);
      if (!entry.team_up) showWorking("working…");
    }
    if (working && entry.kind !== "person") log.append(working);
  });
  events.addEventListener("working", (event) => showWorking(`${JSON.parse(event.data)}…`));
  events.addEventListener("delta", (event) => {
    if (!pending) {
      pending = h("div", { class: "bubble reply pending", "aria-busy": "true" }, h("span", { class: "who" }, "model"), h("span", { class: "text" }));
      append(pending);
      if (working) log.append(working);
    }
    pending.querySelector(".text").append(JSON.parse(event.data));
  });
  events.addEventListener("idle", () => idle(true));

  if (!operator) return;
  const message = document.getElementById("message");
  // Enter sends; Shift+Enter breaks the line (and Enter that ends an
  // input method's composition only ends it).
  message.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
    event.preventDefault();
    if (!send.disabled) form.requestSubmit();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = message.value.trim();
    if (!text) return;
    send.disabled = true;
    showWorking("sending…");
    try {
      const said = await postJson(`/chat/${encodeURIComponent(id)}/messages`, { text, team_up: document.getElementById("team-up")?.checked ?? false });
      message.value = "";
      // The first message titles a conversation that had no title given.
      if (said.title) showTitle(said.title);
    } catch (e) {
      toast(e.message, true);
      hideWorking();
      send.disabled = false;
    }
  });
  function showTitle(title) {
    document.getElementById("title").textContent = title;
    const listed = document.querySelector(`#conversation-list a[href="/chat/${id}"]`);
    if (listed) listed.textContent = title;
    document.title = `${title} · Chat · agentsite`;
  }
  document.getElementById("rename").addEventListener("click", async () => {
    const title = prompt("A new title for this conversation", document.getElementById("title").textContent);
    if (!title) return;
    try {
      showTitle((await postJson(`/chat/${encodeURIComponent(id)}/rename`, { title })).title);
    } catch (e) {
      toast(e.message, true);
    }
  });
  document.getElementById("delete").addEventListener("click", async () => {
    if (!confirm("Delete this conversation for good?")) return;
    try {
      await postJson(`/chat/${encodeURIComponent(id)}/delete`);
      location.href = "/chat";
    } catch (e) {
      toast(e.message, true);
    }
  });
}
