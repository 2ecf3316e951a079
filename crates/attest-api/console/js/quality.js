// Quality: the latest `attest-lab eval --json` report of the collection — the risk–coverage curve, the 2×2 (answered /
// abstained × answerable / unanswerable), nDCG@10 per lane. The report is the one the router keeps
// (GET /v1/collections/{name}/eval, from its `router.eval_reports_dir`); without one, a report loaded here from a
// file, kept in this browser (localStorage, per collection).
import { api, enc } from "./api.js";
import { h, clear, table, num, pct, banner, errorBox } from "./ui.js";

const SVG = "http://www.w3.org/2000/svg";
const storeKey = (c) => `attest.eval.${c}`;

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(typeof c === "string" ? document.createTextNode(c) : c);
  return el;
}

function curve(points) {
  const W = 360, H = 240, L = 44, B = 34, T = 10, R = 10;
  const x = (c) => L + c * (W - L - R);
  const y = (r) => H - B - r * (H - B - T);
  const maxRisk = Math.max(0.05, ...points.map((p) => p.hallucination_rate));
  const ry = (r) => y(r / maxRisk);
  const path = points.map((p, i) => `${i ? "L" : "M"}${x(p.coverage).toFixed(1)},${ry(p.hallucination_rate).toFixed(1)}`).join(" ");
  return svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": "risk–coverage curve" },
    svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }),
    svg("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }),
    svg("text", { x: (L + W) / 2, y: H - 6, "text-anchor": "middle" }, "coverage of answerable questions"),
    svg("text", { x: 12, y: (T + H - B) / 2, transform: `rotate(-90 12 ${(T + H - B) / 2})`, "text-anchor": "middle" }, "hallucination rate"),
    svg("text", { x: L - 4, y: T + 8, "text-anchor": "end" }, pct(maxRisk)),
    svg("text", { x: W - R, y: H - B + 14, "text-anchor": "end" }, "100%"),
    svg("path", { d: path, class: "line" }),
    ...points.map((p) => svg("circle", { cx: x(p.coverage), cy: ry(p.hallucination_rate), r: 2.5 },
      svg("title", {}, `threshold ${num(p.threshold)}: coverage ${pct(p.coverage)}, hallucination ${pct(p.hallucination_rate)}`))));
}

function draw(report) {
  const a = report.answers || {};
  const answeredOk = Math.round((a.coverage || 0) * (a.answerable || 0));
  const answeredBad = Math.round((a.hallucination_rate || 0) * (a.unanswerable || 0));
  const lanes = Object.entries(report.retrieval || {});
  const meta = report.meta || {};
  return [
    h("p.muted", {}, `${meta.timestamp || "undated"} · data ${meta.data || "?"} · commit ${(meta.git_commit || "?").slice(0, 10)} · ${a.questions ?? "?"} questions`),
    h("div.kpis", {},
      [["accuracy", pct(a.accuracy)], ["coverage", pct(a.coverage)], ["hallucination", pct(a.hallucination_rate)],
        ["citation validity", pct(a.citation_validity)]].map(([k, v]) => h("div.kpi", {}, h("b", {}, v), h("span", {}, k)))),
    h("div.two", {},
      h("section", {}, h("h2", {}, "Answered or abstained"),
        table(["", "answered", "abstained"], [
          h("tr", {}, h("th", { scope: "row" }, `answerable (${a.answerable ?? "?"})`), h("td.ok", {}, answeredOk), h("td", {}, (a.answerable || 0) - answeredOk)),
          h("tr", {}, h("th", { scope: "row" }, `unanswerable (${a.unanswerable ?? "?"})`), h("td.bad", {}, answeredBad), h("td.ok", {}, (a.unanswerable || 0) - answeredBad)),
        ], { "data-testid": "two-by-two" }),
        h("p.muted", {}, "An answered unanswerable question is a hallucination; an abstained answerable one is lost coverage.")),
      h("section", {}, h("h2", {}, "Risk–coverage"),
        report.risk_coverage?.length ? curve(report.risk_coverage) : h("p.muted", {}, "No curve in this report."))),
    h("h2", {}, "Retrieval per lane"),
    table(["lane", "nDCG@10", "", "recall@10", "MRR@10"], lanes.map(([lane, m]) => h("tr", {},
      h("th", { scope: "row" }, lane), h("td.num", {}, num(m.ndcg_at_10)),
      h("td.barcell", {}, h("span.hbar", { style: { width: `${(m.ndcg_at_10 || 0) * 100}%` } })),
      h("td.num", {}, num(m.recall_at_10)), h("td.num", {}, num(m.mrr_at_10)))), { "data-testid": "lanes" }),
  ];
}

export function render(view, ctx) {
  const collection = ctx.collection() || "(no collection)";
  const out = h("section#quality");
  const status = h("div");
  const input = h("input#quality-file", { type: "file", accept: ".json,application/json" });
  input.addEventListener("change", async () => {
    const file = input.files[0];
    if (!file) return;
    try {
      const report = JSON.parse(await file.text());
      if (!report.answers && !report.retrieval) throw new Error("not an `attest-lab eval --json` report");
      localStorage.setItem(storeKey(collection), JSON.stringify(report));
      clear(status);
      clear(out, draw(report));
    } catch (e) {
      clear(status, banner("error", "Cannot read the report:", e.message, "error"));
    }
  });
  const source = h("p#quality-source", { "data-testid": "quality-source" });
  view.append(h("h1", {}, `Quality of ${collection}`),
    h("p.muted", {}, "Run ", h("code", {}, `attest-lab eval --data DIR --json EVAL_DIR/${collection}.json`),
      " where the router's ", h("code", {}, "router.eval_reports_dir"), " is EVAL_DIR, or load a report here (it stays in this browser)."),
    h("div.field", {}, h("label", { for: "quality-file" }, "Load an eval report"), input), status, source, out);
  input.addEventListener("change", () => {
    source.textContent = "Loaded from a file in this browser.";
    source.dataset.source = "browser";
  });
  (async () => {
    try {
      if (!ctx.collection()) throw { status: 404 };
      const report = await api("GET", `/v1/collections/${enc(collection)}/eval`);
      source.textContent = "The latest report stored on the router.";
      source.dataset.source = "router";
      return clear(out, draw(report));
    } catch (e) {
      if (e.status !== 404) clear(status, errorBox(e));
    }
    const stored = localStorage.getItem(storeKey(collection));
    if (stored) {
      source.textContent = "Loaded from a file in this browser (the router has no report of this collection).";
      source.dataset.source = "browser";
      clear(out, draw(JSON.parse(stored)));
    } else clear(out, h("p.muted", {}, "No report stored for this collection yet."));
  })();
}
