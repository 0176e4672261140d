// An agent's tool with an interactive view (MCP Apps) on its page: the
// operator logs in, calls the tool through its form and the view shows the
// result; the view's own button calls the tool again through the page.
// Inside the frame, the view reaches none of the node's pages, cookies or
// storage, and no other origin; opened on its own, the view's address is
// just as shut in; it may not call a tool of another agent; and once the
// operator grants the agent an origin, the view may fetch from that one
// (and still nothing of the node's).
import assert from "node:assert/strict";
import http from "node:http";
import { env, newPage, run, screenshot } from "../browser.mjs";

const base = env("AGENTSITE_URL");
const token = env("AGENTSITE_TOKEN");

// Another origin, counting every request that reaches it.
let reached = 0;
const elsewhere = http.createServer((_, response) => {
  reached += 1;
  response.setHeader("Access-Control-Allow-Origin", "*");
  response.end("reached");
});
await new Promise((ready) => elsewhere.listen(0, "127.0.0.1", ready));
const elsewhereUrl = `http://127.0.0.1:${elsewhere.address().port}/`;

/** What a script of the view can reach, tried from inside it. */
async function probe(frame, nodeBase, otherUrl) {
  return frame.evaluate(async ({ nodeBase, otherUrl }) => {
    const attempt = async (what) => {
      try { return `reached: ${String(await what())}`; } catch (e) { return `refused: ${e.name}`; }
    };
    return {
      origin: self.origin,
      cookie: await attempt(() => document.cookie),
      storage: await attempt(() => localStorage.length),
      parent: await attempt(() => window.parent.document.title),
      nodeApi: await attempt(async () => (await fetch(`${nodeBase}/hub/agents/tipper/call`, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: "{}",
      })).status),
      nodePage: await attempt(async () => (await fetch(`${nodeBase}/`)).status),
      other: await attempt(async () => (await fetch(otherUrl)).status),
      image: await new Promise((done) => {
        const image = new Image();
        image.onload = () => done("reached");
        image.onerror = () => done("refused");
        image.src = `${otherUrl}image.png`;
      }),
    };
  }, { nodeBase, otherUrl });
}

function assertShutIn(found, where) {
  assert.equal(found.origin, "null", `${where}: an opaque origin`);
  for (const key of ["cookie", "storage", "nodeApi", "nodePage", "other"]) {
    assert.match(found[key], /^refused/, `${where}: ${key} ${found[key]}`);
  }
  assert.equal(found.image, "refused", `${where}: an image from elsewhere`);
}

await run(async (browser) => {
  const page = await newPage(browser);
  await page.goto(`${base}/login?next=/hub/agents/tipper`);
  await page.getByLabel("Token").fill(token);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.waitForURL(/\/hub\/agents\/tipper$/);
  // A cookie a script could read, were it on the node's origin.
  await page.context().addCookies([{ name: "probe", value: "secret", url: base }]);

  let calls = 0;
  page.on("request", (request) => { if (request.url().endsWith("/call")) calls++; });

  const tip = page.locator("section.tool", { has: page.getByRole("heading", { name: "tip", exact: true }) });
  await tip.getByText("has an interactive view").waitFor();
  await tip.getByText("Try tip").click();
  await tip.getByLabel(/^bill( |$)/).fill("40");
  await tip.getByLabel(/^percent( |$)/).fill("15");
  await tip.getByRole("button", { name: "Call tip" }).click();
  await tip.locator(".result .tree").getByText("46").first().waitFor();

  // The view opens with the call's input and result.
  const frameElement = tip.locator("iframe.view");
  await frameElement.waitFor();
  assert.equal(await frameElement.getAttribute("sandbox"), "allow-scripts allow-forms");
  const view = tip.frameLocator("iframe.view");
  await view.locator("body[data-ready=true]").waitFor();
  await view.locator("#total").getByText("46.00").waitFor();
  assert.equal(await view.locator("#bill").inputValue(), "40");
  assert.equal(await view.locator("#tip").textContent(), "6.00");
  const before = calls;

  // The view's own button: it calls `tip` through the page.
  await view.getByRole("button", { name: "20 %" }).click();
  await view.locator("#total").getByText("48.00").waitFor();
  assert.equal(await view.locator("#tip").textContent(), "8.00");
  assert.ok(calls > before, "the view's call went through the page's own route");
  await screenshot(page, "apps");

  // Inside the frame: nothing of the node's, nothing elsewhere.
  const frame = page.frames().find((f) => f.url().includes("/views?uri="));
  assert.ok(frame, "the view's frame");
  assertShutIn(await probe(frame, base, elsewhereUrl), "the view in its frame");

  // A tool of another agent, asked for by the view, is refused.
  const refused = await frame.evaluate(() => new Promise((done) => {
    addEventListener("message", (event) => { if (event.data?.id === 9001) done(event.data); });
    parent.postMessage({ jsonrpc: "2.0", id: 9001, method: "tools/call", params: { name: "add", arguments: { a: 1, b: 2 } } }, "*");
  }));
  assert.match(refused.error.message, /may not call add/);

  // The view's address opened on its own is just as shut in.
  const alone = await page.context().newPage();
  await alone.goto(await frameElement.getAttribute("src").then((src) => new URL(src, base).href));
  await alone.locator("#form").waitFor();
  assertShutIn(await probe(alone.mainFrame(), base, elsewhereUrl), "the view opened on its own");
  await alone.close();

  assert.equal(reached, 0, "no request reached another origin");

  // The operator grants the agent the other origin: its view may fetch there.
  const granted = await page.evaluate(async (origin) => {
    const csrf = document.querySelector('meta[name="csrf"]').content;
    const answer = await fetch(location.pathname + "/grant", {
      method: "POST", headers: { "Content-Type": "application/json", "X-Agentsite-Csrf": csrf },
      body: JSON.stringify({ items: [`http=${origin}`] }),
    });
    return answer.status;
  }, elsewhereUrl.replace(/\/$/, ""));
  assert.equal(granted, 200);
  const grantedView = await page.context().newPage();
  await grantedView.goto(new URL(await frameElement.getAttribute("src"), base).href);
  await grantedView.locator("#form").waitFor();
  const found = await probe(grantedView.mainFrame(), base, elsewhereUrl);
  assert.equal(found.other, "reached: 200", "the granted origin");
  assert.match(found.nodeApi, /^refused/, "still nothing of the node's");
  assert.match(found.cookie, /^refused/);
  assert.ok(reached > 0);
  await grantedView.close();
});
elsewhere.close();
