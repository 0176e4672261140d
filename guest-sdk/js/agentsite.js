// Write agentsite agents in JavaScript.
//
// An agent is a WebAssembly component that exports a card and MCP-style
// tools (wit/agent.wit). With this module an author declares each tool's
// arguments with the schema builder `t` (which gives both the JSON Schema a
// client sees and the check an argument gets before the function runs) and
// writes the tool as a plain function; `node build.mjs app.js -o app.wasm`
// turns the program into a component with componentize-js:
//
//     import { Agent, t } from "agentsite";
//
//     const agent = new Agent({ name: "greeter", description: "Greets people." });
//
//     agent.tool("greet", {
//       description: "Says hello.",
//       input: { name: t.string().describe("who to greet") },
//       readOnly: true,
//     }, ({ name }) => `Hello, ${name}.`);
//
// Results follow the Rust and Python SDKs: a string becomes text, nothing
// an empty result, `text()`/`image()`/`audio()` blocks and `new
// ToolResult(...)` pass through, any other JSON value becomes structured
// content (wrapped as {"result": value} when it is not an object) with its
// JSON as text. `throw new ToolError("why")` fails the call with that
// reason; any other exception with its name and message.
//
// Every call runs in a fresh instance of the program: keep state in `kv`.

import * as host from "agentsite:agent/host@0.1.3";
import * as kvImport from "agentsite:agent/kv@0.1.3";
import * as llmImport from "agentsite:agent/llm@0.1.3";
import * as peersImport from "agentsite:agent/peers@0.1.3";

const DRAFT = "https://json-schema.org/draft/2020-12/schema";
/** MCP Apps' MIME type of an HTML view. */
export const APP_MIME_TYPE = "text/html;profile=mcp-app";
const NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** Throw it to fail a call with a one-line reason the caller sees. */
export class ToolError extends Error {
  constructor(message) {
    super(message);
    this.name = "ToolError";
  }
}

/** A check an argument failed: where and why. */
class ArgumentError extends Error {
  constructor(path, reason) {
    super(path ? `${path}: ${reason}` : reason);
    this.reason = reason;
  }
}

// -- the schema builder -----------------------------------------------------

function typeName(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  switch (typeof value) {
    case "boolean": return "a boolean";
    case "number": return "a number";
    case "string": return "a string";
    case "object": return "an object";
    default: return typeof value;
  }
}

/** One argument's type: its JSON Schema and the check of its values. */
class Type {
  constructor(schema, check) {
    this.schema = schema;
    this.check = check;
    this.isOptional = false;
    this.hasDefault = false;
  }
  /** What the value means, for people and models. */
  describe(description) {
    return changed(this, { schema: { ...this.schema, description } });
  }
  /** The argument may be left out (the function then gets `undefined`). */
  optional() {
    return changed(this, { isOptional: true });
  }
  /** The argument may be left out; the function then gets `value`. */
  default(value) {
    return changed(this, { hasDefault: true, defaultValue: value, schema: { ...this.schema, default: value } });
  }
}

/** A copy of `type` with `changes`: types are values, shared freely. */
const changed = (type, changes) => Object.assign(Object.create(Type.prototype), type, changes);

function number(integer) {
  return new Type({ type: integer ? "integer" : "number" }, (value, path) => {
    if (typeof value !== "number") {
      throw new ArgumentError(path, `expected ${integer ? "an integer" : "a number"}, got ${typeName(value)}`);
    }
    if (integer && !Number.isInteger(value)) throw new ArgumentError(path, `expected an integer, got ${value}`);
    return value;
  });
}

/** The schema builder: `t.string()`, `t.number()`, `t.array(t.number())`, ... */
export const t = {
  string: () => new Type({ type: "string" }, (value, path) => {
    if (typeof value !== "string") throw new ArgumentError(path, `expected a string, got ${typeName(value)}`);
    return value;
  }),
  number: () => number(false),
  integer: () => number(true),
  boolean: () => new Type({ type: "boolean" }, (value, path) => {
    if (typeof value !== "boolean") throw new ArgumentError(path, `expected a boolean, got ${typeName(value)}`);
    return value;
  }),
  /** One of some fixed strings or numbers. */
  enum: (choices) => new Type({ enum: [...choices] }, (value, path) => {
    if (!choices.includes(value)) {
      const listed = choices.map((c) => JSON.stringify(c)).join(", ");
      throw new ArgumentError(path, `expected one of ${listed}, got ${JSON.stringify(value)}`);
    }
    return value;
  }),
  array: (items) => new Type({ type: "array", items: items.schema }, (value, path) => {
    if (!Array.isArray(value)) throw new ArgumentError(path, `expected an array, got ${typeName(value)}`);
    return value.map((item, i) => items.check(item, `${path}[${i}]`));
  }),
  /** An object with named fields, each a type (optional ones marked so). */
  object: (fields) => {
    const { schema, check } = objectType(fields);
    return new Type(schema, check);
  },
  /** Any JSON value, unchecked. */
  any: () => new Type({}, (value) => value),
};

function objectType(fields) {
  const properties = {};
  const required = [];
  for (const [name, type] of Object.entries(fields)) {
    properties[name] = type.schema;
    if (!type.isOptional && !type.hasDefault) required.push(name);
  }
  const schema = { type: "object", properties, additionalProperties: false };
  if (required.length) schema.required = required;
  const expected = Object.keys(fields).map((n) => `\`${n}\``).join(", ") || "nothing";
  const check = (value, path, noun = "field") => {
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      throw new ArgumentError(path, `expected an object, got ${typeName(value)}`);
    }
    for (const key of Object.keys(value)) {
      if (!Object.hasOwn(fields, key)) throw new ArgumentError(path, `unknown ${noun} \`${key}\`, expected ${expected}`);
    }
    const checked = {};
    for (const [name, type] of Object.entries(fields)) {
      if (Object.hasOwn(value, name)) {
        checked[name] = type.check(value[name], path ? `${path}.${name}` : name);
      } else if (type.hasDefault) {
        checked[name] = type.defaultValue;
      } else if (!type.isOptional) {
        throw new ArgumentError(path, `missing ${noun} \`${name}\``);
      }
    }
    return checked;
  };
  return { schema, check };
}

// -- results -----------------------------------------------------------------

/** Plain or markdown text. */
export const text = (value) => ({ tag: "text", val: String(value) });
/** An image: bytes (a Uint8Array) and their MIME type. */
export const image = (data, mimeType) => ({ tag: "image", val: { data: new Uint8Array(data), mimeType } });
/** A sound: bytes and their MIME type. */
export const audio = (data, mimeType) => ({ tag: "audio", val: { data: new Uint8Array(data), mimeType } });

const isContent = (value) =>
  value !== null && typeof value === "object" && ["text", "image", "audio", "resource"].includes(value.tag) &&
  "val" in value && Object.keys(value).length === 2;

/** A complete result: content blocks, structured content and whether it
 * reports a failure the caller (often a model) should see. */
export class ToolResult {
  constructor(content = [], structured = undefined, isError = false) {
    this.content = content;
    this.structured = structured;
    this.isError = isError;
  }
  /** A result that reports a failure in its text (MCP `isError`). */
  static error(reason) {
    return new ToolResult([text(reason)], undefined, true);
  }
}

function toResult(value) {
  if (value instanceof ToolResult) return value;
  if (value === undefined || value === null) return new ToolResult();
  if (typeof value === "string") return new ToolResult([text(value)]);
  if (isContent(value)) return new ToolResult([value]);
  if (Array.isArray(value) && value.length && value.every(isContent)) return new ToolResult(value);
  if (typeof value === "function" || typeof value === "symbol" || typeof value === "bigint") {
    throw new ToolError(`the tool returned a ${typeof value}, which is not text, content or JSON`);
  }
  if (typeof value === "number" && !Number.isFinite(value)) {
    throw new ToolError(`the tool returned ${value}, which JSON cannot hold`);
  }
  const structured = typeof value === "object" && !Array.isArray(value) ? value : { result: value };
  // JSON.stringify writes Infinity and NaN as null, anywhere in the value:
  // an overflow would read as "nothing".
  const json = JSON.stringify(structured, (_, v) => {
    if (typeof v === "number" && !Number.isFinite(v)) {
      throw new ToolError(`the result holds ${v}, which JSON cannot hold`);
    }
    return v;
  });
  if (json === undefined) throw new ToolError("the tool returned something JSON cannot hold");
  return new ToolResult([text(json)], JSON.parse(json));
}

function outputSchema(output) {
  if (!output) return undefined;
  const schema = output.schema.type === "object"
    ? output.schema
    : { type: "object", properties: { result: output.schema }, required: ["result"] };
  return JSON.stringify({ $schema: DRAFT, ...schema });
}

// -- the agent ---------------------------------------------------------------

let theAgent;

const oneLine = (text) => String(text).split(/\s+/).filter(Boolean).join(" ");

/** A failure of a call, in the shape of the contract's `tool-error`. */
const failure = (tag, val) => ({ tag, val });

/** An agent of a node: a card and tools. One per component. */
export class Agent {
  constructor({ name, description, version = "0.1.0", tags = [], homepage = undefined }) {
    if (!NAME.test(name ?? "")) {
      throw new Error(`agent name ${JSON.stringify(name)}: 1 to 64 characters of a-z 0-9 - _, starting with a letter or digit`);
    }
    if (!description) throw new Error(`agent ${name} needs a description`);
    if (theAgent) throw new Error(`this component already has the agent ${theAgent.name}`);
    Object.assign(this, { name, description, version, tags: [...tags], homepage });
    this.tools = new Map();
    this.resources = new Map();
    theAgent = this;
  }

  /** Offers `text` as the resource at `uri` (MCP resources). */
  resource(uri, text, { name, mimeType = undefined, description = undefined }) {
    if (typeof uri !== "string" || !uri) throw new Error("a resource needs a URI");
    if (!name) throw new Error(`resource ${uri} needs a name`);
    if (this.resources.has(uri)) throw new Error(`${this.name} already has a resource at ${uri}`);
    this.resources.set(uri, { uri, name, text: String(text), mimeType, description });
    return this;
  }

  /** Offers `html` as an interactive view (MCP Apps) at `uri`, a `ui://`
   * URI that tools name with `app: uri`. */
  view(uri, html, { name, description = undefined }) {
    if (!String(uri).startsWith("ui://")) throw new Error(`a view is at a ui:// URI, not ${JSON.stringify(uri)}`);
    return this.resource(uri, html, { name, mimeType: APP_MIME_TYPE, description });
  }

  /**
   * Makes `run` a tool. `spec.description` says what it does; `spec.input`
   * maps argument names to types of `t`; `spec.output` (a type) gives the
   * output schema; `readOnly`, `destructive`, `idempotent` and `openWorld`
   * are the MCP hints; `app` names the `ui://` view (see `view`) that MCP
   * clients render with its results, and `appOnly` offers the tool to that
   * view alone. `run` gets the checked arguments as one object.
   */
  tool(name, spec, run) {
    if (!TOOL_NAME.test(name)) throw new Error(`tool name ${JSON.stringify(name)}: 1 to 128 characters of A-Z a-z 0-9 _ - .`);
    if (this.tools.has(name)) throw new Error(`${this.name} already has a tool named ${name}`);
    if (!spec?.description) throw new Error(`tool ${name} needs a description`);
    if (typeof run !== "function") throw new Error(`tool ${name} needs a function`);
    if (spec.app !== undefined && !String(spec.app).startsWith("ui://")) {
      throw new Error(`tool ${name}: a view is at a ui:// URI, not ${JSON.stringify(spec.app)}`);
    }
    if (spec.appOnly && spec.app === undefined) throw new Error(`tool ${name}: appOnly needs app: "ui://..."`);
    const input = objectType(spec.input ?? {});
    this.tools.set(name, {
      listed: {
        name,
        title: spec.title,
        description: spec.description,
        inputSchema: JSON.stringify({ $schema: DRAFT, ...input.schema }),
        outputSchema: outputSchema(spec.output),
        annotations: {
          readOnly: spec.readOnly,
          destructive: spec.destructive,
          idempotent: spec.idempotent,
          openWorld: spec.openWorld,
        },
      },
      app: spec.app === undefined ? undefined : { tool: name, resourceUri: spec.app, visibility: spec.appOnly ? ["app"] : [] },
      check: input.check,
      run,
    });
    return this;
  }

  call(name, argumentsJson) {
    const tool = this.tools.get(name);
    if (!tool) throw failure("unknown-tool", name);
    let decoded;
    try {
      decoded = argumentsJson.trim() ? JSON.parse(argumentsJson) : {};
    } catch (e) {
      throw failure("invalid-arguments", `the arguments are not JSON: ${e.message}`);
    }
    let checked;
    try {
      if (decoded === null || typeof decoded !== "object" || Array.isArray(decoded)) {
        throw new ArgumentError("", `the arguments must be a JSON object, got ${typeName(decoded)}`);
      }
      checked = tool.check(decoded, "", "argument");
    } catch (e) {
      throw failure("invalid-arguments", e.message);
    }
    let result;
    try {
      result = toResult(tool.run(checked));
    } catch (e) {
      if (e instanceof ToolError) throw failure("failed", oneLine(e.message) || "the tool failed");
      const reason = oneLine(e?.message ?? e);
      const kind = e?.name ?? "Error";
      throw failure("failed", reason ? `${kind}: ${reason}` : kind);
    }
    return {
      content: result.content,
      structuredContent: result.structured === undefined ? undefined : JSON.stringify(result.structured),
      isError: Boolean(result.isError),
    };
  }
}

function current() {
  if (!theAgent) throw new Error("the program defines no Agent");
  return theAgent;
}

// -- the component's exports (wired by the build) ---------------------------

export const card = {
  describe() {
    const a = current();
    return { name: a.name, version: a.version, description: a.description, tags: a.tags, homepage: a.homepage };
  },
};

export const tools = {
  listTools: () => [...current().tools.values()].map((tool) => tool.listed),
  callTool: (name, argumentsJson) => current().call(name, argumentsJson),
};

export const resources = {
  listResources: () => [...current().resources.values()].map(({ uri, name, description, mimeType }) =>
    ({ uri, name, title: undefined, description, mimeType })),
  listResourceTemplates: () => [],
  readResource: (uri) => {
    const found = current().resources.get(uri);
    if (!found) throw { tag: "not-found", val: uri };
    return [{ uri, mimeType: found.mimeType, body: { tag: "text", val: found.text } }];
  },
};

export const apps = {
  toolApps: () => [...current().tools.values()].filter((tool) => tool.app).map((tool) => tool.app),
};

export const prompts = {
  listPrompts: () => [],
  getPrompt: (name) => { throw { tag: "unknown-prompt", val: name }; },
};

// -- what the node gives an agent ---------------------------------------------

/** The node refused or could not do what was asked: `kind` names the case
 * (`not-granted`, `quota-exceeded`, `not-found`, `unavailable`, ...). */
export class NodeError extends ToolError {
  constructor(kind, message) {
    super(message);
    this.name = "NodeError";
    this.kind = kind;
  }
}

function toolErrorText(error) {
  if (error.tag === "unknown-tool") return `unknown tool ${error.val}`;
  if (error.tag === "invalid-arguments") return `invalid arguments: ${error.val}`;
  return error.val;
}

/** Runs an import, turning its error variant into a NodeError. */
function node(run) {
  try {
    return run();
  } catch (e) {
    const payload = e?.payload;
    if (payload && typeof payload.tag === "string") {
      const message = typeof payload.val === "string" ? payload.val : toolErrorText(payload.val);
      throw new NodeError(payload.tag, message);
    }
    throw e;
  }
}

/** The node's log, tagged with the agent's name. */
export const log = {
  debug: (message) => host.log("debug", String(message)),
  info: (message) => host.log("info", String(message)),
  warn: (message) => host.log("warn", String(message)),
  error: (message) => host.log("error", String(message)),
};

/** Reports progress of the current call to its caller (MCP progress). */
export function progress(done, total = undefined, message = undefined) {
  host.progress(done, total, message);
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The agent's own key-value store (granted with `--kv`). */
export const kv = {
  get: (key) => node(() => kvImport.get(key)),
  getString: (key) => {
    const value = kv.get(key);
    return value === undefined ? undefined : decoder.decode(value);
  },
  getJson: (key) => {
    const value = kv.getString(key);
    return value === undefined ? undefined : JSON.parse(value);
  },
  /** Stores bytes, or a string as UTF-8; durable when it returns. */
  set: (key, value) => node(() => kvImport.set(key, typeof value === "string" ? encoder.encode(value) : new Uint8Array(value))),
  setJson: (key, value) => kv.set(key, JSON.stringify(value)),
  delete: (key) => node(() => kvImport.delete(key)),
  /** Keys starting with `prefix`, ascending, strictly after `after`. */
  keys: (prefix = "", after = undefined, limit = 1000) => node(() => kvImport.listKeys(prefix, after, limit)),
};

/** Other agents, on this node or the network (granted with `--peers`). */
export const peers = {
  discover: (query, limit = 10) =>
    node(() => peersImport.discover(query, limit)).map((found) => ({
      id: found.id,
      name: found.card.name,
      description: found.card.description,
      tags: found.card.tags,
      tools: found.tools.map((tool) => tool.name),
      providers: found.providers,
    })),
  call: (agentId, tool, args = {}) => {
    const result = node(() => peersImport.call(agentId, tool, JSON.stringify(args)));
    return {
      text: result.content.filter((c) => c.tag === "text").map((c) => c.val).join("\n"),
      structured: result.structuredContent === undefined ? undefined : JSON.parse(result.structuredContent),
      isError: result.isError,
    };
  },
};

/** A language model chosen by the node or the calling client (granted with `--llm`). */
export const llm = {
  /** The reply to `messages`, pairs of role (system, user, assistant) and text. */
  chat: (messages, { maxTokens, temperature, modelHint } = {}) =>
    node(() => llmImport.chat({
      messages: messages.map(([role, content]) => ({ role, content })),
      modelHint,
      maxTokens,
      temperature,
    })).content,
  ask: (prompt, maxTokens = 256) => llm.chat([["user", prompt]], { maxTokens }),
};
