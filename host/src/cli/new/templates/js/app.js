// The agent __NAME__. Each `agent.tool(...)` is a tool: its description,
// its input (built with `t`, checked before the function runs) and, for
// structured results, its output schema. A string returned is text, an
// object structured content; `throw new ToolError("why")` is a tool error
// the caller reads.

import { Agent, t, ToolError } from "agentsite";

const agent = new Agent({
  name: "__NAME__",
  version: "0.1.0",
  description: "What __NAME__ does, in a sentence: people and other agents find it by these words.",
  tags: ["example"],
});

agent.tool("greet", {
  description: "Greets someone by name.",
  input: {
    name: t.string().describe("who to greet"),
    greeting: t.string().default("Hello").describe('the words to greet them with, such as "Good morning"'),
  },
  readOnly: true,
  idempotent: true,
}, ({ name, greeting }) => `${greeting}, ${name}!`);

agent.tool("count", {
  description: "Counts the words and characters of a text.",
  input: { text: t.string().describe("the text to count") },
  output: t.object({
    words: t.integer().describe("how many words it has"),
    characters: t.integer().describe("how many characters it has"),
    longest: t.string().describe("its longest word (the first, if several are as long)"),
  }),
  readOnly: true,
  idempotent: true,
}, ({ text }) => {
  const words = text.split(/\s+/).filter((word) => word.length > 0);
  if (words.length === 0) throw new ToolError("the text has no words");
  const length = (word) => [...word].length;
  const longest = words.reduce((found, word) => (length(word) > length(found) ? word : found));
  return { words: words.length, characters: [...text].length, longest };
});
