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

// The journey's pages, described when it fails.
const pages = [];

/** A page at `width`×`height` that fails the journey on a script error. */
export async function newPage(browser, { width = 1280, height = 900 } = {}) {
  const context = await browser.newContext({ viewport: { width, height } });
  const page = await context.newPage();
  pages.push(page);
  page.on("console", (message) => {
    if (message.type() === "error") console.error(`console error in the page: ${message.text()}`);
  });
  page.on("pageerror", (error) => {
    console.error(`script error in the page: ${error.message}`);
    process.exitCode = 1;
  });
  page.setDefaultTimeout(Number(process.env.AGENTSITE_STEP_TIMEOUT_MS || 30000));
  return page;
}

/** Saves a screenshot of the whole page as `name`.png in the run's
 * screenshot folder. The window is made as tall as the page for it, so
 * that parts kept in view (a chat's composer) stay where a person sees them. */
export async function screenshot(page, name) {
  const dir = process.env.AGENTSITE_SCREENSHOTS;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  const viewport = page.viewportSize();
  const height = await page.evaluate(() => document.documentElement.scrollHeight);
  await page.setViewportSize({ width: viewport.width, height: Math.max(viewport.height, height) });
  await page.screenshot({ path: path.join(dir, `${name}.png`) });
  await page.setViewportSize(viewport);
}

/** Keeps each server-sent event `page` receives (in `journeyEvents`), to
 * be shown if the journey fails. */
export async function recordEvents(page) {
  await page.addInitScript(() => {
    window.journeyEvents = [];
    const Original = window.EventSource;
    window.EventSource = class extends Original {
      constructor(url, options) {
        super(url, options);
        const note = (what) => window.journeyEvents.push(`${new Date().toISOString().slice(11, 23)} ${url} ${what}`);
        note("opened");
        this.addEventListener("error", () => note(`error (state ${this.readyState})`));
        for (const kind of ["message", "state", "entry", "idle"]) {
          this.addEventListener(kind, (event) => note(`${kind} ${event.lastEventId} ${event.data.slice(0, 160)}`));
        }
      }
      close() {
        window.journeyEvents.push(`${new Date().toISOString().slice(11, 23)} ${this.url} closed by the page`);
        super.close();
      }
    };
  });
}

/** Runs `journey` with a browser, closing it however the journey ends. */
export async function run(journey) {
  const browser = await launch();
  try {
    await journey(browser);
  } catch (error) {
    console.error(error.stack || String(error));
    process.exitCode = 1;
    await describePages();
  } finally {
    await browser.close();
  }
}

/** What each page showed when the journey failed: its address, its text
 * and a screenshot (failure-N.png), so a failure in CI can be read. */
async function describePages() {
  for (const [index, page] of pages.entries()) {
    if (page.isClosed()) continue;
    try {
      const text = await page.evaluate(() => document.body.innerText);
      console.error(`\n--- page ${index}: ${page.url()}\n${text.slice(0, 3000)}`);
      const events = await page.evaluate(() => window.journeyEvents ?? []);
      if (events.length) console.error(`--- its last events:\n${events.slice(-40).join("\n")}`);
      await screenshot(page, `failure-${index}`);
    } catch (e) {
      console.error(`page ${index} (${page.url()}) could not be read: ${e.message}`);
    }
  }
}

export function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`the journey needs ${name}`);
  return value;
}
