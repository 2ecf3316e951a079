// Collections: the list, create (index parameters explained), drop (confirmed), per-shard statistics.
import { api, enc } from "./api.js";
import { h, clear, errorBox, table, field, confirmDialog, banner } from "./ui.js";

const HELP = {
  shards: "How many pieces the collection is split into; each document lives on one shard (by its id). More shards spread data and search work over more nodes. Default: the router's.",
  replication: "Copies of each shard on different nodes. 1 in attest dev; 2 or 3 in a cluster keeps the shard serving when a node fails.",
  nlist: "IVF cells: sealed vectors are grouped into this many clusters. About √N (N = vectors) is a good start; more cells make each search cheaper but need more data to train.",
  m: "PQ sub-quantizers: each vector is compressed to m codes. Must divide the dimension (384). More codes = more accurate distances and more memory.",
  nbits: "Bits per PQ code (8 = 256 centroids per sub-quantizer). Usually 8.",
  nprobe: "Cells searched per query (at most nlist). Higher = better recall, slower search; can be raised per request. Named alone, it serves every search that names none (no tuning).",
  recall_target: "Recall@10 each shard tunes its search setting to reach (0.5–1), measured on a sample of its own data after every seal and merge. Default 0.95 unless nprobe is set.",
};

export function render(view, ctx) {
  const list = h("div#collections-list");
  const stats = h("section#collection-stats", { "aria-live": "polite" });
  const status = h("div");
  const num = (name, placeholder) =>
    h("input", { type: "number", min: 1, name, id: `c-${name}`, placeholder, inputmode: "numeric" });
  const form = h("form#create-form", { novalidate: true },
    h("div.grid",
      {},
      field("Name", h("input", { name: "name", id: "c-name", required: true, pattern: "[A-Za-z0-9_-]+", autocomplete: "off" }),
        "Letters, digits, - and _."),
      field("Shards", num("shards", "default"), HELP.shards),
      field("Replication", num("replication", "1"), HELP.replication)),
    h("details", {},
      h("summary", {}, "Index parameters (FAISS IVF_PQ of sealed segments)"),
      h("div.grid", {},
        field("nlist", num("nlist", "default"), HELP.nlist),
        field("m", num("m", "default"), HELP.m),
        field("nbits", num("nbits", "8"), HELP.nbits),
        field("nprobe", num("nprobe", "default"), HELP.nprobe),
        field("recall target", h("input", { type: "number", min: 0.5, max: 1, step: 0.01, name: "recall_target",
          id: "c-recall_target", placeholder: "0.95", inputmode: "decimal" }), HELP.recall_target))),
    h("div.row", {}, h("button", { type: "submit" }, "Create collection")));

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    const int = (k) => (f.get(k) ? Number(f.get(k)) : undefined);
    const body = { name: String(f.get("name")).trim(), shards: int("shards"), replication: int("replication") };
    const index = { nlist: int("nlist"), m: int("m"), nbits: int("nbits"), nprobe: int("nprobe"),
      recall_target: int("recall_target") };
    if (Object.values(index).some((v) => v !== undefined)) body.index = index;
    clear(status);
    try {
      const c = await api("POST", "/v1/collections", body);
      clear(status, banner("info", "Created", `collection ${c.name} (${c.shards} shards).`, "created"));
      form.reset();
      await ctx.refreshCollections(c.name);
      await load();
    } catch (e) {
      clear(status, errorBox(e));
    }
  });

  // Size on disk in the unit that reads best (shards hold from kilobytes to hundreds of gigabytes).
  const bytes = (n) => {
    const units = ["B", "KB", "MB", "GB", "TB"];
    let v = Number(n || 0), u = 0;
    while (v >= 1024 && u < units.length - 1) { v /= 1024; u += 1; }
    return `${v.toFixed(u ? 1 : 0)} ${units[u]}`;
  };

  // The shard's live recall estimate: a sample of its searches run again exactly (engine.recall_probe).
  const recall = (r) => r
    ? `${r.recall.toFixed(3)} (${r.low.toFixed(3)}–${r.high.toFixed(3)}), ${r.samples} samples`
    : "not measured yet";
  // The setting the shard tuned for the collection's recall target (index.recall_target).
  const tuned = (t) => t
    ? `nprobe ${t.nprobe}${t.exact_refine ? `, re-score ${t.exact_refine}×k` : ""}: ${t.recall.toFixed(3)} ${t.reached ? "≥" : "<"} ${t.target}`
    : "not tuned";

  async function showStats(name) {
    clear(stats, h("p", {}, `Loading statistics of ${name}…`));
    try {
      const s = await api("GET", `/v1/collections/${enc(name)}/stats`);
      const rows = s.shards.map((x) =>
        h("tr", {}, h("td", {}, x.shard), h("td", {}, x.live_documents), h("td", {}, x.growing_rows),
          h("td", {}, x.sealed_rows), h("td", {}, x.sealed_segments), h("td", {}, bytes(x.disk_bytes)),
          h("td", {}, x.last_seq), h("td", { "data-testid": "recall" }, recall(x.recall)),
          h("td", { "data-testid": "tuned" }, tuned(x.tuned))));
      const total = (k) => s.shards.reduce((a, x) => a + Number(x[k] || 0), 0);
      clear(stats, h("h3", {}, `Shards of ${name}`),
        h("p.muted", {}, `${total("live_documents")} live chunks; ${total("growing_rows")} in growing segments (searched brute force, sealed at the threshold), ${total("sealed_rows")} in sealed IVF_PQ segments.`),
        table(["shard", "live chunks", "growing rows", "sealed rows", "sealed segments", "size on disk", "last seq",
          "recall@k (95%)", "search setting (recall target)"], rows,
          { "data-testid": "stats-table" }));
    } catch (e) {
      clear(stats, errorBox(e));
    }
  }

  async function drop(name) {
    const ok = await confirmDialog(`Drop ${name}?`,
      `Every document and segment of ${name} is deleted on every replica. This cannot be undone.`);
    if (!ok) return;
    try {
      await api("DELETE", `/v1/collections/${enc(name)}`);
      clear(status, banner("info", "Dropped", name, "dropped"));
      clear(stats);
      await ctx.refreshCollections();
      await load();
    } catch (e) {
      clear(status, errorBox(e));
    }
  }

  async function load() {
    try {
      const { collections } = await api("GET", "/v1/collections");
      if (!collections.length) return clear(list, h("p.muted", {}, "No collections yet: create one below."));
      const rows = collections.map((c) =>
        h("tr", { dataset: { collection: c.name } },
          h("th", { scope: "row" }, c.name),
          h("td", {}, c.shards), h("td", {}, c.replication), h("td", {}, c.dimension),
          h("td", {}, `nlist ${c.index.nlist} · m ${c.index.m} · nbits ${c.index.nbits} · nprobe ${c.index.nprobe}`),
          h("td.actions", {},
            h("button.ghost", { type: "button", onclick: () => showStats(c.name) }, "Stats"),
            h("button.danger", { type: "button", onclick: () => drop(c.name), "aria-label": `Drop ${c.name}` }, "Drop"))));
      clear(list, table(["name", "shards", "replicas", "dim", "index", ""], rows, { "data-testid": "collections-table" }));
    } catch (e) {
      clear(list, errorBox(e));
    }
  }

  view.append(h("h1", {}, "Collections"), list, stats, h("h2", {}, "Create a collection"), status, form);
  load();
}
