// Ask: POST /v1/collections/{name}/ask with `stream: true` (Server-Sent Events: `sources` first, shown as progress,
// a `delta` per verified claim, then `done` with the whole response). The answer's footnote markers link to citation cards, each showing its
// passage with the quoted span highlighted (the passage is found through the public search API by chunk id);
// a verification table lists every claim with its citation, quote, support score and verdict (supported, partial
// or unsupported; dropped claims too) under a one-line summary; an abstention says why in plain words, shows what the
// documents state instead (a near miss, with its source) and offers its suggestions as follow-up questions; an out-of-corpus answer shows its disclaimer and no citations; a bar
// shows each stage's latency. A conversation: earlier turns go with a follow-up as `history` (the page shows
// them, and the standalone question the answer tier asked), until "New conversation".
import { api, stream, enc } from "./api.js";
import { h, clear, errorBox, banner, table, num, highlightSpan } from "./ui.js";
import { fallbackBanners } from "./search.js";

const REASONS = {
  no_results: "Nothing in the collection matched the question, so there is nothing to answer from.",
  low_confidence: "The passages found do not answer this question confidently enough; Attest would rather not guess.",
  unsupported_claims: "A draft answer was written, but its claims were not supported by the passages they cite, so it was withheld.",
  model_abstained: "The answer model found no answer in the passages it was given.",
  terminology_not_found: "The term asked about is not defined in the collection's glossary or passages.",
  routed_no_retrieval: "The question was judged not to be about the collection's content (nothing was retrieved).",
  unresolved_reference: "The question refers to someone it does not name, and there is no earlier question to say who. Name them, or ask it as a follow-up.",
};

const VERDICT_BADGE = { supported: "ok", partial: "warn", unsupported: "bad" };

// "3 claims verified, 1 partial, 0 unsupported" (the CLI prints the same line).
function verdictSummary(v) {
  const s = v?.supported ?? 0;
  return `${s} ${s === 1 ? "claim" : "claims"} verified, ${v?.partial ?? 0} partial, ${v?.unsupported ?? 0} unsupported`;
}

const STAGES = ["route", "terminology", "structural", "memory", "retrieve", "rerank", "read", "generate", "gauntlet", "verify"];

// Answer text with each [n] as a link to citation card n.
function withMarkers(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(/\[(\d+)\]/g)) {
    out.push(text.slice(last, m.index),
      h("a.fn", { href: `#cite-${m[1]}`, "aria-label": `citation ${m[1]}`, onclick: jump(m[1]) }, h("sup", {}, `[${m[1]}]`)));
    last = m.index + m[0].length;
  }
  out.push(text.slice(last));
  return out;
}

// Hash links drive the page router, so footnotes scroll and focus by hand.
function jump(n) {
  return (e) => {
    e.preventDefault();
    const card = document.getElementById(`cite-${n}`);
    if (card) {
      card.scrollIntoView({ block: "nearest" });
      card.focus();
    }
  };
}

function latencyBar(latency) {
  const parts = STAGES.filter((s) => latency[s] > 0).map((s) => [s, latency[s]]);
  const sum = parts.reduce((a, [, ms]) => a + ms, 0) || 1;
  const total = latency.total ?? latency.ask_total ?? sum;
  return h("figure.latency", { "data-testid": "latency" },
    h("figcaption", {}, `Latency by stage · ${num(total, 1)} ms in all`),
    h("div.bar", { role: "img", "aria-label": parts.map(([s, ms]) => `${s} ${num(ms, 1)} ms`).join(", ") },
      parts.map(([s, ms]) => h(`span.seg.s-${s}`, { style: { flexGrow: String(ms / sum) }, title: `${s}: ${num(ms, 1)} ms` }))),
    h("ul.legend", {}, parts.map(([s, ms]) => h("li", {}, h(`i.s-${s}`), `${s} ${num(ms, 1)} ms`))));
}

// Finds the cited chunk's passage (a BM25 search for its quote) and shows it with the quote highlighted.
async function resolve(collection, c, body) {
  try {
    const r = await api("POST", `/v1/collections/${enc(collection)}/search`,
      { query: c.quote.slice(0, 500), k: 20, lanes: ["bm25"] });
    const hit = r.hits.find((x) => x.chunk_id === c.chunk_id);
    if (!hit) return clear(body, h("blockquote", {}, c.quote), h("small.muted", {}, "passage not found by search"));
    const marked = highlightSpan(hit.text, c.quote);
    clear(body, h("p.passage", {}, marked || [hit.text]), marked ? null : h("small.muted", {}, "quote not found verbatim in the passage"));
    body.closest(".card").dataset.resolved = marked ? "true" : "partial";
  } catch (e) {
    clear(body, h("blockquote", {}, c.quote), errorBox(e));
  }
}

function result(collection, r, askAgain) {
  const parts = [fallbackBanners(r)];
  if (r.rewritten_question) {
    parts.push(h("p.muted", { "data-testid": "rewritten" }, `Asked as: ${r.rewritten_question}`));
  }
  if (r.status === "out_of_corpus") {
    // Never mistaken for a grounded answer: its own box, the disclaimer first, no citations or verification.
    const body = r.answer.startsWith(r.disclaimer) ? r.answer.slice(r.disclaimer.length).trim() : r.answer;
    parts.push(h("div.out-of-corpus", { role: "note", "data-testid": "out-of-corpus" },
      h("h2", {}, "Not in this collection"),
      h("p.banner.warn", { "data-testid": "disclaimer" }, r.disclaimer),
      h("p", {}, body)));
    parts.push(h("p.muted", {}, `request ${r.request_id}`));
    return parts;
  }
  if (r.status === "abstained") {
    parts.push(h("div.abstain", { role: "alert", "data-testid": "abstention" },
      h("h2", {}, "No answer"),
      h("p.reason", { "data-testid": "abstention-reason", dataset: { reason: r.reason || "" } },
        REASONS[r.reason] || `Abstained (${r.reason || "no reason given"}).`),
      h("p.muted", {}, `reason code: ${r.reason} · confidence ${num(r.confidence)}`),
      // What the documents state instead: a suggestion with its source, never shown as an answer.
      r.near_miss
        ? h("div.near-miss", { "data-testid": "near-miss", dataset: { kind: r.near_miss.kind } },
          h("p", {}, r.near_miss.message),
          h("blockquote", {}, r.near_miss.source.quote),
          h("p.muted", {}, `${r.near_miss.source.title} (${r.near_miss.source.chunk_id})`))
        : null,
      r.suggestions.length
        ? h("div.suggestions", {}, h("p", {}, "Try asking:"),
          r.suggestions.map((s) => h("button.ghost.suggestion", { type: "button", onclick: () => askAgain(s) }, s)))
        : null));
  } else {
    parts.push(h("div.answer", { "data-testid": "answer" }, h("h2", {}, "Answer"), h("p", {}, withMarkers(r.answer)),
      h("p.muted", {}, `confidence ${num(r.confidence)} · ${r.generator} · ${r.route} · ${r.hops} retrieval(s)`)));
  }
  const byN = new Map(r.citations.map((c) => [c.n, c]));
  const checked = [...r.claims.map((cl) => [cl, true]), ...(r.dropped_claims || []).map((cl) => [cl, false])];
  if (checked.length) {
    const rows = checked.map(([cl, kept]) => {
      const verdict = cl.verdict || (cl.supported ? "supported" : "unsupported");
      const cites = cl.citations.map((n) => byN.get(n)).filter(Boolean);
      return h(`tr.${verdict}`, { dataset: { kept: String(kept) } },
        h("td", {}, cl.text),
        h("td", {}, cl.citations.map((n) => h("a.fn", { href: `#cite-${n}`, onclick: jump(n) }, `[${n}]`))),
        h("td.quote", {}, cites.map((c) => c.quote).join(" … ")),
        h("td.num", {}, num(cl.support)),
        h("td", {}, h(`span.badge.${VERDICT_BADGE[verdict] || "bad"}.verdict`, {}, verdict),
          kept ? null : h("small.muted", {}, " dropped")));
    });
    parts.push(h("h2", {}, "Verification"),
      h("p", { "data-testid": "verification-summary" }, verdictSummary(r.verdicts)),
      table(["claim", "citation", "quote", "support", "verdict"], rows, { "data-testid": "verification" }));
  }
  if (r.citations.length) {
    const cards = r.citations.map((c) => {
      const body = h("div.card-body", {}, h("blockquote", {}, c.quote));
      const card = h("article.card", { id: `cite-${c.n}`, tabindex: -1, dataset: { chunk: c.chunk_id } },
        h("header", {}, h("strong", {}, `[${c.n}] ${c.title || c.doc_id}`),
          h("span.muted", {}, ` doc ${c.doc_id} · chunk ${c.chunk_id} · score ${num(c.score)}`)),
        body);
      resolve(collection, c, body);
      return card;
    });
    parts.push(h("h2", {}, "Citations"), h("div.cards", { "data-testid": "citations" }, cards));
  }
  if (r.latency_ms) parts.push(latencyBar(r.latency_ms));
  parts.push(h("p.muted", {}, `request ${r.request_id}`));
  return parts;
}

export function render(view, ctx) {
  const out = h("section#ask-result", { "aria-live": "polite" });
  const input = h("input#a-question", { name: "question", type: "search", required: true, autocomplete: "off" });
  // The conversation so far (oldest first), sent as `history` while "Follow up" is ticked.
  const history = [];
  const followUp = h("input#a-follow-up", { type: "checkbox", name: "follow_up", disabled: true });
  const transcript = h("ol.transcript", { "data-testid": "transcript" });
  const restart = h("button.ghost#a-new", { type: "button", disabled: true, onclick: () => {
    history.length = 0;
    followUp.checked = false;
    followUp.disabled = true;
    restart.disabled = true;
    clear(transcript);
  } }, "New conversation");
  const form = h("form#ask-form", {},
    h("div.field", {}, h("label", { for: "a-question" }, "Question"), input),
    h("div.row", {}, h("button", { type: "submit" }, "Ask"),
      h("label.inline", { for: "a-follow-up" }, followUp, " Follow up on this conversation"), restart));

  function remember(question, r) {
    const reply = r.status === "answered" ? r.answer : `(no answer: ${r.reason || r.status})`;
    history.push({ role: "user", content: question }, { role: "assistant", content: reply });
    transcript.append(h("li", {}, h("strong", {}, question), h("span.muted", {}, ` — ${reply}`)));
    followUp.disabled = false;
    followUp.checked = true;
    restart.disabled = false;
  }

  async function ask(question) {
    const collection = ctx.collection();
    const draft = h("ol.draft", { "data-testid": "draft" });
    const progress = h("p.muted", { "data-testid": "progress" }, "Retrieving, answering and verifying…");
    clear(out, progress, draft);
    try {
      if (!collection) throw { code: "no collection", message: "create or pick a collection first" };
      let final = null;
      const body = { question, stream: true, history: followUp.checked ? history : [] };
      if (!followUp.checked) {
        history.length = 0;
        clear(transcript);
      }
      await stream(`/v1/collections/${enc(collection)}/ask`, body, (name, data) => {
        // The first retrieval's passages arrive before they are read: say what is being read.
        if (name === "sources") {
          const titles = [...new Set(data.sources.map((s) => s.title))].slice(0, 3).join("; ");
          clear(progress, `Reading ${data.sources.length} passages (${titles}), answering and verifying…`);
        }
        if (name === "delta") draft.append(h("li", {}, withMarkers(data.text)));
        if (name === "done") final = data;
      });
      if (!final) throw { code: "stream", message: "the answer stream ended without its result" };
      clear(out, result(collection, final, askAgain));
      remember(question, final);
    } catch (e) {
      // A router alone has no ask route: the answer tier is another service.
      const elsewhere = e.status === 404 && /no such route/.test(e.message);
      clear(out, errorBox(e), elsewhere
        ? banner("info", "The answer tier is not on this origin:", "serve it beside the router (attest dev does; in a cluster route POST /v1/collections/*/ask to the answer service).", "no-answer-tier")
        : null);
    }
  }

  function askAgain(q) {
    input.value = q;
    ask(q);
  }

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    ask(input.value);
  });
  view.append(h("h1", {}, "Ask"),
    h("p.muted", {}, "Every claim of an answer is checked against the passage it cites; without support, Attest abstains."),
    form, transcript, out);
  input.focus();
}
