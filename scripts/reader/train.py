"""Trains the reader (see model.py, data.py) and exports one f16 safetensors file and its report.

Where a GPU is at hand (`--device cuda`), train there; the same command on the CPU gives the same rows, order and
schedule (the floating-point sums differ, so the weights agree to rounding, not bit for bit). `--build-only`
writes the tokenised examples to one gzipped file and stops; `--examples FILE` trains from such a file without
the data sets (what the GPU machine is sent: scripts/reader/train-gpu.sh).

Reproducible: every choice is seeded (`--seed`); resumable (schedule.py): a checkpoint (weights, optimiser,
scheduler, random state, step) is written every `--checkpoint-every` steps to `--work`, and a rerun with the same
arguments continues from it at the same step in the same order. A run stops early, resumable, after
`--stop-after-steps N` steps of its own or on SIGINT/SIGTERM (at the end of the step under way), writes a
checkpoint and exits 75; progress (step/total, rows/s, ETA) goes to stderr. The lower layers and the embeddings
stay as in all-MiniLM-L6-v2 (`--frozen-layers`); what fits this CPU is training the top ones and the heads.
`--base` may also be a directory onnx_to_bert.py wrote (another backbone, issue 41; model.load_base reads it).

Usage (scripts/train-reader.sh wraps it):
  python scripts/reader/train.py --data data --base models/all-minilm-l6-v2 \
      --out crates/attest-models/models/reader --work ~/.cache/attest-reader
"""

import argparse
import gzip
import hashlib
import json
import os
import random
import shutil
import sys
from collections import defaultdict

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(__file__))
from company import company_digest, company_rows  # noqa: E402
import data  # noqa: E402
from data import answerability_rows, definition_rows, halueval_answerability_rows, support_rows  # noqa: E402
from model import (MAX_FIRST, MAX_LEN, Reader, answer_span, collate, load_base, pair_ids,  # noqa: E402
                   sentence_range, span_margin)
from schedule import PAUSED_EXIT, PlanMismatch, fingerprint, plan, run_steps, stop_on_signals  # noqa: E402

ANSWERABLE, SUPPORTED = 0, 1


def auroc(scores, labels):
    pairs = sorted(zip(scores, labels), key=lambda x: x[0])
    pos = sum(labels)
    neg = len(labels) - pos
    if pos == 0 or neg == 0:
        return float("nan")
    rank_sum, i = 0.0, 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        avg = (i + j + 1) / 2
        rank_sum += avg * sum(l for _, l in pairs[i:j])
        i = j
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)


# Answerability sources other than squad-dev: each has its own quota, and its held-out rows report under
# `<source>_<kind>` (reddit_answer_removed, ...) against that source's positives.
EXTRA_SOURCES = ("reddit", "halueval_answerability", "definitions", "company")


def source_prefix(kind):
    """The source a held-out kind names (see `heldout_kind`): "" for squad-dev."""
    return next((f"{p}_" for p in EXTRA_SOURCES if kind.startswith(f"{p}_")), "")


def heldout_kind(row, source):
    """The kind a held-out row reports under: its own, prefixed by its source when that is not squad-dev."""
    if row[0] == SUPPORTED or source == "answerability":
        return kind_of(row)
    return f"{source}_{kind_of(row)}"


def kind_of(row):
    """The example kind of a raw row (answerability rows end with their answers)."""
    return row[5] if row[0] == ANSWERABLE else row[4]


def encode(tok, rows):
    """(ids, types, task, label, kind, [sentence lo, hi, span start, end]) per row; the span is [CLS] (0, 0) for
    an answerability negative, the answer's tokens for a positive, and (-1, -1) where there is no span label."""
    out = []
    for r in rows:
        if r[0] == ANSWERABLE:
            _, q, s, ctx, label, kind, answers = r
            ids, types = pair_ids(tok, q, s, ctx)
            lo, hi = sentence_range(ids)
            span = (answer_span(tok, q, s, answers) or (-1, -1)) if label else (0, 0)
        else:
            _, claim, evidence, label, kind = r
            ids, types = pair_ids(tok, claim, evidence)
            lo, hi, span = 0, 0, (-1, -1)
        out.append((ids, types, r[0], label, kind, [lo, hi, span[0], span[1]]))
    return out


def span_loss(span_logits, rows):
    """Cross-entropy of the start and end positions over [CLS] and the sentence's tokens, for rows with a label
    (one batched cross-entropy: the mean over rows and both ends, as a loop over them would give)."""
    keep = [k for k, r in enumerate(rows) if r[5][2] >= 0]
    if not keep:
        return None
    t = span_logits.shape[1]
    pos = torch.arange(t, device=span_logits.device)
    bounds = torch.tensor([rows[k][5] for k in keep], device=span_logits.device)
    allowed = (pos[None, :] == 0) | ((pos[None, :] >= bounds[:, :1]) & (pos[None, :] < bounds[:, 1:2]))
    logits = span_logits[keep].masked_fill(~allowed[:, :, None], float("-inf"))  # rows × tokens × 2
    targets = bounds[:, 2:4]  # rows × 2
    return F.cross_entropy(logits.permute(0, 2, 1).reshape(-1, t), targets.reshape(-1))


def predict(model, examples, device, batch=64):
    """(head logit, span margin, predicted span) per example (the margin and span only for answerability)."""
    model.eval()
    with torch.no_grad():
        order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))
        result = [(0.0, 0.0, None)] * len(examples)
        for s in range(0, len(order), batch):
            idx = order[s : s + batch]
            ids, types, mask = collate([(examples[i][0], examples[i][1]) for i in idx])
            logits, span_logits = model(ids.to(device), types.to(device), mask.to(device))
            logits, span_logits = logits.float().cpu(), span_logits.float().cpu()
            for k, i in enumerate(idx):
                margin, best = 0.0, None
                if examples[i][2] == ANSWERABLE:
                    lo, hi = examples[i][5][:2]
                    margin = span_margin(span_logits[k], lo, hi).item()
                    st = span_logits[k, lo:hi, 0].argmax().item() + lo
                    en = span_logits[k, st:hi, 1].argmax().item() + st
                    best = (st, en)
                result[i] = (logits[k, examples[i][2]].item(), margin, best)
    model.train()
    return result


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="data")
    p.add_argument("--base", default="models/all-minilm-l6-v2")
    p.add_argument("--out", default="crates/attest-models/models/reader")
    p.add_argument("--work", default=os.path.expanduser("~/.cache/attest-reader"))
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--answerability", type=int, default=15000, help="squad-dev answerability rows trained on")
    p.add_argument("--reddit", type=int, default=0, help="shift-reddit answerability rows trained on")
    p.add_argument("--halueval-answerability", type=int, default=0,
                   help="answerability rows from HaluEval QA's knowledge passages trained on")
    p.add_argument("--definitions", type=int, default=0,
                   help="definitional question rows trained on (data.definition_rows: 'Who was Nikola Tesla?')")
    p.add_argument("--vitaminc", type=int, default=6000)
    p.add_argument("--synthetic", type=int, default=4000)
    p.add_argument("--halueval", type=int, default=3000)
    p.add_argument("--heldout-per-kind", type=int, default=600)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--frozen-layers", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--epochs", type=int, default=1, help="passes over the training rows (each in a new order)")
    p.add_argument("--unfreeze-embeddings", action="store_true", help="train the embeddings too")
    p.add_argument("--examples", help="train from this gzipped examples file (--build-only wrote it)")
    p.add_argument("--build-only", action="store_true", help="write the examples (gzipped) to --work and stop")
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (a smoke test)")
    p.add_argument("--stop-after-steps", type=int, default=0,
                   help="pause after this many steps of this run: checkpoint, exit 75; rerun to continue")
    p.add_argument("--batch-log", help="append each trained step's row indices to this file (test_resume.py)")
    p.add_argument("--company", action="append", default=[],
                   help="a company-nearmiss TRAIN split directory (repeatable): near-miss answerability rows "
                        "(company.py); never a dev or test split")
    p.add_argument("--company-rows", type=int, default=0, help="company answerability rows trained on")
    p.add_argument("--company-heldout", action="append", default=[],
                   help="a company-nearmiss split whose rows are only reported on (held out), never trained on")
    p.add_argument("--time-limit", type=float, default=0,
                   help="stop training after this many seconds and report and export as it is (0: no limit)")
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--export-only", action="store_true", help="export the latest checkpoint as it is")
    p.add_argument("--init", help="start from this reader.safetensors (a further round) instead of the base model")
    p.add_argument("--span-weight", type=float, default=0.0, help="weight of the span head's loss (0: not trained)")
    p.add_argument("--span-blend", type=float, default=0.0,
                   help="answerability = answerable logit + this x span margin in the binary (written to the "
                        "weights' metadata; 0: the span head is not used)")
    p.add_argument("--sentence-perturbed", action="store_true",
                   help="add answer sentences with the question's name or number changed (data.perturb_sentence)")
    p.add_argument("--tuning-slice", action="store_true",
                   help="set squad-dev's and shift-reddit's articles NNNN %% 5 == 1 aside: not trained on, not "
                        "reported (data.TUNING_SLICE; `attest-lab eval --tuning-slice` asks them)")
    p.add_argument("--kind-weight", default="",
                   help="loss weight per example kind, e.g. answer_removed=2,halueval=1.5 (default 1 each)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    os.makedirs(args.work, exist_ok=True)

    quotas = f"{args.answerability}-{args.vitaminc}-{args.synthetic}-{args.halueval}-{args.heldout_per_kind}"
    if args.reddit or args.halueval_answerability:
        quotas += f"-r{args.reddit}-ha{args.halueval_answerability}"
    if args.sentence_perturbed:
        quotas += "-sp"
    if args.definitions:
        quotas += f"-d{args.definitions}"
    if args.tuning_slice:
        quotas += "-ts"
    data.TUNING_SLICE = args.tuning_slice
    if (args.company or args.company_heldout) and not args.examples:
        quotas += f"-c{args.company_rows}-{company_digest(args.company, args.company_heldout)}"
    cache = args.examples or f"{args.work}/examples-{args.seed}-{quotas}.json.gz"
    if os.path.exists(cache):
        with gzip.open(cache, "rt") as f:
            train, heldout = json.load(f)
    else:
        print("building examples", flush=True)
        from tokenizers import Tokenizer  # only here: a run from a built examples file needs no tokenizer
        tok = Tokenizer.from_file(f"{args.base}/tokenizer.json")
        tok.no_truncation()
        tok.no_padding()
        # Every row travels with its source (the quota it counts against); the row layout stays model.py's.
        mirrored = args.sentence_perturbed
        tagged = [("answerability", r) for r in answerability_rows(f"{args.data}/squad-dev", rng, mirrored)]
        if args.reddit:
            tagged += [("reddit", r) for r in answerability_rows(f"{args.data}/shift-reddit", rng, mirrored)]
        if args.halueval_answerability:
            hal = halueval_answerability_rows(f"{args.data}/halueval-qa/items.jsonl", rng, mirrored)
            tagged += [("halueval_answerability", r) for r in hal]
        if args.definitions:
            defs = definition_rows(f"{args.data}/halueval-qa/items.jsonl", f"{args.data}/squad-dev", rng)
            tagged += [("definitions", r) for r in defs]
        for d in args.company:
            tagged += [("company", r) for r in company_rows(d, rng, "train")]
        for d in args.company_heldout:
            tagged += [("company", r) for r in company_rows(d, rng, "heldout")]
        s = support_rows(f"{args.data}/squad-dev", f"{args.data}/halueval-qa/items.jsonl",
                         f"{args.data}/vitaminc-train/items.jsonl", rng)
        tagged = [(src, (ANSWERABLE,) + r[1:], r[0]) for src, r in tagged]
        tagged += [("support", (SUPPORTED,) + r[1:], r[0]) for r in s]
        split = {"train": [], "heldout": [], "reserved": []}
        for src, row, which in tagged:
            split[which].append((src, row))
        tr = split["train"]
        rng.shuffle(tr)
        quota = {"answerability": args.answerability, "vitaminc": args.vitaminc,
                 "synthetic": args.synthetic, "halueval": args.halueval, "reddit": args.reddit,
                 "halueval_answerability": args.halueval_answerability, "definitions": args.definitions,
                 "company": args.company_rows}
        taken = {k: 0 for k in quota}
        chosen = []
        for src, r in tr:
            key = src if r[0] == ANSWERABLE else kind_of(r)
            if taken[key] < quota[key]:
                taken[key] += 1
                chosen.append(r)
        ho = split["heldout"]
        rng.shuffle(ho)
        per = {}
        held = []
        for src, r in ho:
            kind = heldout_kind(r, src)
            if per.get((r[0], kind), 0) < args.heldout_per_kind:
                per[(r[0], kind)] = per.get((r[0], kind), 0) + 1
                held.append((r, kind))
        train = encode(tok, chosen)
        heldout = [e[:4] + (kind,) + e[5:] for e, (_, kind) in zip(encode(tok, [r for r, _ in held]), held)]
        with gzip.open(cache + ".tmp", "wt") as f:
            json.dump([train, heldout], f)
        os.replace(cache + ".tmp", cache)
    if args.build_only:
        print(f"wrote {cache}: {len(train)} training rows, {len(heldout)} held-out rows", flush=True)
        return
    print(f"{len(train)} training rows, {len(heldout)} held-out rows", flush=True)

    config = json.load(open(f"{args.base}/config.json"))
    model = Reader(config)
    if not args.init:
        base = load_base(args.base)
        state = {k: v for k, v in base.items() if not k.startswith("pooler.") and k != "embeddings.position_ids"}
        if "pooler.dense.weight" in base:  # else (an ONNX export has none) the pooler starts from random weights
            state["reader.pooler.weight"] = base["pooler.dense.weight"]
            state["reader.pooler.bias"] = base["pooler.dense.bias"]
        missing, _ = model.load_state_dict(state, strict=False)
        assert all(m.startswith("reader.") for m in missing), missing
    else:
        missing, unexpected = model.load_state_dict({k: v.float() for k, v in load_file(args.init).items()},
                                                    strict=False)
        assert not unexpected and all(m.startswith("reader.span.") for m in missing), (missing, unexpected)
        print(f"initialised from {args.init}", flush=True)
    model.train_span = args.span_weight > 0
    kind_weight = {k: float(w) for k, w in (x.split("=") for x in args.kind_weight.split(",") if x)}
    for prm in model.embeddings.parameters():
        prm.requires_grad = args.unfreeze_embeddings
    device = torch.device(args.device)
    model.to(device)
    for layer in model.encoder.layer[: args.frozen_layers]:
        for prm in layer.parameters():
            prm.requires_grad = False
    trainable = [prm for prm in model.parameters() if prm.requires_grad]
    # The span head starts from random weights: it learns at ten times the rate of the pretrained layers.
    span = [prm for prm in model.reader.span.parameters()]
    rest = [prm for prm in trainable if all(prm is not q for q in span)]
    opt = torch.optim.AdamW([{"params": rest}, {"params": span, "lr": args.lr * 10}], lr=args.lr, weight_decay=0.01)
    steps = plan([len(e[0]) for e in train], args.batch, args.seed, args.epochs)
    total = len(steps)
    warmup = max(1, total // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(1, total - warmup))))
    ckpt = f"{args.work}/checkpoint.pt"

    def load():
        if not os.path.exists(ckpt):
            return None
        saved = torch.load(ckpt, map_location=device)
        # The plan names the rows by index only: rows rebuilt from other data (the examples file's name carries
        # the seed, the quotas and the company files' digest) would be other rows in the same order.
        if saved.get("examples", os.path.basename(cache)) != os.path.basename(cache):
            sys.exit(f"train.py: {ckpt} was written for {saved['examples']}, not {os.path.basename(cache)}; "
                     "remove it or use another --work")
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        sched.load_state_dict(saved["sched"])
        torch.set_rng_state(saved["rng"].cpu())
        if saved.get("cuda_rng") is not None and device.type == "cuda":
            torch.cuda.set_rng_state(saved["cuda_rng"].cpu(), device)
        # A checkpoint from before schedule.py names no plan: the same code drew it, so it is this run's.
        return {"step": saved["step"], "plan": saved.get("plan", fingerprint(steps)),
                "elapsed": saved.get("elapsed", 0.0)}

    def save(meta):
        tmp = ckpt + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                    "rng": torch.get_rng_state(),
                    "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
                    "examples": os.path.basename(cache), **meta}, tmp)
        os.replace(tmp, ckpt)

    def train_step(step, batch):
        rows = [train[i] for i in batch]
        if args.batch_log:
            with open(args.batch_log, "a") as f:
                f.write(f"{step} {' '.join(map(str, batch))}\n")
        ids, types, mask = (x.to(device) for x in collate([(r[0], r[1]) for r in rows]))
        task = torch.tensor([r[2] for r in rows], device=device)
        label = torch.tensor([float(r[3]) for r in rows], device=device)
        weight = torch.tensor([kind_weight.get(r[4], 1.0) for r in rows], device=device)
        logits, span_logits = model(ids, types, mask)
        logits = logits.gather(1, task[:, None]).squeeze(1)
        loss = (F.binary_cross_entropy_with_logits(logits, label, reduction="none") * weight).sum() / weight.sum()
        if args.span_weight > 0:
            extra = span_loss(span_logits, rows)
            if extra is not None:
                loss = loss + args.span_weight * extra
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        return len(rows), loss.item()

    if args.export_only:
        meta = load()
        step, why, trained_s = (meta or {}).get("step", 0), "done", (meta or {}).get("elapsed", 0.0)
    else:
        # SIGINT/SIGTERM: finish the step under way, write a checkpoint, exit PAUSED_EXIT (a second signal kills).
        should_stop = stop_on_signals()
        try:
            step, why, trained_s = run_steps(steps, train_step, load, save, args.checkpoint_every, where=ckpt,
                                             stop_after=args.stop_after_steps, max_steps=args.max_steps,
                                             time_limit=args.time_limit, should_stop=should_stop)
        except PlanMismatch as e:
            sys.exit(f"train.py: {e}")
        if why == "paused":
            sys.exit(PAUSED_EXIT)
    if args.max_steps:
        total = min(total, args.max_steps)
    # Held-out report.
    predicted = predict(model, heldout, device)
    report = {"base": config.get("name", "all-MiniLM-L6-v2"), "layers": config["num_hidden_layers"],
              "train_seconds": round(trained_s, 1), "seed": args.seed, "steps": step, "planned_steps": total,
              "init": os.path.basename(args.init) if args.init else "base", "kind_weight": kind_weight,
              "span_weight": args.span_weight, "span_blend": args.span_blend,
              "batch": args.batch, "lr": args.lr, "epochs": args.epochs, "device": args.device,
              "sources": {"reddit": args.reddit, "halueval_answerability": args.halueval_answerability,
                          "definitions": args.definitions, "company": args.company_rows,
                          "company_dirs": args.company, "company_heldout_dirs": args.company_heldout},
              "frozen_layers": args.frozen_layers, "max_len": MAX_LEN,
              "max_first": MAX_FIRST, "train_rows": len(train),
              "tuning_slice": args.tuning_slice,
              "split": "squad-dev and shift-reddit by article/post (NNNN % 5 == 0 held out"
                       + ("; NNNN % 5 == 1 set aside, not trained on" if args.tuning_slice else "") + "); halueval hqNNNNN % 5 "
                       "== 0 held out; vitaminc line index % 10 == 9 held out; shift-new-wiki never read; "
                       "company-nearmiss by company: --company (train) trained on, --company-heldout only reported",
              "heldout": {}}
    kinds = sorted({(r[2], r[4]) for r in heldout})
    idx = [i for i, r in enumerate(heldout) if r[2] == SUPPORTED]
    scores = [predicted[i][0] for i in range(len(heldout))]
    report["heldout"]["supported_auroc"] = auroc([scores[i] for i in idx], [heldout[i][3] for i in idx])
    for _, kind in [k for k in kinds if k[0] == SUPPORTED]:
        j = [i for i in idx if heldout[i][4] == kind]
        report["heldout"][f"supported_auroc_{kind}"] = auroc([scores[i] for i in j], [heldout[i][3] for i in j])
    # Answerability: the head's logit, the span margin, and blends of the two (logit + w * margin).
    idx = [i for i, r in enumerate(heldout) if r[2] == ANSWERABLE]
    variants = {"": lambda p: p[0], "_span": lambda p: p[1]}
    if args.span_weight > 0:
        for w in (0.25, 0.5, 1.0):
            variants[f"_blend{w}"] = lambda p, w=w: p[0] + w * p[1]
    for suffix, score in variants.items():
        s_of = {i: score(predicted[i]) for i in idx}
        report["heldout"][f"answerable{suffix}_auroc"] = auroc([s_of[i] for i in idx], [heldout[i][3] for i in idx])
        # Negatives of a source (squad-dev, reddit_, halueval_answerability_) against that source's positives.
        pos_of = defaultdict(list)
        for i in idx:
            if heldout[i][3] == 1:
                pos_of[source_prefix(heldout[i][4])].append(s_of[i])
        for _, kind in [k for k in kinds if k[0] == ANSWERABLE]:
            pos = pos_of[source_prefix(kind)]
            neg = [s_of[i] for i in idx if heldout[i][4] == kind and heldout[i][3] == 0]
            if neg and pos:
                report["heldout"][f"answerable{suffix}_auroc_vs_{kind}"] = auroc(
                    pos + neg, [1] * len(pos) + [0] * len(neg))
    labelled = [i for i in idx if heldout[i][5][2] > 0]
    if labelled:
        exact = sum(predicted[i][2] == tuple(heldout[i][5][2:]) for i in labelled)
        report["heldout"]["span_exact"] = exact / len(labelled)
    print(json.dumps(report, indent=2), flush=True)

    os.makedirs(args.out, exist_ok=True)
    tensors = {k: v.detach().cpu().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
    weights = f"{args.out}/reader.safetensors"
    save_file(tensors, weights + ".tmp", metadata={"format": "attest-reader-1", "max_len": str(MAX_LEN),
                                                   "span_blend": str(args.span_blend),
                                                   "max_first": str(MAX_FIRST)})
    os.replace(weights + ".tmp", weights)
    for name in ("config.json", "tokenizer.json"):
        shutil.copyfile(f"{args.base}/{name}", f"{args.out}/{name}")
    sums = {}
    for name in ("config.json", "tokenizer.json", "reader.safetensors"):
        with open(f"{args.out}/{name}", "rb") as f:
            sums[name] = hashlib.sha256(f.read()).hexdigest()
    digest = sums["reader.safetensors"]
    with open(f"{args.out}/reader.sha256", "w") as f:
        f.writelines(f"{h}  {n}\n" for n, h in sums.items())
    with open(f"{args.out}/report.json", "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {weights} ({os.path.getsize(weights) / 1e6:.1f} MB, sha256 {digest})", flush=True)


if __name__ == "__main__":
    main()
