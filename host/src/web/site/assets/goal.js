// A goal as its team works on it: its state and cost, the conclusion and
// each task's call and result first, the team with why each member is on
// it, then the whole conversation, folded (a message repeated back to back
// shows once with a count, a long one is clipped until opened). Follows
// the goal's event stream, which a reconnecting page resumes from the last
// message it has.
import { h, postJson, toast } from "./common.js";
import { markdown } from "./result.js";

const KINDS = {
  goal: "goal", say: "person", team: "team", assign: "assigns",
  progress: "progress", result: "result", failure: "failure", notice: "notice", conclusion: "conclusion",
};

function shortPeer(peer) {
  return peer && peer.length > 12 ? `…${peer.slice(-8)}` : peer || "";
}

/** What a step's call proves: the node's signed receipt, whether its answer
 * was checked by running the call again, and nodes caught answering it
 * wrongly. */
function provenance(call) {
  const parts = [];
  const receipt = call.receipt;
  if (receipt) {
    const kind = receipt.replayable ? "replayable" : `read ${receipt.used.join(", ")}`;
    parts.push(h("span", { class: "hint receipt", title: `receipt signed by ${receipt.node}` }, ` · signed (${kind})`));
  }
  const check = call.check;
  if (check) {
    for (const line of check.caught ?? []) parts.push(h("span", { class: "caught" }, ` · ✗ ${line}`));
    const label = check.outcome === "confirmed" ? "✓ checked" : "not checked";
    parts.push(h("span", { class: `hint check ${check.outcome}` }, ` · ${label}: ${check.detail}`));
  }
  return parts;
}

/** A live view of goal `id` (`view`, to put in the conversation's log),
 * and `resume` to follow it again when a message continues it. */
export function goalView(id) {
  const state = h("span", { class: "pill" }, "starting");
  const cost = h("span", { class: "hint cost" });
  const cancel = h("button", { type: "button", class: "link" }, "Stop");
  const team = h("ul", { class: "team", "aria-label": "team" });
  const tasks = h("ul", { class: "plain tasks", "aria-label": "tasks" });
  const messages = h("ol", { class: "messages" });
  const next = h("p", { class: "next", hidden: true });
  const conclusion = h("div", { class: "conclusion-text", "aria-label": "conclusion" });
  const reason = h("p", { class: "hint reason", hidden: true });
  const count = h("span", {}, "0");
  const log = h("details", { class: "log" }, h("summary", {}, "Conversation (", count, " messages)"), messages, next);
  const view = h("section", { class: "goal", "data-goal": id, "aria-label": "goal" },
    h("h3", {}, "Team goal ", state, " ", cost, " ", cancel), reason, conclusion, tasks, team, log);
  const taskStates = new Map();
  let last = 0;
  let shown = 0;
  let previous = null;

  cancel.addEventListener("click", async () => {
    try { await postJson(`/chat/goals/${encodeURIComponent(id)}/cancel`); } catch (e) { toast(e.message, true); }
  });

  function setTask(number, text, stateText, assignee, result) {
    let task = taskStates.get(number);
    if (!task) {
      const label = h("span", { class: "task-state" });
      const found = h("span", { class: "task-result" });
      const line = h("li", { "data-task": number }, h("strong", {}, `task ${number}`), " ", h("span", { class: "assignee" }, assignee ?? ""), ": ", h("span", { class: "task-text" }, text ?? ""), " ", label, " ", found);
      task = { line, label, found };
      taskStates.set(number, task);
      tasks.append(line);
    }
    task.label.textContent = stateText;
    task.label.className = `task-state ${stateText}`;
    if (result !== undefined) task.found.textContent = `→ ${clip(result, 300)}`;
  }

  function clip(text, most) {
    return text.length > most ? `${text.slice(0, most)}…` : text;
  }

  // A long text shows its start until opened.
  function folded(text) {
    if (text.length <= 400) return text;
    return h("details", { class: "long" }, h("summary", {}, clip(text, 200)), text);
  }

  function add(message) {
    if (message.seq <= last) return;
    last = message.seq;
    // The same words again, back to back: counted on the first, not shown.
    const said = `${message.type}|${JSON.stringify(message.speaker)}|${message.text ?? ""}`;
    if (previous && previous.said === said && message.text) {
      previous.times += 1;
      previous.counter.textContent = ` ×${previous.times}`;
      return;
    }
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
          const item = h("li", {}, h("strong", {}, member.name),
            h("span", { class: "hint" }, ` on ${member.local ? "this node" : shortPeer(member.node)}`),
            member.reason ? ` — ${member.reason}` : "");
          if (!message.team) team.append(item);
        }
        line.append(message.members.map((m) => m.name).join(", "));
        break;
      case "assign":
        line.append(message.speaker.kind === "node" ? "" : (message.mode === "async" ? "(goes on meanwhile) " : "(waits for the results) "), folded(message.text));
        for (const task of message.tasks) setTask(task.task, task.text, "working", task.assignee);
        break;
      case "progress":
        line.append(message.text);
        if (message.call) line.append(h("span", { class: "hint" }, ` · ${message.call.tool} on ${shortPeer(message.call.node)} in ${message.call.millis} ms`), ...provenance(message.call));
        break;
      case "result":
        line.append(folded(message.text));
        setTask(message.task, null, message.ok ? "done" : "failed", undefined, message.text);
        break;
      case "conclusion":
        line.append(folded(message.text));
        conclusion.replaceChildren(markdown(message.text));
        break;
      default:
        line.append(folded(message.text ?? ""));
    }
    const counter = h("span", { class: "hint times" });
    line.append(counter);
    previous = { said, times: 1, counter };
    messages.append(line);
    shown += 1;
    count.textContent = String(shown);
    next.hidden = !message.next;
    next.textContent = message.next ? `next: ${message.next}` : "";
  }

  // Green only when the team concluded; amber when a part was not done
  // (the conclusion names it); a limit's stop says which limit.
  const PILLS = { concluded: "pill-ok", partial: "pill-warn", stopped: "pill-warn", failed: "pill-bad", cancelled: "pill-warn", interrupted: "pill-warn" };

  function setState(record) {
    state.textContent = record.state === "stopped" && record.reason ? record.reason : record.state;
    state.className = `pill ${PILLS[record.state] ?? ""}`;
    cost.textContent = `${record.usage.turns} turns · ${record.usage.tasks} tasks · ${record.usage.tool_calls} tool calls · ${record.usage.tokens} tokens`;
    cancel.hidden = !["forming", "running"].includes(record.state);
    if (!cancel.hidden) return;
    next.hidden = true;
    reason.hidden = !record.reason || record.state === "stopped";
    reason.textContent = record.reason ?? "";
    if (record.conclusion && !conclusion.childElementCount) conclusion.replaceChildren(markdown(record.conclusion));
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
