// A JavaScript agent that misbehaves in every way a JavaScript program can,
// for the node's tests: each call must end with a clear error within its
// deadline while the node keeps serving.

import { Agent, t } from "agentsite";

const agent = new Agent({
  name: "js-hostile",
  description: "Misbehaves on purpose: loops, eats memory, throws, returns nonsense.",
  tags: ["test"],
});

agent.tool("spin", { description: "Loops forever." }, () => {
  for (;;) {}
});

agent.tool("bloat", { description: "Grows an array until memory runs out." }, () => {
  const hoard = [];
  for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
});

agent.tool("throw", { description: "Throws an exception it does not handle." }, () => {
  throw new TypeError("the value that was never there");
});

agent.tool("nonsense", { description: "Returns something that is neither text, content nor JSON." }, () => () => 42);

agent.tool("recurse", { description: "Recurses without end." }, function recurse() {
  return recurse() + 1;
});

agent.tool("shout", {
  description: "Works: upper-cases a text, so that the tests see the agent still serves.",
  input: { text: t.string().describe("what to shout") },
}, ({ text }) => text.toUpperCase());
