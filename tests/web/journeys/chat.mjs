// A person chats with the calculator: the node's model (scripted, reached
// over the OpenAI API) calls a tool, shown folded, and its reply streams in
// word by word. A mistyped @name is asked about, not replaced; a part no
// tool can do is named in an amber reply. Then the person teams agents up on a goal, watches it live
// to its conclusion and continues it with a follow-up. The node restarts
// under the page: the page says so, reconnects and catches up, and the
// conversation is still there. Renamed, then deleted.
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { env, newPage, recordEvents, run, screenshot } from "../browser.mjs";

const base = env("AGENTSITE_URL");
const signals = env("AGENTSITE_SIGNALS");

/** Asks the test to restart the node, and waits until it has. */
async function restartNode() {
  const restarted = path.join(signals, "restarted");
  writeFileSync(path.join(signals, "restart"), "");
  for (let waited = 0; !existsSync(restarted); waited += 50) {
    if (waited > 60000) throw new Error("the node was not restarted within 60 s");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Sends `text` from the composer, teamed up or not. */
async function send(page, text, { teamUp = false } = {}) {
  await page.getByRole("button", { name: "Send" }).waitFor();
  await page.locator("#send:not([disabled])").waitFor();
  await page.getByLabel(/Team up/).setChecked(teamUp);
  await page.getByRole("textbox", { name: /^Message/ }).fill(text);
  await page.getByRole("button", { name: "Send" }).click();
}

/** Types `lines` into the composer as a person does, Shift+Enter between
 * them, and sends with Enter. */
async function typeAndSend(page, lines) {
  await page.locator("#send:not([disabled])").waitFor();
  const box = page.getByRole("textbox", { name: /^Message/ });
  await box.fill("");
  for (const [n, line] of lines.entries()) {
    if (n) await box.press("Shift+Enter");
    await box.pressSequentially(line);
  }
  await box.press("Enter");
}

await run(async (browser) => {
  const page = await newPage(browser);
  await recordEvents(page);
  page.on("dialog", (dialog) => dialog.accept(dialog.type() === "prompt" ? "Sums with the calculator" : undefined));

  // From the calculator's page to a conversation with it.
  await page.goto(`${base}/hub/agents/calculator`);
  await page.getByRole("button", { name: /Chat with/ }).click();
  await page.waitForURL(/\/chat\/[^/]+$/);
  await page.getByText("@calculator").waitFor();

  // Every piece of text the reply being written receives, as it comes;
  // what the working indicator says, and what shows first.
  await page.evaluate(() => {
    window.replyPieces = [];
    window.workingSaid = [];
    window.shown = [];
    new MutationObserver((records) => {
      for (const record of records) {
        if (record.target.closest?.(".pending")) {
          for (const node of record.addedNodes) window.replyPieces.push(node.textContent);
        }
        if (record.target.closest?.(".working")) window.workingSaid.push(record.target.textContent);
        for (const node of record.addedNodes) {
          for (const kind of ["working", "pending"]) {
            if (node.classList?.contains(kind) && !window.shown.includes(kind)) window.shown.push(kind);
          }
        }
      }
    }).observe(document.getElementById("log"), { childList: true, subtree: true });
  });
  await send(page, "Add 2 and 3.");
  const reply = page.locator(".bubble.reply:not(.pending)").last();
  await reply.getByText("The calculator says 2 plus 3 is 5.").waitFor();
  const pieces = await page.evaluate(() => window.replyPieces);
  assert.ok(pieces.length >= 5, `the reply streamed in word by word: ${JSON.stringify(pieces)}`);
  assert.equal(pieces.join(""), "The calculator says 2 plus 3 is 5.");
  assert.equal(await page.locator(".pending").count(), 0, "the streamed draft gave way to the reply");
  // The page said it was working before the first word came, and what on.
  assert.deepEqual(await page.evaluate(() => window.shown), ["working", "pending"]);
  const said = await page.evaluate(() => window.workingSaid);
  assert.ok(said.some((s) => s === "calling calculator.add(2, 3)…"), `the call was shown as it ran: ${JSON.stringify(said)}`);
  await page.locator(".working").waitFor({ state: "detached" });
  // The first message titled the conversation, in the list too.
  await page.locator("#title").getByText("Add 2 and 3.").waitFor();
  assert.equal(await page.locator("#conversation-list a[aria-current=page]").textContent(), "Add 2 and 3.");
  assert.match(await page.title(), /^Add 2 and 3\. · Chat/);

  // The tool call: folded, with where it ran; its arguments and result inside.
  const call = page.locator("details.tool-use").first();
  assert.equal(await page.locator("details.tool-use").count(), 1);
  assert.equal(await call.getAttribute("open"), null, "folded by default");
  assert.match(await call.locator(":scope > summary").textContent(), /^✓ calculator\.add · [\d.]+ ms · on this node$/);
  await call.locator(":scope > summary").click();
  assert.match(await call.textContent(), /a\W+2[\s\S]*b\W+3[\s\S]*5/);

  // A mistyped @name is not quietly taken for another agent: the page
  // says which was meant, and nothing is called.
  // Typed, with a line break (Shift+Enter), and sent with Enter.
  await typeAndSend(page, ["@calculater what is 6", "times 7?"]);
  const typed = page.locator(".bubble.person").last();
  await typed.getByText(/times 7\?/).waitFor();
  assert.equal(await typed.evaluate((b) => b.lastChild.textContent), "@calculater what is 6\ntimes 7?");
  assert.match(await typed.innerText(), /what is 6\ntimes 7\?/, "shown on two lines");
  await page.locator(".note.problem").getByText("no agent named @calculater is installed here or found on the network; did you mean @calculator?").waitFor();
  assert.equal(await page.locator("details.tool-use").count(), 1, "no call was made for it");

  // A part no tool can do is named, and the reply is marked partly
  // answered (amber), not shown as a plain answer.
  await send(page, "Add 2 and 2, and what is the weather in Lyon?");
  const partial = page.locator(".bubble.reply.partial").last();
  await partial.getByText(/Not done: "what is the weather in Lyon\?" \(no tool at hand does this\)/).waitFor();
  assert.equal(await partial.locator(".pill.pill-warn").textContent(), "partly answered");
  assert.match(await partial.textContent(), /2 plus 2 is 4/);
  await screenshot(page, "chat-partial");

  // Team up: a goal, live, to its conclusion.
  await send(page, "Add 2 and 3 as a team.", { teamUp: true });
  const goal = page.locator("section.goal");
  await goal.getByText("concluded").waitFor();
  assert.match(await goal.getByRole("list", { name: "team" }).textContent(), /calculator on this node/);
  assert.match(await goal.getByRole("list", { name: "tasks" }).textContent(), /task 1 calculator: add\(2, 3\) done/);
  const kinds = await goal.locator(".messages li").evaluateAll((items) => items.map((i) => i.dataset.type));
  for (const kind of ["goal", "team", "assign", "result", "conclusion"]) {
    assert.ok(kinds.includes(kind), `a ${kind} message among ${kinds}`);
  }
  await goal.locator(".conclusion-text").getByText("2 + 3 = 5.").waitFor();
  await call.locator(":scope > summary").click();
  await screenshot(page, "chat");

  // A follow-up continues the same goal, shown in the same place.
  await send(page, "Now multiply it by 2.", { teamUp: true });
  await page.getByText("(the team's goal goes on above)").waitFor();
  await goal.locator(".conclusion-text").getByText("Doubled, 2 times 5 is 10.").waitFor();
  await goal.getByText("concluded").waitFor();
  assert.match(await goal.getByRole("list", { name: "tasks" }).textContent(), /task 2 calculator: multiply\(2, 5\) done/);
  assert.equal(await page.locator("section.goal").count(), 1, "one goal, continued");

  // Renamed (the page asks for the title).
  await page.getByRole("button", { name: "Rename" }).click();
  await page.locator("#title").getByText("Sums with the calculator").waitFor();
  const url = page.url();

  // The node restarts under the page: it says so, then reconnects. A
  // message sent meanwhile from another tab shows up once, in order.
  await page.evaluate(() => {
    const state = document.getElementById("stream-state");
    window.streamLost = "";
    new MutationObserver(() => {
      if (!state.hidden) window.streamLost ||= state.textContent;
    }).observe(state, { attributes: true, childList: true });
  });
  await restartNode();
  const other = await newPage(browser);
  await other.goto(url);
  await send(other, "@calculator and add 4 and 4?");
  await other.getByText("The calculator says 4 plus 4 is 8.").waitFor();
  await page.getByText("The calculator says 4 plus 4 is 8.").waitFor({ timeout: 60000 });
  await page.locator("#stream-state").waitFor({ state: "hidden" });
  assert.match(await page.evaluate(() => window.streamLost), /connection to the node was lost; reconnecting/);
  const people = await page.locator(".bubble.person").allTextContents();
  assert.deepEqual(people.map((t) => t.replace(/^you( · team up)?/, "")), [
    "Add 2 and 3.", "@calculater what is 6\ntimes 7?", "Add 2 and 2, and what is the weather in Lyon?",
    "Add 2 and 3 as a team.", "Now multiply it by 2.", "@calculator and add 4 and 4?",
  ], "each message once, in order");
  assert.equal(await page.locator("details.tool-use").count(), 3);

  // Still there after the restart, as a fresh page sees it.
  await page.reload();
  await page.locator("#title").getByText("Sums with the calculator").waitFor();
  await page.getByText("The calculator says 4 plus 4 is 8.").waitFor();
  await page.locator("section.goal").getByText("concluded").waitFor();
  assert.equal(await page.locator("#conversation-list a").getByText("Sums with the calculator").count(), 1);
  // The conversation links to its team's goal.
  assert.match(await page.locator("#conversation-goal").getAttribute("href"), /^\/chat\/goals\/[^/]+$/);

  // The goal has a page of its own, listed beside the conversations.
  await page.locator("#goal-list").getByRole("link", { name: "Add 2 and 3 as a team." }).click();
  await page.waitForURL(/\/chat\/goals\/[^/]+$/);
  await page.locator("section.goal").getByText("concluded").waitFor();
  await page.locator("section.goal .conclusion-text").getByText("Doubled, 2 times 5 is 10.").waitFor();
  await page.goBack();

  // Deleted: gone from the list.
  await page.getByRole("button", { name: "Delete" }).click();
  await page.waitForURL(`${base}/chat`);
  assert.equal(await page.getByText("Sums with the calculator").count(), 0);
});
