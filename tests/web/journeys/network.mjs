// The network page of a node with one peer: its own peer id and address,
// the peer (what it hosts, since when), the agents this node hosts; an agent the peer publishes (from the
// peer's own page) arrives live; calls made here, one failing, show on
// the chart.
import assert from "node:assert/strict";
import { env, newPage, run, screenshot } from "../browser.mjs";

const base = env("AGENTSITE_URL");
const otherBase = env("OTHER_URL");
const peerId = env("PEER_ID");
const otherPeerId = env("OTHER_PEER_ID");
const otherDid = env("OTHER_DID");

await run(async (browser) => {
  const page = await newPage(browser);
  await page.goto(`${base}/`);
  await page.getByRole("link", { name: "Network" }).click();
  await page.waitForURL(`${base}/network`);
  assert.equal(await page.locator("#peer-id").textContent(), peerId);
  assert.match(await page.locator("section", { has: page.locator("#node-h") }).textContent(), /\/ip4\/127\.0\.0\.1\/tcp\/\d+/);
  const peers = page.locator("table.peers");
  await peers.locator(`[title="${otherPeerId}"]`).waitFor();
  assert.match(await peers.textContent(), /agentsite\//);
  await page.locator("section", { has: page.locator("#agents-h") }).getByRole("link", { name: "calculator" }).waitFor();

  // The peer publishes text from its own page; the announcement arrives
  // here without a reload.
  const peerPage = await newPage(browser);
  await peerPage.goto(`${otherBase}/hub/agents/text`);
  await peerPage.getByRole("button", { name: "Publish to the network" }).click();
  await peerPage.getByText("published by this node").waitFor();
  const announced = page.locator("#announcements li").filter({ hasText: "text" });
  await announced.waitFor();
  assert.match(await announced.textContent(), /· \d+ tools? · from …/);
  assert.equal(await announced.locator("[title]").getAttribute("title"), otherPeerId);
  assert.ok(await page.locator("#no-announcements").isHidden());
  // The announced agent's page names its publisher by peer id and did:key.
  const agentPage = await newPage(browser);
  await agentPage.goto(new URL(await announced.locator("a").first().getAttribute("href"), base).href);
  assert.equal(await agentPage.locator("code.did").textContent(), otherDid);
  assert.match(otherDid, /^did:key:z6Mk/);
  await agentPage.close();
  // The announcement's host leads to its row among the peers, which (once
  // the page is drawn again) lists what it hosts and since when it is here.
  await announced.locator("a.peer-link").click();
  await page.waitForURL(`${base}/network#peer-${otherPeerId}`);
  await page.reload();
  const row = page.locator(`tr[data-peer="${otherPeerId}"]`);
  assert.match(await row.locator(".peer-agents").textContent(), /\btext\b/);
  assert.match(await row.textContent(), /since \d.*\((this node dialed|it dialed this node)\)/s);
  // The peer's own network page lists its agent as its own, not among
  // what peers announced.
  await peerPage.goto(`${otherBase}/network`);
  assert.equal(await peerPage.locator("#announcements li").filter({ hasText: "text" }).count(), 0);

  // Three calls and a failed one, through the calculator's page.
  const csrf = await page.locator('meta[name="csrf"]').getAttribute("content");
  const results = await page.evaluate(async (csrf) => {
    const call = (tool, args) => fetch("/hub/agents/calculator/call", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Agentsite-Csrf": csrf },
      body: JSON.stringify({ tool, arguments: args }),
    }).then((r) => r.json());
    return [
      await call("add", { a: 1, b: 2 }), await call("add", { a: 3, b: 4 }),
      await call("multiply", { a: 2, b: 5 }), await call("divide", { a: 1, b: 0 }),
    ];
  }, csrf);
  assert.equal(results.filter((r) => r.output.isError).length, 1, JSON.stringify(results));
  await page.locator("#rates-summary").getByText(/Last minute: 4 calls .*, 1 failed/).waitFor();
  assert.equal(await page.locator("#rates-chart path.calls").count(), 1);
  await screenshot(page, "network");
});
