// The console's shell: hash routes (#/search, …), the collection picker every page shares, and the API key
// prompt. Each page module exports render(view, ctx) and may return a function that stops it (timers).
import { api, apiKey, setApiKey } from "./api.js";
import * as collections from "./collections.js";
import * as ingest from "./ingest.js";
import * as search from "./search.js";
import * as ask from "./ask.js";
import * as cluster from "./cluster.js";
import * as quality from "./quality.js";

const PAGES = { collections, ingest, search, ask, cluster, quality };
const picker = document.getElementById("collection");
const view = document.getElementById("view");
let stop = null;

const ctx = {
  collection: () => picker.value,
  // Re-reads the collection list into the picker (keeping the choice when it still exists).
  async refreshCollections(select) {
    let names = [];
    try {
      names = (await api("GET", "/v1/collections")).collections.map((c) => c.name);
    } catch {
      // The page shows the error itself; the picker stays empty.
    }
    const want = select || picker.value || sessionStorage.getItem("attest.collection") || "";
    picker.replaceChildren(...names.map((n) => new Option(n, n)));
    if (names.includes(want)) picker.value = want;
    sessionStorage.setItem("attest.collection", picker.value);
    return names;
  },
};

picker.addEventListener("change", () => {
  sessionStorage.setItem("attest.collection", picker.value);
  route();
});

function route() {
  const name = (location.hash.match(/^#\/(\w+)/) || [])[1];
  const page = PAGES[name] ? name : "collections";
  if (stop) stop();
  stop = null;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.page === page) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.title = `Attest · ${page[0].toUpperCase()}${page.slice(1)}`;
  view.replaceChildren();
  view.dataset.page = page;
  stop = PAGES[page].render(view, ctx) || null;
}

// The key prompt: on demand (button) and whenever the API answers 401.
const dialog = document.getElementById("key-dialog");
const keyInput = document.getElementById("key-input");
function askKey(why) {
  if (dialog.open) return;
  document.getElementById("key-why").hidden = !why;
  keyInput.value = apiKey();
  dialog.showModal();
}
document.getElementById("key-button").addEventListener("click", () => askKey(false));
window.addEventListener("attest:auth", () => askKey(true));
dialog.addEventListener("close", async () => {
  if (dialog.returnValue === "save") setApiKey(keyInput.value.trim());
  if (dialog.returnValue === "forget") setApiKey("");
  if (dialog.returnValue === "save" || dialog.returnValue === "forget") {
    await ctx.refreshCollections();
    route();
  }
});

window.addEventListener("hashchange", route);
ctx.refreshCollections().then(route);
