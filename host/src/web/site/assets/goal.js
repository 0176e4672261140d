// A goal as its team works on it: the members and their nodes, each
// message with its type, tasks and their states, sub-teams indented, who
// speaks next, and the conclusion. Follows the goal's event stream, which
// a reconnecting page resumes from the last message it has.
import { h, postJson, toast } from "./common.js";
import { markdown } from "./result.js";

const KINDS = {
  goal: "goal", say: "person", team: "team", discussion: "discussion", assign: "assigns",
  pause: "pause", progress: "progress", result: "result", failure: "failure", notice: "notice", conclusion: "conclusion",
};

function shortPeer(peer) {
  return peer && peer.length > 12 ? `…${peer.slice(-8)}` : peer || "";
}

/** A live view of goal `id` (`view`, to put in the conversation's log),
 * and `resume` to follow it again when a message continues it. */
export function goalView(id) {
  const state = h("span", { class: "pill" }, "starting");
  const cancel = h("button", { type: "button", class: "link" }, "Stop");
  const team = h("ul", { class: "team", "aria-label": "team" });
  const tasks = h("ul", { class: "plain tasks", "aria-label": "tasks" });
  const messages = h("ol", { class: "messages" });
  const next = h("p", { class: "next", hidden: true });
  const conclusion = h("div", { class: "conclusion-text" });
  const view = h("section", { class: "goal", "data-goal": id, "aria-label": "goal" },
    h("h3", {}, "Team goal ", state, " ", cancel), team, tasks, messages, next, conclusion);
  const taskStates = new Map();
  let last = 0;

  cancel.addEventListener("click", async () => {
    try { await postJson(`/chat/goals/${encodeURIComponent(id)}/cancel`); } catch (e) { toast(e.message, true); }
  });

  function setTask(number, text, stateText, assignee) {
    let task = taskStates.get(number);
    if (!task) {
      const label = h("span", { class: "task-state" });
      const line = h("li", { "data-task": number }, h("strong", {}, `task ${number}`), " ", h("span", { class: "assignee" }, assignee ?? ""), ": ", h("span", { class: "task-text" }, text ?? ""), " ", label);
      task = { line, label };
      taskStates.set(number, task);
      tasks.append(line);
    }
    task.label.textContent = stateText;
    task.label.className = `task-state ${stateText}`;
  }

  function add(message) {
    if (message.seq <= last) return;
    last = message.seq;
    const speaker = message.speaker.kind === "member" ? message.speaker.name : message.speaker.kind;
    const node = message.speaker.kind === "member" ? message.speaker.node : "";
    const kind = message.type;
    // Styled by its type attribute: type names such as "team" and
    // "progress" are class names of other parts of the page.
    const line = h("li", { class: `message${message.team ? " sub" : ""}`, "data-type": message.type },
      h("span", { class: "kind" }, KINDS[kind] ?? kind), h("strong", {}, speaker),
      node ? h("span", { class: "hint", title: node }, ` on ${shortPeer(node)}`) : null,
      message.team ? h("span", { class: "hint" }, ` · sub-team of task ${message.team}`) : null, " ");
    switch (message.type) {
      case "team":
        if (!message.team) team.replaceChildren();
        for (const member of message.members) {
          const item = h("li", { title: member.reason || member.description }, member.name,
            h("span", { class: "hint" }, ` on ${member.local ? "this node" : shortPeer(member.node)}`));
          if (!message.team) team.append(item);
        }
        line.append(message.members.map((m) => m.name).join(", "));
        break;
      case "assign":
        line.append(message.mode === "async" ? "(goes on meanwhile) " : "(waits for the results) ", message.text);
        for (const task of message.tasks) setTask(task.task, task.text, "working", task.assignee);
        break;
      case "progress":
        line.append(message.text);
        if (message.call) line.append(h("span", { class: "hint" }, ` · ${message.call.tool} on ${shortPeer(message.call.node)} in ${message.call.millis} ms`));
        break;
      case "result":
        line.append(message.text);
        setTask(message.task, null, message.ok ? "done" : "failed");
        break;
      case "conclusion":
        line.append(markdown(message.text));
        break;
      default:
        line.append(message.text ?? "");
    }
    messages.append(line);
    next.hidden = !message.next;
    next.textContent = message.next ? `next: ${message.next}` : "";
  }

  function setState(record) {
    state.textContent = record.state;
    state.className = `pill ${record.state === "concluded" ? "pill-ok" : ""}`;
    cancel.hidden = !["forming", "running"].includes(record.state);
    if (!cancel.hidden) {
      conclusion.replaceChildren();
      return;
    }
    next.hidden = true;
    conclusion.replaceChildren(
      record.reason ? h("p", { class: "hint" }, record.reason) : "",
      h("p", { class: "hint" }, `${record.usage.turns} turns · ${record.usage.tasks} tasks · ${record.usage.tool_calls} tool calls · ${record.usage.tokens} tokens`));
  }

  // Followed while the goal runs; a follow-up message that continues it
  // after it stopped calls `resume`, which picks up after the last message.
  let events = null;
  function resume() {
    if (events) return;
    events = new EventSource(`/chat/goals/${encodeURIComponent(id)}/events?after=${last}`);
    events.addEventListener("message", (event) => add(JSON.parse(event.data)));
    events.addEventListener("state", (event) => {
      const record = JSON.parse(event.data);
      setState(record);
      if (!["forming", "running"].includes(record.state)) {
        events.close();
        events = null;
      }
    });
  }
  resume();
  return { view, resume };
}
