// A goal whose member lives on another node: beside the step's call, the
// goal's page shows that the host signed a receipt of a replayable call and
// that this node checked the answer by running the call again.
import assert from "node:assert/strict";
import { env, newPage, run, screenshot } from "../browser.mjs";

const base = env("AGENTSITE_URL");
const goalId = env("AGENTSITE_GOAL");

await run(async (browser) => {
  const page = await newPage(browser);
  await page.goto(`${base}/chat/goals/${goalId}`);
  const goal = page.locator("section.goal");
  await goal.getByText("concluded").waitFor();
  // The conversation among the members is folded; the person opens it.
  await goal.locator("details.log > summary").click();
  const step = goal.locator('.messages li[data-type="progress"]').first();
  const receipt = step.locator(".receipt");
  await receipt.waitFor();
  assert.match(await receipt.textContent(), /signed \(replayable\)/);
  assert.match(await receipt.getAttribute("title"), /^receipt signed by did:key:z6Mk/);
  assert.match(await step.locator(".check").textContent(), /✓ checked: run again on this node, the same result/);
  assert.equal(await step.locator(".caught").count(), 0, "nobody was caught");
  assert.match(await step.textContent(), /add on …/);
  await goal.locator(".conclusion-text").getByText("2 + 3 = 5.").waitFor();
  await screenshot(page, "goal-checks");
});
