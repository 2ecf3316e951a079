// Ingest: drop JSONL / Markdown / text files; each is sent to POST /v1/collections/{name}/documents with an
// upload progress bar, and its accepted, near-duplicate and rejected lines are listed with their reasons.
// JSONL goes as NDJSON in batches (line numbers stay the file's); Markdown and text are one document each,
// titled as `attest ingest` titles them (first heading / first short line).
import { upload, enc } from "./api.js";
import { h, clear, errorBox, table } from "./ui.js";

const BATCH_BYTES = 4 * 1024 * 1024;

function markdownDocument(name, text) {
  let title = "";
  let fenced = false;
  const lines = [];
  for (const line of text.split(/\r?\n/)) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const m = !fenced && line.match(/^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/);
    if (m) {
      if (!title) title = m[1];
      lines.push("", m[1], "");
    } else lines.push(line);
  }
  return { id: name, title: title || name, text: lines.join("\n") };
}

function textDocument(name, text) {
  const first = text.split(/\r?\n/).map((l) => l.trim()).find((l) => l);
  return { id: name, title: first && first.length <= 120 ? first : "", text };
}

// NDJSON batches of whole lines: [{body, firstLine}], each under BATCH_BYTES.
function batches(text) {
  const lines = text.split("\n");
  const out = [];
  let cur = [];
  let size = 0;
  let first = 1;
  lines.forEach((line, i) => {
    if (size + line.length > BATCH_BYTES && cur.length) {
      out.push({ body: cur.join("\n"), firstLine: first });
      cur = [];
      size = 0;
      first = i + 1;
    }
    cur.push(line);
    size += line.length + 1;
  });
  if (cur.some((l) => l.trim())) out.push({ body: cur.join("\n"), firstLine: first });
  return out;
}

function outcome(report) {
  const dups = report.rejected.filter((r) => r.reason.startsWith("near-duplicate"));
  const bad = report.rejected.filter((r) => !r.reason.startsWith("near-duplicate"));
  const rows = (list, kind) => list.map((r) =>
    h(`tr.${kind}`, {}, h("td", {}, r.line ?? `#${r.index + 1}`), h("td", {}, kind), h("td", {}, r.reason)));
  return h("div.outcome", {},
    h("p", {},
      h("span.badge.ok", { "data-testid": "accepted" }, `${report.accepted} accepted`), " ",
      h("span.badge.warn", { "data-testid": "duplicates" }, `${dups.length} near-duplicates`), " ",
      h("span.badge.bad", { "data-testid": "rejected" }, `${bad.length} rejected`), " ",
      h("span.muted", {}, `${report.chunks} chunks written`)),
    dups.length + bad.length
      ? table(["line", "outcome", "reason"], [...rows(dups, "near-duplicate"), ...rows(bad, "rejected")])
      : null);
}

async function send(collection, file, row) {
  const bar = row.querySelector("progress");
  const result = row.querySelector(".result");
  const text = await file.text();
  const path = `/v1/collections/${enc(collection)}/documents`;
  const lower = file.name.toLowerCase();
  const report = { accepted: 0, rejected: [], chunks: 0 };
  let parts;
  if (/\.(jsonl|ndjson)$/.test(lower)) {
    parts = batches(text).map((b) => ({ ...b, type: "application/x-ndjson" }));
  } else {
    const doc = /\.(md|markdown)$/.test(lower) ? markdownDocument(file.name, text) : textDocument(file.name, text);
    parts = [{ body: JSON.stringify({ documents: [doc] }), firstLine: 1, type: "application/json" }];
  }
  const total = parts.reduce((a, p) => a + p.body.length, 0) || 1;
  let done = 0;
  for (const p of parts) {
    const r = await upload(path, p.body, p.type, (sent) => {
      bar.value = Math.min(1, (done + sent) / total);
    });
    done += p.body.length;
    bar.value = done / total;
    report.accepted += r.accepted;
    report.chunks += r.chunks;
    // The server numbers lines within the batch: make them the file's.
    report.rejected.push(...r.rejected.map((x) => (x.line ? { ...x, line: x.line + p.firstLine - 1 } : x)));
  }
  clear(result, outcome(report));
  row.classList.add("done");
}

export function render(view, ctx) {
  const files = h("ul.files#ingest-files", { "aria-live": "polite" });
  const input = h("input#ingest-input", { type: "file", multiple: true, accept: ".jsonl,.ndjson,.md,.markdown,.txt,.text" });
  const zone = h("label.dropzone#dropzone", { for: "ingest-input", tabindex: 0 },
    h("strong", {}, "Drop files here"), " or press Enter to choose: JSONL (one ",
    h("code", {}, '{"id", "title"?, "text", "metadata"?}'), " per line), Markdown, plain text.");

  async function take(list) {
    const collection = ctx.collection();
    if (!collection) {
      files.prepend(h("li", {}, errorBox({ code: "no collection", message: "create or pick a collection first" })));
      return;
    }
    for (const file of list) {
      const row = h("li.file", { dataset: { file: file.name } },
        h("div.file-head", {}, h("strong", {}, file.name), h("span.muted", {}, ` → ${collection}`)),
        h("progress", { max: 1, value: 0, "aria-label": `Upload of ${file.name}` }),
        h("div.result"));
      files.prepend(row);
      try {
        await send(collection, file, row);
      } catch (e) {
        clear(row.querySelector(".result"), errorBox(e));
        row.classList.add("failed");
      }
    }
  }

  input.addEventListener("change", () => take([...input.files]).then(() => (input.value = "")));
  zone.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      input.click();
    }
  });
  zone.addEventListener("dragover", (e) => {
    e.preventDefault();
    zone.classList.add("over");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("over");
    take([...e.dataTransfer.files]);
  });

  view.append(h("h1", {}, "Ingest"),
    h("p.muted", {}, "Documents are acknowledged once durable on a write quorum of replicas, and searchable at once."),
    zone, input, files);
}
