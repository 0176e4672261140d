// JSON documents taken apart and compared, in JavaScript: an agent for
// people and models who have two API responses or config files and want to
// know what differs, or one value deep inside a document.

import { Agent, t, ToolError } from "agentsite";

const agent = new Agent({
  name: "jsontools",
  version: "0.1.0",
  description: "Compares JSON documents, flattens them to paths and picks values out of them.",
  tags: ["json", "diff", "data", "javascript"],
});

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

function step(path, key) {
  if (typeof key === "number") return `${path}[${key}]`;
  return /^[A-Za-z_$][\w$]*$/.test(key) ? (path ? `${path}.${key}` : key) : `${path}[${JSON.stringify(key)}]`;
}

function* changes(before, after, path) {
  if (Array.isArray(before) && Array.isArray(after)) {
    const length = Math.max(before.length, after.length);
    for (let i = 0; i < length; i++) {
      if (i >= before.length) yield { op: "added", path: step(path, i), after: after[i] };
      else if (i >= after.length) yield { op: "removed", path: step(path, i), before: before[i] };
      else yield* changes(before[i], after[i], step(path, i));
    }
  } else if (isObject(before) && isObject(after)) {
    for (const key of Object.keys(before)) {
      if (!Object.hasOwn(after, key)) yield { op: "removed", path: step(path, key), before: before[key] };
      else yield* changes(before[key], after[key], step(path, key));
    }
    for (const key of Object.keys(after)) {
      if (!Object.hasOwn(before, key)) yield { op: "added", path: step(path, key), after: after[key] };
    }
  } else if (JSON.stringify(before) !== JSON.stringify(after)) {
    yield { op: "changed", path: path || "$", before, after };
  }
}

agent.tool("diff", {
  description: "What changed from one JSON document to another: each added, removed or changed value with its path.",
  input: {
    before: t.any().describe("the first document"),
    after: t.any().describe("the second document"),
    limit: t.integer().default(200).describe("the most changes to list"),
  },
  output: t.object({ changes: t.array(t.any()), total: t.integer() }),
  readOnly: true,
  idempotent: true,
}, ({ before, after, limit }) => {
  if (limit < 1) throw new ToolError(`limit must be at least 1, got ${limit}`);
  const all = [...changes(before, after, "")];
  return { changes: all.slice(0, limit), total: all.length };
});

function* leaves(value, path) {
  if (Array.isArray(value) && value.length) {
    for (let i = 0; i < value.length; i++) yield* leaves(value[i], step(path, i));
  } else if (isObject(value) && Object.keys(value).length) {
    for (const [key, inner] of Object.entries(value)) yield* leaves(inner, step(path, key));
  } else {
    yield [path || "$", value];
  }
}

agent.tool("flatten", {
  description: "Every leaf value of a JSON document by its path, such as items[0].price.",
  input: { document: t.any().describe("the document") },
  readOnly: true,
  idempotent: true,
}, ({ document }) => Object.fromEntries(leaves(document, "")));

function parsePath(path) {
  const parts = [];
  const pattern = /([^.[\]]+)|\[(\d+|\*)\]|\["((?:[^"\\]|\\.)*)"\]/g;
  let match;
  let consumed = 0;
  while ((match = pattern.exec(path)) !== null) {
    if (match.index !== consumed && path[consumed] !== ".") {
      throw new ToolError(`cannot read the path at ${JSON.stringify(path.slice(consumed))}`);
    }
    parts.push(match[1] ?? (match[2] === "*" ? "*" : match[2] !== undefined ? Number(match[2]) : JSON.parse(`"${match[3]}"`)));
    consumed = pattern.lastIndex;
    if (path[consumed] === ".") consumed++;
  }
  if (consumed !== path.length) throw new ToolError(`cannot read the path at ${JSON.stringify(path.slice(consumed))}`);
  return parts;
}

agent.tool("pick", {
  description: "The values at a path in a JSON document; * matches every key or item (users[*].email).",
  input: {
    document: t.any().describe("the document"),
    path: t.string().describe("dotted keys and [index] steps, with * for all"),
  },
  readOnly: true,
  idempotent: true,
}, ({ document, path }) => {
  let found = [document];
  for (const part of parsePath(path)) {
    found = found.flatMap((value) => {
      if (part === "*") return Array.isArray(value) ? value : isObject(value) ? Object.values(value) : [];
      if (typeof part === "number") return Array.isArray(value) && part < value.length ? [value[part]] : [];
      return isObject(value) && Object.hasOwn(value, part) ? [value[part]] : [];
    });
  }
  return { path, values: found };
});
