// Builds a JavaScript agent into a WebAssembly component:
//
//     node guest-sdk/js/build.mjs app.js -o app.wasm [--wit DIR]
//
// bundles the program with this SDK (rolldown: `import ... from "agentsite"`
// resolves to agentsite.js here; the contract's imports stay imports), then
// runs componentize-js against the agent world of wit/agent.wit, which
// snapshots StarlingMonkey after evaluating the program: the Agent and its
// tools' schemas are made at build time, not on every call. A build whose
// inputs (the program's directory, this SDK, the WIT, the tools' versions)
// are those of the existing output is skipped.

import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const SDK = dirname(fileURLToPath(import.meta.url));
const DEFAULT_WIT = resolve(SDK, "../../wit");
const WORLD = "apps-agent";

function files(directory, suffixes) {
  const found = [];
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === "node_modules" || entry.name.startsWith(".")) continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (suffixes.some((s) => entry.name.endsWith(s))) found.push(path);
    }
  };
  walk(directory);
  return found.sort();
}

function inputsDigest(app, wit) {
  const digest = createHash("sha256");
  digest.update(readFileSync(join(SDK, "package-lock.json")));
  for (const [directory, suffixes] of [[dirname(app), [".js", ".mjs"]], [SDK, ["agentsite.js", "build.mjs"]], [wit, [".wit"]]]) {
    for (const path of files(directory, suffixes)) {
      digest.update(relative(directory, path));
      digest.update(readFileSync(path));
    }
  }
  return digest.digest("hex");
}

async function build(app, output, wit) {
  const stamp = `${output}.inputs`;
  const digest = inputsDigest(app, wit);
  if (existsSync(output) && existsSync(stamp) && readFileSync(stamp, "utf8").trim() === digest) return false;
  const { rolldown } = await import("rolldown");
  const { componentize } = await import("@bytecodealliance/componentize-js");
  // componentize-js reads the WIT through WASI (its WIT parser is itself a
  // component), and this shim starts with no directories open.
  const { _setPreopens } = await import("@bytecodealliance/preview2-shim/filesystem");
  _setPreopens({ "/": "/" });
  const work = mkdtempSync(join(tmpdir(), "agentsite-js-"));
  try {
    const entry = join(work, "entry.js");
    writeFileSync(entry,
      `import ${JSON.stringify(app)}; // the program: defines its Agent and tools\n` +
      `export { apps, card, tools, resources, prompts } from "agentsite";\n`);
    const bundle = await rolldown({
      input: entry,
      resolve: { alias: { agentsite: join(SDK, "agentsite.js") } },
      external: [/^agentsite:agent\//, /^wasi:/],
      logLevel: "warn",
    });
    const bundled = join(work, "agent.js");
    await bundle.write({ file: bundled, format: "esm" });
    await bundle.close();
    const { component } = await componentize({
      sourcePath: bundled,
      witPath: wit,
      worldName: WORLD,
      // Outgoing HTTP goes through the node's wasi:http grant like any
      // agent's; the fetch-event handler is for HTTP servers.
      disableFeatures: ["fetch-event"],
    });
    mkdirSync(dirname(output), { recursive: true });
    writeFileSync(`${output}.partial`, component);
    renameSync(`${output}.partial`, output);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  writeFileSync(stamp, `${digest}\n`);
  return true;
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { output: { type: "string", short: "o" }, wit: { type: "string", default: DEFAULT_WIT } },
});
if (positionals.length !== 1 || !values.output) {
  console.error("usage: node build.mjs APP.js -o OUT.wasm [--wit DIR]");
  process.exit(2);
}
const app = resolve(positionals[0]);
if (!existsSync(app) || !statSync(app).isFile()) {
  console.error(`error: ${positionals[0]} is not a file`);
  process.exit(1);
}
if (!existsSync(join(values.wit, "agent.wit"))) {
  console.error(`error: ${values.wit} has no agent.wit (pass --wit)`);
  process.exit(1);
}
try {
  const built = await build(app, resolve(values.output), resolve(values.wit));
  console.log(`${built ? "built" : "up to date"}: ${values.output}`);
} catch (e) {
  console.error(`error: ${String(e?.message ?? e).split("\n")[0]}`);
  if (process.env.AGENTSITE_DEBUG) console.error(e);
  process.exit(1);
}
