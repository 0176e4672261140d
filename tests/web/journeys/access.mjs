// A node with a token and public reading: a visitor browses but cannot
// change anything; the operator logs in once (a wrong token first), and
// the session is an HttpOnly, SameSite=Strict cookie; a form on another
// site that posts to the node is refused and changes nothing.
import assert from "node:assert/strict";
import http from "node:http";
import { env, newPage, run } from "../browser.mjs";

const base = env("AGENTSITE_URL");
const token = env("AGENTSITE_TOKEN");

await run(async (browser) => {
  // A visitor: reading works, changing does not.
  const visitor = await newPage(browser);
  await visitor.goto(`${base}/hub/agents/calculator`);
  await visitor.getByText("read-only").waitFor();
  assert.equal(await visitor.getByText("Try add").count(), 0, "no tool forms for a reader");
  const refusal = await visitor.evaluate(async () => {
    const csrf = document.querySelector('meta[name="csrf"]').content;
    const answer = await fetch(location.pathname + "/grant", {
      method: "POST", headers: { "Content-Type": "application/json", "X-Agentsite-Csrf": csrf },
      body: JSON.stringify({ items: ["kv=1MiB"] }),
    });
    return [answer.status, (await answer.json()).error];
  });
  assert.equal(refusal[0], 403);
  assert.match(refusal[1], /reading only/);

  // The operator logs in.
  const page = await newPage(browser);
  await page.goto(`${base}/login?next=/hub/agents/calculator`);
  await page.getByLabel("Token").fill("not-the-token");
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByRole("alert").getByText("That is not this node's token").waitFor();
  await page.getByLabel("Token").fill(token);
  await page.getByRole("button", { name: "Log in" }).click();
  await page.waitForURL(/\/hub\/agents\/calculator$/);
  await page.getByRole("button", { name: "Log out" }).waitFor();
  const cookies = await page.context().cookies();
  assert.equal(cookies.length, 1);
  assert.equal(cookies[0].httpOnly, true);
  assert.equal(cookies[0].sameSite, "Strict");
  assert.ok(!cookies[0].value.includes(token), "the token itself is not the cookie");
  await page.getByText("Try add").click();

  // A page of another site posts a form to the node, in the operator's browser.
  const attacker = http.createServer((_, response) => {
    response.setHeader("Content-Type", "text/html");
    response.end(`<form id="f" method="post" action="${base}/hub/agents/calculator/grant">
      <input name="items" value="kv=1GiB"></form><script>document.getElementById("f").submit()</script>`);
  });
  await new Promise((ready) => attacker.listen(0, "127.0.0.1", ready));
  try {
    const forged = await page.context().newPage();
    await forged.goto(`http://127.0.0.1:${attacker.address().port}/`);
    await forged.waitForURL(`${base}/hub/agents/calculator/grant`);
    await forged.getByRole("alert").getByText(/cross-site request refused/).waitFor();
    assert.match(await forged.title(), /Forbidden/);
  } finally {
    attacker.close();
  }
  await page.reload();
  assert.equal(await page.locator("#own-grants").count(), 0, "the forged grant changed nothing");

  // Logged out, the operator is a reader again.
  await page.getByRole("button", { name: "Log out" }).click();
  await page.waitForURL(/\/login/);
  await page.goto(`${base}/hub/agents/calculator`);
  await page.getByText("read-only").waitFor();
});
