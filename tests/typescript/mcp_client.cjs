// The official TypeScript MCP SDK (@modelcontextprotocol/sdk, pinned in
// tests/conformance/package-lock.json) as a client of an agentsite node:
// most desktop MCP clients are built on it. Lists every tool, calls tools
// whose results the SDK validates against their output schemas, and fails
// on anything the SDK warns about (such as a schema format JSON Schema does
// not define, which its validator reports for every property on every
// listing).
//
// usage: node mcp_client.cjs <sdk folder> <MCP endpoint URL>

"use strict";

const path = require("node:path");

const [sdk, url] = process.argv.slice(2);
if (!sdk || !url) {
  console.error("usage: node mcp_client.cjs <sdk folder> <MCP endpoint URL>");
  process.exit(2);
}

// Everything the SDK and its validator say on the console is kept: a clean
// run says nothing.
const said = [];
for (const level of ["log", "info", "warn", "error", "debug"]) {
  console[level] = (...args) => said.push(`${level}: ${args.map(String).join(" ")}`);
}
const report = (line) => process.stdout.write(`${line}\n`);

const { Client } = require(path.join(sdk, "dist/cjs/client/index.js"));
const { StreamableHTTPClientTransport } = require(
  path.join(sdk, "dist/cjs/client/streamableHttp.js"),
);

function check(condition, what) {
  if (!condition) {
    throw new Error(`check failed: ${what}`);
  }
}

// Every `format` in a schema, with where it is.
function formats(schema, at, found) {
  if (Array.isArray(schema)) {
    schema.forEach((item, i) => formats(item, `${at}/${i}`, found));
  } else if (schema && typeof schema === "object") {
    for (const [key, value] of Object.entries(schema)) {
      if (key === "format" && typeof value === "string") {
        found.push(`${at}: ${value}`);
      } else if (!["const", "enum", "default", "examples"].includes(key)) {
        formats(value, `${at}/${key}`, found);
      }
    }
  }
  return found;
}

async function main() {
  const client = new Client({ name: "agentsite-typescript-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));

  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined);
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  report(`listed ${tools.length} tools`);
  const names = tools.map((t) => t.name);
  check(names.includes("text.word_count"), `text.word_count in ${names}`);

  const nonStandard = tools.flatMap((t) =>
    formats({ input: t.inputSchema, output: t.outputSchema }, t.name, []).filter(
      (f) => !f.endsWith(": date-time") && !f.endsWith(": uri") && !f.endsWith(": email"),
    ),
  );
  check(nonStandard.length === 0, `standard formats only, found ${nonStandard}`);
  const words = tools.find((t) => t.name === "text.word_count");
  const counted = words.outputSchema.properties.words;
  check(counted.type === "integer" && counted.minimum === 0, `words is a count: ${JSON.stringify(counted)}`);

  // The SDK validates structured content against the output schema.
  const result = await client.callTool({
    name: "text.word_count",
    arguments: { text: "two words\nand a line" },
  });
  check(!result.isError, `word_count succeeds: ${JSON.stringify(result)}`);
  check(result.structuredContent.words === 5, `5 words: ${JSON.stringify(result.structuredContent)}`);
  report("text.word_count: 5 words, output schema validated");

  const sum = await client.callTool({ name: "calculator.add", arguments: { a: 2, b: 40 } });
  check(sum.structuredContent.result === 42, `2 + 40: ${JSON.stringify(sum)}`);
  report("calculator.add: 42");

  // A second listing, as clients do on every list_changed: still silent.
  await client.listTools();
  await client.close();

  check(said.length === 0, `the SDK said nothing, but it said:\n${said.join("\n")}`);
  report("all checks passed");
}

main().catch((error) => {
  process.stdout.write(`${error.stack || error}\n`);
  if (said.length) {
    process.stdout.write(`the SDK said:\n${said.join("\n")}\n`);
  }
  process.exit(1);
});
