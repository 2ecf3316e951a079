// Search playground: POST /v1/collections/{name}/search with lanes, k, rrf_k, lane weights and a metadata
// filter; every hit with its lane ranks and scores, shard and title, the query's words highlighted; the
// response's fallback_mode and degraded flags as banners that are never hidden.
import { api, enc } from "./api.js";
import { h, clear, errorBox, banner, field, terms, highlightWords, num } from "./ui.js";

export function fallbackBanners(r) {
  return [
    r.fallback_mode
      ? banner("warn", "Fallback mode:", "the embedder is unavailable, so the dense lane was skipped and these results come from BM25 (keyword) search only.", "fallback-banner")
      : null,
    r.degraded
      ? banner("warn", "Degraded:", `not every shard answered${r.missing_shards?.length ? ` (missing shards: ${r.missing_shards.join(", ")})` : ""}; results may be incomplete.`, "degraded-banner")
      : null,
  ];
}

function lane(name, l) {
  return l ? h("span.lane", {}, h("b", {}, name), ` #${l.rank} · ${num(l.score)}`) : h("span.lane.none", {}, `${name} —`);
}

function hit(x, i, words) {
  return h("li.hit", { dataset: { chunk: x.chunk_id } },
    h("div.hit-head", {},
      h("span.rank", {}, `${i + 1}`),
      h("strong.title", {}, x.title || x.doc_id),
      h("span.muted", {}, ` doc ${x.doc_id} · shard ${x.shard} · rrf ${num(x.score, 4)}`)),
    h("div.lanes", {}, lane("dense", x.lanes.dense), lane("bm25", x.lanes.bm25)),
    h("p.text", {}, highlightWords(x.text, words)));
}

export function render(view, ctx) {
  const out = h("section#search-results", { "aria-live": "polite" });
  const form = h("form#search-form", {},
    field("Query", h("input", { name: "query", id: "s-query", type: "search", required: true, autocomplete: "off" })),
    h("fieldset.lanes", {}, h("legend", {}, "Lanes"),
      ["hybrid", "dense", "bm25"].map((v) =>
        h("label.inline", {}, h("input", { type: "radio", name: "lanes", value: v, checked: v === "hybrid" }), ` ${v}`))),
    h("details.opts", { open: !window.matchMedia("(max-width: 700px)").matches },
      h("summary", {}, "Options: k, fusion, weights, filter"),
      h("div.grid", {},
      field("k", h("input", { name: "k", type: "number", min: 1, value: 10 }), "Hits returned."),
      field("rrf_k", h("input", { name: "rrf_k", type: "number", min: 1, placeholder: "60" }),
        "Reciprocal Rank Fusion constant: a hit scores Σ weight / (rrf_k + rank); larger flattens rank differences."),
      field("dense weight", h("input", { name: "w_dense", type: "number", step: "0.1", min: 0, placeholder: "1" })),
      field("bm25 weight", h("input", { name: "w_bm25", type: "number", step: "0.1", min: 0, placeholder: "1" }))),
    field("Filter (JSON)", h("textarea", { name: "filter", rows: 2, placeholder: '{"lang": "en", "year": {"gte": 2000}}' }),
      "Metadata conditions: a value, a list, {\"in\": [...]} or a range {\"gte\", \"gt\", \"lte\", \"lt\"}.")),
    h("div.row", {}, h("button", { type: "submit" }, "Search")));

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const collection = ctx.collection();
    const f = new FormData(form);
    const query = String(f.get("query"));
    const body = { query, k: Number(f.get("k")) || undefined };
    const lanes = f.get("lanes");
    if (lanes !== "hybrid") body.lanes = [lanes];
    if (f.get("rrf_k")) body.rrf_k = Number(f.get("rrf_k"));
    const weights = {};
    if (f.get("w_dense")) weights.dense = Number(f.get("w_dense"));
    if (f.get("w_bm25")) weights.bm25 = Number(f.get("w_bm25"));
    if (Object.keys(weights).length) body.weights = weights;
    clear(out, h("p.muted", {}, "Searching…"));
    try {
      if (!collection) throw { code: "no collection", message: "create or pick a collection first" };
      const filter = String(f.get("filter") || "").trim();
      if (filter) {
        try {
          body.filter = JSON.parse(filter);
        } catch (e) {
          throw { code: "invalid_argument", message: `filter is not JSON: ${e.message}`, field: "filter" };
        }
      }
      const r = await api("POST", `/v1/collections/${enc(collection)}/search`, body);
      const words = terms(query);
      clear(out, fallbackBanners(r),
        h("p.muted", { "data-testid": "search-summary" },
          `${r.hits.length} hits in ${num(r.took_ms, 1)} ms · request ${r.request_id}`),
        h("ol.hits", { "data-testid": "hits" }, r.hits.map((x, i) => hit(x, i, words))));
    } catch (e) {
      clear(out, errorBox(e));
    }
  });

  view.append(h("h1", {}, "Search"), form, out);
  form.querySelector("input[name=query]").focus();
}
