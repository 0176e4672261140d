// An operator installs agents from a peer. One is refused by the node's
// policy (its publisher is not trusted): the page says why and nothing is
// installed. The operator grants the other one kv, which admits it, then
// installs it with the progress bar running, and sees the grant on its page.
import assert from "node:assert/strict";
import { env, newPage, run } from "../browser.mjs";

const base = env("AGENTSITE_URL");
const refused = env("REFUSED_ID");
const wanted = env("WANTED_ID");

await run(async (browser) => {
  const page = await newPage(browser);
  // A copy of what the node streams to the install button, kept across
  // the reload that ends the install (the page reads the original).
  await page.addInitScript(() => {
    const fetch = window.fetch;
    window.fetch = async (...args) => {
      const response = await fetch(...args);
      if (String(args[0]).endsWith("/install")) {
        response.clone().text().then((text) => sessionStorage.setItem("install-body", text));
      }
      return response;
    };
  });

  await page.goto(`${base}/hub/agents/${refused}`);
  await page.getByText("not installed").first().waitFor();
  await page.getByRole("button", { name: "Install from peers" }).click();
  await page.locator("#install-label").getByText(/Not installed: .*refused by policy/).waitFor();
  await page.reload();
  assert.equal(await page.getByRole("button", { name: "Install from peers" }).count(), 1, "nothing was installed");

  // Granting the agent by id admits it ahead of the download.
  await page.goto(`${base}/hub/agents/${wanted}`);
  await page.getByLabel("Grant").selectOption("kv");
  await page.locator("#grant-value").fill("1MiB");
  await page.getByRole("button", { name: "Grant", exact: true }).click();
  await page.locator("#own-grants").getByText("kv, quota 1.0 MiB").waitFor();

  // Every label the progress bar shows is kept across the reload that ends
  // it. The observer reads the mutation records, not the page as it is when
  // called: several events that arrive together are then still seen one by
  // one, each with the bar as it was when its label was set.
  await page.evaluate(() => {
    sessionStorage.setItem("labels", "[]");
    const bar = document.getElementById("install-bar");
    const state = { value: 0, max: 1 };
    new MutationObserver((records) => {
      const seen = JSON.parse(sessionStorage.getItem("labels"));
      records.forEach((record, i) => {
        if (record.target === bar) {
          // What the attribute became: the next change's old value, or
          // the value now after the last change.
          const name = record.attributeName;
          const next = records.slice(i + 1).find((r) => r.target === bar && r.attributeName === name);
          state[name] = Number(next ? next.oldValue : bar.getAttribute(name));
          return;
        }
        for (const node of record.addedNodes) {
          seen.push({ text: node.textContent, ...state, shown: !bar.closest("[hidden]") });
        }
      });
      sessionStorage.setItem("labels", JSON.stringify(seen));
    }).observe(document.getElementById("install-progress"), {
      childList: true, subtree: true, attributes: true, attributeOldValue: true, attributeFilter: ["value", "max"],
    });
  });
  await page.getByRole("button", { name: "Install from peers" }).click();
  await page.locator(".agent-head .pill-ok").getByText("installed").waitFor();
  const body = await page.evaluate(() => sessionStorage.getItem("install-body"));
  const events = body.trim().split("\n").map((line) => JSON.parse(line));
  // The node reported each chunk as it was checked, then the whole...
  const kinds = events.map((e) => e.event);
  assert.deepEqual([kinds[0], ...kinds.slice(-2)], ["started", "verified", "done"], `${kinds}`);
  const done = events.filter((e) => e.event === "bytes").map((e) => e.done);
  assert.ok(done.length >= 3, `chunk by chunk: ${done}`);
  assert.ok(done.every((d, i) => i === 0 || d > done[i - 1]) && done.at(-1) === events[0].size, `${done}`);
  // ...and the page showed each one on the bar.
  const seen = JSON.parse(await page.evaluate(() => sessionStorage.getItem("labels")));
  const texts = seen.map((s) => s.text);
  assert.ok(texts.some((t) => /^Downloading 3\.0 MiB from 1 peer/.test(t)), `the download started: ${texts}`);
  const moving = seen.filter((s) => /^Downloaded and checked .* of 3\.0 MiB/.test(s.text));
  assert.deepEqual(moving.map((s) => s.value), done, `${JSON.stringify(seen)}`);
  assert.ok(moving.every((s) => s.shown && s.max === events[0].size), `${JSON.stringify(seen)}`);

  // Installed, and on the network as another node's agent: not published
  // by this one, one provider besides it.
  await page.reload();
  const head = await page.locator(".agent-head").textContent();
  assert.doesNotMatch(head, /published by this node/, head);
  assert.match(head, /on the network/, head);
  assert.match(await page.locator("dl.facts").textContent(), /providers\s*1 other node\b/);

  // Granted what was granted before.
  await page.locator("#granted").getByText(/kv\s+quota 1\.0 MiB/).waitFor();
  assert.match(await page.locator("#asks").textContent(), /kv/);
  await page.locator("#own-grants").getByRole("button", { name: "revoke" }).click();
  await page.locator("#own-grants").waitFor({ state: "detached" });
  assert.doesNotMatch(await page.locator("#permissions").textContent(), /kv\s+quota/);
});
