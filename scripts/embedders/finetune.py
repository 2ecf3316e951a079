"""Fine-tunes bge-small-en-v1.5 as the dense lane's bi-encoder on held-in questions (issue 70), and measures it.

The dense lane embeds a passage as "Title\\n" + text (the chunker's title prefix, at most 256 tokens) and a query as
bge's instruction + the question, each as the [CLS] row of the last hidden state, L2-normalised
(crates/attest-models/src/embed/onnx.rs); this script embeds the same way, so its nDCG@10 is the lane's up to the
chunker splitting the few passages over 256 tokens.

Training pairs: the answerable questions of squad-dev and shift-reddit whose gold paragraph is in a held-in article
(`-aNNNN-` with NNNN % 5 != 0, the split of `attest-lab eval --heldout` and of the reranker and readers), each
with its gold passage and one hard negative (a passage of the same set the base model ranks 2nd-20th for it, not
its gold one). Loss: InfoNCE over every passage in the batch (positives and hard negatives), temperature 0.02,
a passage that is another question's gold copy of this question's gold masked out. shift-new-wiki and the company
corpora are never trained on.

  finetune.py eval  --weights W|--base B  [--sets ...]    nDCG@10 per set (held-out articles where a set has them)
  finetune.py train --base B --out DIR [--steps N ...]    writes DIR/embedder.safetensors (f32 BERT tensors)

Resumable like a reader round (scripts/reader/schedule.py): DIR/checkpoint.pt (weights, optimiser, schedule, random
state, step) is written every --checkpoint-every steps and when the run stops — after --stop-after-steps steps of
its own, or on SIGINT/SIGTERM at the end of the step under way (exit 75); the same command run again continues at
that step with the same batches. A checkpoint of another plan (pairs, batch, epochs, steps) or of other settings
(lr, temperature, frozen layers, passage length, seed) is refused.
"""

import argparse
import json
import os
import random
import sys
import time

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reader"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import held_out, ndcg_at_k  # noqa: E402
from model import Layer, Reader, load_base  # noqa: E402
from schedule import PAUSED_EXIT, PlanMismatch, run_steps, stop_on_signals  # noqa: E402

CLS, SEP = 101, 102
MAX_LEN = 256
QUERY_PREFIX = "Represent this sentence for searching relevant passages: "
TRAIN_SETS = ("squad-dev", "shift-reddit")


def load_set(directory):
    corpus = {}
    for line in open(f"{directory}/corpus.jsonl"):
        d = json.loads(line)
        title = (d.get("title") or "").strip()
        corpus[d["_id"]] = f"{title}\n{d['text']}" if title else d["text"]
    queries = [json.loads(line) for line in open(f"{directory}/queries.jsonl")]
    qrels = {}
    with open(f"{directory}/qrels/test.tsv") as f:
        next(f)
        for line in f:
            q, d, s = line.rstrip("\n").split("\t")
            if int(s) > 0:
                qrels.setdefault(q, {})[d] = int(s)
    return corpus, queries, qrels


def ids_of(tok, text, max_len=MAX_LEN):
    return [CLS] + tok.encode(text, add_special_tokens=False).ids[: max_len - 2] + [SEP]


def batch_tensors(rows):
    t = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), t, dtype=torch.long)
    mask = torch.zeros(len(rows), t, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return ids, mask


def fused_attention_forward(self, x, mask_bias):
    """model.Layer.forward with PyTorch's fused attention: the same function, without the [batch, heads, tokens,
    tokens] probabilities kept for the backward pass (at 256 tokens they made a training step memory-bound)."""
    b, t, h = x.shape
    sa = getattr(self.attention, "self")
    d = h // self.heads

    def split(y):
        return y.view(b, t, self.heads, d).transpose(1, 2)

    ctx = F.scaled_dot_product_attention(split(sa.query(x)), split(sa.key(x)), split(sa.value(x)), attn_mask=mask_bias)
    ctx = ctx.transpose(1, 2).reshape(b, t, h)
    a = self.attention.output
    x = a.LayerNorm(x + a.dense(ctx))
    o = self.output
    return o.LayerNorm(x + o.dense(F.gelu(self.intermediate.dense(x))))


READER_LAYER_FORWARD = Layer.forward
Layer.forward = fused_attention_forward


def embed_rows(model, rows, frozen=0):
    """The [CLS] rows, L2-normalised; the embeddings and the first `frozen` layers run without gradients."""
    device = model.embeddings.word_embeddings.weight.device
    ids, mask = (t.to(device) for t in batch_tensors(rows))
    bias = (1.0 - mask[:, None, None, :].float()) * -10000.0
    e = model.embeddings
    with torch.set_grad_enabled(torch.is_grad_enabled() and frozen < 0):
        pos = torch.arange(ids.shape[1], device=device).unsqueeze(0)
        x = e.LayerNorm(e.word_embeddings(ids) + e.position_embeddings(pos) + e.token_type_embeddings(torch.zeros_like(ids)))
    for i, layer in enumerate(model.encoder.layer):
        with torch.set_grad_enabled(torch.is_grad_enabled() and i >= frozen):
            x = layer(x, bias)
    return F.normalize(x[:, 0], dim=-1)


@torch.no_grad()
def embed(model, tok, texts, batch=32):
    rows = [ids_of(tok, t) for t in texts]
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    out = torch.zeros(len(rows), model.embeddings.word_embeddings.weight.shape[1])
    for s in range(0, len(order), batch):
        chunk = order[s: s + batch]
        out[chunk] = embed_rows(model, [rows[i] for i in chunk]).cpu()
    return out


def load_model(base, weights=None):
    config = json.load(open(f"{base}/config.json"))
    model = Reader(config)
    state = {k: v for k, v in load_base(base).items() if not k.startswith("pooler.") and k != "embeddings.position_ids"}
    if weights:
        state.update({k: v.float() for k, v in load_file(weights).items()})
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert all(m.startswith("reader.") for m in missing) and not unexpected, (missing, unexpected)
    return model


def evaluate(model, tok, data, name, every=1):
    """nDCG@10 of the dense lane on a set: its held-out articles' questions when it is trained on, else all."""
    corpus, queries, qrels = load_set(f"{data}/{name}")
    qs = [q for q in queries if q["_id"] in qrels and (name not in TRAIN_SETS or held_out(q.get("gold_doc")))][::every]
    doc_ids = list(corpus)
    model.eval()
    docs = embed(model, tok, [corpus[d] for d in doc_ids])
    qv = embed(model, tok, [QUERY_PREFIX + q["text"] for q in qs])
    top = (qv @ docs.T).topk(10, dim=1).indices
    scores = [ndcg_at_k([doc_ids[j] for j in top[i].tolist()], set(qrels[q["_id"]]), 10) for i, q in enumerate(qs)]
    return sum(scores) / len(scores), len(qs)


def training_pairs(model, tok, data, seed, cache):
    """(query, gold passage, hard negative passage, gold id) for the held-in answerable questions; mined once per
    seed and kept in `cache` (the mining embeds every training question and passage)."""
    if os.path.exists(cache):
        return [tuple(p) for p in json.load(open(cache))]
    rng = random.Random(seed)
    pairs = []
    model.eval()
    for name in TRAIN_SETS:
        corpus, queries, qrels = load_set(f"{data}/{name}")
        qs = [q for q in queries if q.get("gold_doc") in corpus and q["_id"] in qrels and not held_out(q["gold_doc"])]
        doc_ids = list(corpus)
        docs = embed(model, tok, [corpus[d] for d in doc_ids])
        qv = embed(model, tok, [QUERY_PREFIX + q["text"] for q in qs])
        top = (qv @ docs.T).topk(21, dim=1).indices
        for i, q in enumerate(qs):
            golds = qrels[q["_id"]]
            negatives = [doc_ids[j] for j in top[i].tolist()[1:] if doc_ids[j] not in golds]
            neg = rng.choice(negatives[:19])
            pairs.append((QUERY_PREFIX + q["text"], corpus[q["gold_doc"]], corpus[neg], q["gold_doc"]))
        print(f"{name}: {len(qs)} training questions", flush=True)
    rng.shuffle(pairs)
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    json.dump(pairs, open(cache, "w"))
    return pairs


def plan_steps(pairs, batch, epochs, steps=None):
    """Each step's pair indices: consecutive windows over the pairs (shuffled once when mined), as the first
    fine-tune ran; `steps` cuts the plan short (its length also sets the learning-rate schedule)."""
    total = min(steps or 10**9, pairs // batch * epochs)
    return [list(range(off, off + batch)) for off in ((s * batch) % (pairs - batch + 1) for s in range(total))]


def fit(model, tok, pairs, steps, args, checkpoint, stop_after=0, should_stop=lambda: False):
    """Trains `model` over `steps` (plan_steps) from where `checkpoint` stopped, writing it every
    `args.checkpoint_every` steps and at a stop (schedule.run_steps). Returns (step, why): why "paused" or "done"."""
    trained = tuple(f"encoder.layer.{i}." for i in range(max(0, args.frozen_layers), len(model.encoder.layer)))
    if args.frozen_layers < 0:
        trained += ("embeddings.",)
    params = [p for n, p in model.named_parameters() if n.startswith(trained)]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    total = len(steps)
    warm = max(1, total // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm))))
    # What else decides the weights: a checkpoint of another run is refused, not continued.
    run = {k: getattr(args, k) for k in ("lr", "temperature", "frozen_layers", "train_max_len", "seed")}

    def load():
        if not os.path.exists(checkpoint):
            return None
        saved = torch.load(checkpoint, map_location=args.device)
        if saved["run"] != run:
            sys.exit(f"finetune.py: {checkpoint} was written by another run ({saved['run']}, this one: {run}); "
                     "remove it or use another --out")
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        sched.load_state_dict(saved["sched"])
        torch.set_rng_state(saved["rng"])
        return saved["meta"]

    def save(meta):
        tmp = checkpoint + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                    "rng": torch.get_rng_state(), "run": run, "meta": meta}, tmp)
        os.replace(tmp, checkpoint)

    def train_step(_step, indices):
        batch = [pairs[i] for i in indices]
        q = embed_rows(model, [ids_of(tok, b[0]) for b in batch], args.frozen_layers)
        p = embed_rows(model, [ids_of(tok, b[1], args.train_max_len) for b in batch]
                       + [ids_of(tok, b[2], args.train_max_len) for b in batch], args.frozen_layers)
        logits = q @ p.T / args.temperature
        gold = [b[3] for b in batch]
        # Another question's copy of the same gold passage is not a negative.
        same = torch.tensor([[gold[i] == gold[j] and i != j for j in range(len(batch))] for i in range(len(batch))],
                            device=logits.device)
        logits[:, : len(batch)] = logits[:, : len(batch)].masked_fill(same, float("-inf"))
        loss = F.cross_entropy(logits, torch.arange(len(batch), device=logits.device))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        return len(batch), loss.item()

    model.train()
    os.makedirs(os.path.dirname(os.path.abspath(checkpoint)), exist_ok=True)
    try:
        step, why, _ = run_steps(steps, train_step, load, save, args.checkpoint_every, where=checkpoint,
                                 stop_after=stop_after, should_stop=should_stop, progress_every=10)
    except PlanMismatch as e:
        sys.exit(f"finetune.py: {e}")
    return step, why


def train(args):
    torch.manual_seed(args.seed)
    tok = Tokenizer.from_file(f"{args.base}/tokenizer.json")
    model = load_model(args.base, args.init).to(args.device)
    cache = os.path.join(os.path.dirname(os.path.abspath(args.out)), f"pairs-{args.seed}.json")
    pairs = training_pairs(model, tok, args.data, args.seed, cache)
    steps = plan_steps(len(pairs), args.batch, args.epochs, args.steps)
    # SIGINT/SIGTERM: finish the step under way, write the checkpoint, exit PAUSED_EXIT (a second signal kills).
    step, why = fit(model, tok, pairs, steps, args, f"{args.out}/checkpoint.pt", args.stop_after_steps,
                    stop_on_signals())
    if why == "paused":
        sys.exit(PAUSED_EXIT)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items() if not k.startswith("reader.")}
    save_file(state, f"{args.out}/embedder.safetensors", metadata={"steps": str(step), "lr": str(args.lr),
                                                                    "batch": str(args.batch),
                                                                    "temperature": str(args.temperature),
                                                                    "frozen_layers": str(args.frozen_layers),
                                                                    "train_max_len": str(args.train_max_len)})
    print(f"wrote {args.out}/embedder.safetensors ({step} steps)", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["eval", "train"])
    p.add_argument("--base", required=True)
    p.add_argument("--weights")
    p.add_argument("--init")
    p.add_argument("--data", default="data")
    p.add_argument("--out")
    p.add_argument("--sets", nargs="*", default=["squad-dev", "shift-new-wiki", "shift-reddit"])
    p.add_argument("--every", type=int, default=1)
    p.add_argument("--steps", type=int)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--temperature", type=float, default=0.02)
    p.add_argument("--frozen-layers", type=int, default=0,
                   help="the embeddings and this many lower layers are not trained (-1: the embeddings trained too)")
    p.add_argument("--train-max-len", type=int, default=MAX_LEN, help="passage tokens in training (speed)")
    p.add_argument("--seed", type=int, default=70)
    p.add_argument("--device", default="cpu", help="cpu, or cuda on a lent GPU")
    p.add_argument("--checkpoint-every", type=int, default=20, help="steps between checkpoints (DIR/checkpoint.pt)")
    p.add_argument("--stop-after-steps", type=int, default=0,
                   help="pause after this many steps of this run: checkpoint, exit 75; rerun to continue")
    p.add_argument("--threads", type=int, default=int(os.environ.get("ATTEST_EMBEDDER_THREADS", "2")))
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.command == "train":
        train(args)
        return
    tok = Tokenizer.from_file(f"{args.base}/tokenizer.json")
    model = load_model(args.base, args.weights).to(args.device)
    for name in args.sets:
        t = time.time()
        score, n = evaluate(model, tok, args.data, name, args.every)
        print(json.dumps({"set": name, "questions": n, "ndcg@10": round(score, 4), "seconds": round(time.time() - t)}),
              flush=True)


if __name__ == "__main__":
    main()
