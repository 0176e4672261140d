// An agent's page: try its tools through forms built from their schemas;
// install it from its peers with a progress bar; publish, remove, grant and
// revoke.
import { bytes, changeHeaders, failureOf, postJson, readLines, toast } from "./common.js";
import { buildForm } from "./schema-form.js";
import { showFailure, showResult } from "./result.js";

const article = document.querySelector("article.agent");
const agentId = article.dataset.id;
const agentName = article.dataset.name;
const installed = article.dataset.installed === "true";
const tools = JSON.parse(document.getElementById("tools-data").textContent);
const base = `/hub/agents/${encodeURIComponent(agentId)}`;

/** A shell word: quoted unless plainly safe. */
function shellWord(text) {
  return /^[A-Za-z0-9_.:\/@=-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`;
}

function describeCall(section, tool, args) {
  const json = JSON.stringify(args);
  const target = installed ? agentName : agentId;
  const remote = installed ? "" : " --remote";
  section.querySelector(".cli").textContent =
    `agentsite call${remote} ${shellWord(target)} ${shellWord(tool.name)} ${shellWord(json)}`;
  const request = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: tool.name, arguments: args } };
  section.querySelector(".mcp").textContent =
    `POST ${location.origin}/agents/${installed ? agentName : "<agent>"}/mcp\n${JSON.stringify(request, null, 2)}`;
}

for (const form of document.querySelectorAll(".try-form")) {
  const tool = tools[Number(form.dataset.tool)];
  const section = form.closest(".tool");
  const result = section.querySelector(".result");
  const problem = form.querySelector(".form-problem");
  const read = buildForm(form.querySelector(".fields"), tool.inputSchema);
  const refresh = () => describeCall(section, tool, read(true).value);
  describeCall(section, tool, {});
  form.addEventListener("change", () => { try { refresh(); } catch (_) { /* shown on submit */ } });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const { value, problems } = read();
    describeCall(section, tool, value);
    problem.hidden = problems.length === 0;
    problem.textContent = problems.length ? `Not sent: ${problems.join("; ")}` : "";
    if (problems.length) {
      form.querySelector('[aria-invalid="true"]')?.focus();
      return;
    }
    const button = form.querySelector('button[type="submit"]');
    button.disabled = true;
    result.replaceChildren("Calling…");
    try {
      const answer = await postJson(`${base}/call`, { tool: tool.name, arguments: value });
      showResult(result, answer, tool.name);
      // A view of the tool (app-views.js) shows the same call.
      section.dispatchEvent(new CustomEvent("tool-called", { detail: { arguments: value, result: answer.output } }));
    } catch (e) {
      showFailure(result, e.message);
    } finally {
      button.disabled = false;
    }
  });
}

for (const button of document.querySelectorAll("button.copy")) {
  button.addEventListener("click", async () => {
    const text = button.closest(".as-command").querySelector(`.${button.dataset.copy}`).textContent;
    try {
      await navigator.clipboard.writeText(text);
      toast("Copied");
    } catch (_) {
      toast("The browser did not allow copying; select the text instead", true);
    }
  });
}

async function act(button, action, done) {
  button.disabled = true;
  try {
    done(await action());
  } catch (e) {
    toast(e.message, true);
  } finally {
    button.disabled = false;
  }
}

document.getElementById("publish")?.addEventListener("click", (event) =>
  act(event.target, () => postJson(`${base}/publish`), () => location.reload()));

document.getElementById("chat-with")?.addEventListener("click", (event) =>
  act(event.target, () => postJson("/chat", { agent: installed ? agentName : agentId }), (made) => { location.href = made.url; }));

document.getElementById("remove")?.addEventListener("click", (event) => {
  if (!confirm(`Remove ${agentName} from this node? Its stored data stays.`)) return;
  act(event.target, () => postJson(`${base}/remove`), () => { location.href = "/"; });
});

document.getElementById("install")?.addEventListener("click", async (event) => {
  const button = event.target;
  const box = document.getElementById("install-progress");
  const bar = document.getElementById("install-bar");
  const label = document.getElementById("install-label");
  button.disabled = true;
  box.hidden = false;
  bar.removeAttribute("value");
  label.textContent = "Looking for peers…";
  let failed = null;
  try {
    const response = await fetch(`${base}/install`, { method: "POST", headers: changeHeaders(), body: "{}" });
    if (!response.ok) throw new Error(await failureOf(response));
    await readLines(response, (line) => {
      switch (line.event) {
        case "started":
          bar.max = line.size; bar.value = 0;
          label.textContent = `Downloading ${bytes(line.size)} from ${line.providers} peer${line.providers === 1 ? "" : "s"}…`;
          break;
        case "bytes":
          bar.max = line.size; bar.value = line.done;
          label.textContent = `Downloaded and checked ${bytes(line.done)} of ${bytes(line.size)}`;
          break;
        case "verified":
          bar.value = bar.max;
          label.textContent = "Verified against its id; compiling and installing…";
          break;
        case "done":
          label.textContent = `Installed ${line.name}.`;
          break;
        case "error":
          failed = line.error;
          break;
      }
    });
    if (!failed) {
      toast("Installed");
      // Long enough to read that it worked; then its page as installed.
      setTimeout(() => location.reload(), 600);
      return;
    }
  } catch (e) {
    failed = e.message;
  }
  label.textContent = `Not installed: ${failed}`;
  label.classList.add("problem");
  bar.hidden = true;
  button.disabled = false;
  toast(`Not installed: ${failed}`, true);
});

const grantForm = document.getElementById("grant-form");
if (grantForm) {
  const kind = grantForm.querySelector("#grant-kind");
  const value = grantForm.querySelector("#grant-value");
  const example = () => { value.placeholder = kind.selectedOptions[0].dataset.example || "(no value)"; };
  kind.addEventListener("change", example);
  example();
  grantForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const item = value.value.trim() ? `${kind.value}=${value.value.trim()}` : kind.value;
    act(grantForm.querySelector("button"), () => postJson(`${base}/grant`, { items: [item] }), () => location.reload());
  });
}

for (const button of document.querySelectorAll("button.revoke")) {
  button.addEventListener("click", () =>
    act(button, () => postJson(`${base}/revoke`, { items: [button.dataset.item] }), () => location.reload()));
}
