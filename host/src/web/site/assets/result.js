// A tool's result as a person reads it: text as markdown, structured
// content as a tree that folds, images and audio inline, an error with its
// reason. Nothing the tool returned is ever parsed as HTML.
import { bytes, h } from "./common.js";

/** Text shown at most per block; the rest is in the download. */
const MAX_TEXT = 20000;
/** Children of one object or array shown in the tree. */
const MAX_CHILDREN = 200;

const IMAGE_TYPES = /^image\/(png|jpeg|gif|webp|avif|bmp|svg\+xml)$/;
const AUDIO_TYPES = /^audio\/[a-z0-9.+-]+$/;

/** Inline markdown: `code`, **strong**, *emphasis*, [links](https://…). */
function inline(text) {
  const out = [];
  const pattern = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*|_[^_\s][^_]*_)|(\[[^\]]+\]\((https?:\/\/[^)\s]+)\))/g;
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) out.push(text.slice(last, match.index));
    const [whole] = match;
    if (match[1]) out.push(h("code", {}, whole.slice(1, -1)));
    else if (match[2]) out.push(h("strong", {}, whole.slice(2, -2)));
    else if (match[3]) out.push(h("em", {}, whole.slice(1, -1)));
    else out.push(h("a", { href: match[5], rel: "noopener noreferrer nofollow", target: "_blank" }, whole.slice(1, whole.indexOf("]"))));
    last = match.index + whole.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

/** Block markdown: headings, fenced code, lists, quotes, paragraphs. */
export function markdown(text) {
  const root = h("div", { class: "markdown" });
  const lines = text.split("\n");
  let paragraph = [];
  let list = null;
  // A line break inside a paragraph is kept (as in a chat, not as in
  // CommonMark, where it would be a space).
  const flush = () => {
    if (paragraph.length) {
      root.append(h("p", {}, paragraph.flatMap((line, n) => (n ? [h("br"), ...inline(line)] : inline(line)))));
    }
    paragraph = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith("```")) {
      flush(); list = null;
      const code = [];
      while (++i < lines.length && !lines[i].startsWith("```")) code.push(lines[i]);
      root.append(h("pre", {}, h("code", {}, code.join("\n"))));
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
    const numbered = /^\s*\d+[.)]\s+(.*)$/.exec(line);
    if (heading) {
      flush(); list = null;
      root.append(h(`h${Math.min(6, heading[1].length + 2)}`, {}, inline(heading[2])));
    } else if (bullet || numbered) {
      flush();
      const tag = bullet ? "ul" : "ol";
      if (!list || list.tagName.toLowerCase() !== tag) { list = h(tag); root.append(list); }
      list.append(h("li", {}, inline((bullet ?? numbered)[1])));
    } else if (line.startsWith(">")) {
      flush(); list = null;
      root.append(h("blockquote", {}, inline(line.replace(/^>\s?/, ""))));
    } else if (!line.trim()) {
      flush(); list = null;
    } else {
      list = null;
      paragraph.push(line);
    }
  }
  flush();
  return root;
}

/** A JSON value as a tree whose objects and arrays fold. */
export function tree(value, key = null, depth = 0) {
  const label = key === null ? [] : [h("span", { class: "key" }, key), ": "];
  if (value !== null && typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
    const shape = Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`;
    const node = h("details", { open: depth < 2 }, h("summary", {}, label, shape));
    for (const [k, v] of entries.slice(0, MAX_CHILDREN)) node.append(tree(v, k, depth + 1));
    if (entries.length > MAX_CHILDREN) node.append(h("div", { class: "leaf hint" }, `… ${entries.length - MAX_CHILDREN} more in the download`));
    return depth === 0 ? h("div", { class: "tree" }, node) : node;
  }
  const kind = value === null ? "null" : typeof value === "string" ? "str" : typeof value === "number" ? "num" : "bool";
  const text = typeof value === "string" ? JSON.stringify(value.length > MAX_TEXT ? value.slice(0, MAX_TEXT) + "…" : value) : String(value);
  const leaf = h("div", { class: "leaf" }, label, h("span", { class: kind }, text));
  return depth === 0 ? h("div", { class: "tree" }, leaf) : leaf;
}

function download(output, name) {
  const blob = new Blob([JSON.stringify(output, null, 2)], { type: "application/json" });
  return h("a", { href: URL.createObjectURL(blob), download: name, class: "download" }, `Download the whole result (${bytes(blob.size)})`);
}

function block(content) {
  switch (content.type) {
    case "text": {
      const text = content.text ?? "";
      const cut = text.length > MAX_TEXT;
      return h("div", { class: "block" }, markdown(cut ? text.slice(0, MAX_TEXT) : text),
        cut ? h("p", { class: "hint" }, `Shown: the first ${MAX_TEXT} of ${text.length} characters.`) : null);
    }
    case "image":
      return IMAGE_TYPES.test(content.mimeType)
        ? h("div", { class: "block" }, h("img", { src: `data:${content.mimeType};base64,${content.data}`, alt: `image (${content.mimeType}) returned by the tool` }))
        : h("p", { class: "block hint" }, `an image of type ${content.mimeType}, which the page does not show`);
    case "audio":
      return AUDIO_TYPES.test(content.mimeType)
        ? h("div", { class: "block" }, h("audio", { controls: true, src: `data:${content.mimeType};base64,${content.data}` }))
        : h("p", { class: "block hint" }, `audio of type ${content.mimeType}, which the page does not play`);
    case "resource": {
      const resource = content.resource ?? {};
      return h("div", { class: "block" }, h("p", { class: "hint" }, "resource ", h("code", {}, resource.uri ?? "")),
        resource.text !== undefined ? h("pre", {}, resource.text.slice(0, MAX_TEXT)) : h("p", { class: "hint" }, `${bytes(Math.floor((resource.blob ?? "").length * 3 / 4))} of binary data`));
    }
    default:
      return h("div", { class: "block" }, tree(content));
  }
}

/** The blocks of a tool's output: its content, then structured content. */
export function renderOutput(output) {
  const parts = (output.content ?? []).map(block);
  if (output.structuredContent !== undefined) {
    parts.push(h("p", { class: "hint" }, "structured content"), tree(output.structuredContent));
  }
  return parts;
}

/** Shows `answer` (`{output, elapsed_ms, ran_on}`) in `container`. */
export function showResult(container, answer, tool) {
  const output = answer.output;
  container.replaceChildren();
  container.classList.toggle("is-error", !!output.isError);
  container.append(h("p", { class: "meta" },
    output.isError ? h("strong", { class: "problem" }, "The tool reported an error") : "Result",
    ` · ${answer.elapsed_ms.toFixed(1)} ms · ran on ${answer.ran_on}`));
  container.append(...renderOutput(output));
  const size = JSON.stringify(output).length;
  if (size > MAX_TEXT) container.append(h("p", {}, download(output, `${tool}-result.json`)));
}

/** Shows why a call did not happen. */
export function showFailure(container, message) {
  container.replaceChildren(h("p", { class: "problem", role: "alert" }, `The call failed: ${message}`));
  container.classList.add("is-error");
}
