// Starts the distribution's Chromium for a journey, with the flags this
// machine needs: headless, no sandbox (tests run as root), and none of
// Chromium's own traffic to Google's hosts (the machine has no internet).
import { createRequire } from "node:module";
import { mkdirSync } from "node:fs";
import path from "node:path";

// Playwright lives with the other test tools (scripts/tools.sh), not in the
// checkout.
const tools = process.env.AGENTSITE_TOOLS || `${process.env.HOME}/.cache/agentsite-tools`;
const { chromium } = createRequire(`${tools}/web/`)("playwright-core");

export const CHROMIUM = process.env.AGENTSITE_CHROMIUM || "/usr/bin/chromium";

export async function launch() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-default-apps",
      "--disable-extensions",
      "--metrics-recording-only",
      "--no-default-browser-check",
    ],
  });
}

/** A page at `width`×`height` that fails the journey on a script error. */
export async function newPage(browser, { width = 1280, height = 900 } = {}) {
  const context = await browser.newContext({ viewport: { width, height } });
  const page = await context.newPage();
  page.on("pageerror", (error) => {
    console.error(`script error in the page: ${error.message}`);
    process.exitCode = 1;
  });
  page.setDefaultTimeout(Number(process.env.AGENTSITE_STEP_TIMEOUT_MS || 30000));
  return page;
}

/** Saves a screenshot as `name`.png in the run's screenshot folder. */
export async function screenshot(page, name) {
  const dir = process.env.AGENTSITE_SCREENSHOTS;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: path.join(dir, `${name}.png`), fullPage: true });
}

/** Runs `journey` with a browser, closing it however the journey ends. */
export async function run(journey) {
  const browser = await launch();
  try {
    await journey(browser);
  } catch (error) {
    console.error(error.stack || String(error));
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}

export function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`the journey needs ${name}`);
  return value;
}
