// The hub page: cards for what the network adds to a search, as it comes.
import { failureOf, readLines } from "./common.js";

const results = document.getElementById("results");
const form = document.getElementById("search-form");

// A filter applies at once.
for (const radio of form.querySelectorAll('input[name="show"]')) {
  radio.addEventListener("change", () => form.requestSubmit());
}

function addCard(html, id) {
  if (results.querySelector(`[data-id="${CSS.escape(id)}"]`)) return;
  const template = document.createElement("template");
  // The node rendered (and escaped) this card, as it did the page.
  template.innerHTML = html;
  results.append(template.content);
  document.getElementById("empty")?.remove();
}

async function searchNetwork() {
  const spinner = document.getElementById("searching");
  const count = document.getElementById("count");
  const note = document.getElementById("search-note");
  if (spinner) spinner.hidden = false;
  const query = new URLSearchParams({ q: results.dataset.query, show: results.dataset.show });
  try {
    const response = await fetch(`/hub/search?${query}`, { headers: { Accept: "application/x-ndjson" } });
    if (!response.ok) throw new Error(await failureOf(response));
    await readLines(response, (line) => {
      if (line.card) addCard(line.card, line.id);
      if (line.total !== undefined && count) count.textContent = Math.max(line.total, results.children.length);
      if (line.note) { note.textContent = line.note; note.hidden = false; }
    });
  } catch (e) {
    note.textContent = `The network search stopped: ${e.message}`;
    note.hidden = false;
  } finally {
    if (spinner) spinner.hidden = true;
  }
}

if (results.dataset.live === "true") searchNetwork();
