// A person searches the hub, sees a card arrive from another node, opens an
// agent, tries a tool through its form (a mistake caught in the page, a
// result, a tool error) and copies the same call for the command line.
import assert from "node:assert/strict";
import { env, newPage, run, screenshot } from "../browser.mjs";

const base = env("AGENTSITE_URL");
const remoteName = env("REMOTE_AGENT");

await run(async (browser) => {
  const page = await newPage(browser);
  await page.goto(base);
  // A first visit stays small: the page and everything it loads, as the
  // browser counts what went over the wire (headers included).
  await page.waitForLoadState("networkidle");
  const weight = await page.evaluate(() =>
    [...performance.getEntriesByType("navigation"), ...performance.getEntriesByType("resource")]
      .reduce((sum, entry) => sum + entry.transferSize, 0));
  assert.ok(weight > 10_000 && weight <= 150 * 1024, `a first visit transferred ${weight} bytes`);
  await page.getByLabel("Search agents on this node and the network").fill("add numbers");
  await page.getByRole("button", { name: "Search" }).click();
  const calculator = page.locator("article.card", { has: page.getByRole("link", { name: "calculator" }) });
  await calculator.waitFor();
  assert.match(await calculator.textContent(), /installed/);

  // An agent only another node has arrives while the network is searched.
  await page.getByLabel("Search agents on this node and the network").fill("words text");
  await page.getByRole("button", { name: "Search" }).click();
  const remote = page.locator("article.card", { has: page.getByRole("link", { name: remoteName }) });
  await remote.waitFor();
  assert.match(await remote.textContent(), /not installed/);
  assert.match(await remote.textContent(), /on the network/);
  await page.locator("#searching").waitFor({ state: "hidden" });

  // The hub with no search: this node's agents and what it knows of the
  // network's, together.
  await page.goto(base);
  await remote.waitFor();
  await screenshot(page, "hub");

  // Odd characters are words like any other: the page stays whole.
  await page.getByLabel("Search agents on this node and the network").fill(`<script>alert(1)</script> "' %00 ∑`);
  await page.getByRole("button", { name: "Search" }).click();
  await page.locator("#summary").waitFor();
  assert.equal(await page.locator("script:not([src]):not([type])").count(), 0);

  // The filter for installed agents drops the network's.
  await page.goto(`${base}/?q=words+text`);
  await remote.waitFor();
  await page.getByLabel("Installed").check();
  await page.waitForURL(/show=installed/);
  await page.locator("#searching").waitFor({ state: "hidden" });
  assert.equal(await remote.count(), 0, "a network-only agent is not shown under Installed");

  await page.goto(base);
  await calculator.getByRole("link", { name: "calculator" }).click();
  await page.getByRole("heading", { name: /calculator/ }).first().waitFor();
  const add = page.locator("section.tool", { has: page.getByRole("heading", { name: "add" }) });
  await add.getByText("Try add").click();

  // A required field left empty is caught before anything is sent.
  let calls = 0;
  page.on("request", (request) => { if (request.url().endsWith("/call")) calls++; });
  await add.getByLabel(/^a( |$)/).fill("2");
  await add.getByRole("button", { name: "Call add" }).click();
  await add.getByText(/Not sent: .*b is required/).waitFor();
  assert.equal(calls, 0, "an invalid form sends nothing");

  await add.getByLabel(/^b( |$)/).fill("3.5");
  await add.getByRole("button", { name: "Call add" }).click();
  await add.locator(".result .markdown").getByText("5.5").waitFor();
  await add.locator(".result .tree").getByText("5.5").waitFor();
  assert.match(await add.locator(".result .meta").textContent(), /ran on this node/);
  assert.equal(calls, 1);
  assert.match(await add.locator("pre.cli").textContent(), /^agentsite call calculator add '\{"a":2,"b":3.5\}'$/);
  assert.match(await add.locator("pre.mcp").textContent(), /"method": "tools\/call"/);
  await screenshot(page, "agent");

  // A tool's own error is shown with its reason.
  const divide = page.locator("section.tool", { has: page.getByRole("heading", { name: "divide" }) });
  await divide.getByText("Try divide").click();
  await divide.getByLabel(/^a( |$)/).fill("1");
  await divide.getByLabel(/^b( |$)/).fill("0");
  await divide.getByRole("button", { name: "Call divide" }).click();
  await divide.getByText("The tool reported an error").waitFor();
  await divide.locator(".result").getByText("division by zero").waitFor();

  // A phone-sized screen gets the same page, one column.
  const phone = await newPage(browser, { width: 390, height: 844 });
  await phone.goto(`${base}/?q=add`);
  const box = await phone.locator("article.card").first().boundingBox();
  assert.ok(box.width <= 390, `a card fits a phone's width (${box.width}px)`);
  const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the page does not scroll sideways on a phone (${overflow}px)`);
});
