"""Writes a fine-tuned bge-small embedder (finetune.py's embedder.safetensors) as the graph the dense lane runs.

The graph has the installed bge-small's interface (crates/attest-models/src/embed/onnx.rs, `Pooling::Cls`):
inputs `input_ids`, `attention_mask`, `token_type_ids` (int64 [texts, tokens]), output `last_hidden_state`
([texts, tokens, 384]); the [CLS] row is pooled and normalised on the Rust side. Weights are int8 (dynamic
quantisation, per channel, 8-bit: on the first fine-tuned embedder the readers' 7-bit weights gave a cosine to the
f32 model of 0.977 on average (min 0.964), 8-bit 0.993 (min 0.990), per tensor 0.978), except the matrices named
by --keep-f32, which stay f32 (stored f16: scripts/reader/quantise.py). The default keeps each layer's value
projection and feed-forward output: with every matrix int8 the first fine-tuned embedder lost 0.011 / 0.014 / 0.027
nDCG@10 against its f32 weights (squad-dev held out / shift-new-wiki / shift-reddit held out, `compare.py`), and
keeping those two took back most of it (docs/decisions/embedders.md "Which matrices stay f32"). Checked: the
graph's normalised [CLS] vectors, one text per pass as the dense lane runs it, against the f32 model's on sample
passages and queries (cosine printed; a minimum below 0.985 fails).

  export_onnx.py BASE WEIGHTS OUT [--keep-f32 value,dense_2]    writes OUT/{model.onnx, tokenizer.json, config.json}
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from tokenizers import Tokenizer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reader"))
from model import Reader, load_base  # noqa: E402
from quantise import DEFAULT_KEEP, quantise  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CONFIG = os.path.join(REPO, "crates", "attest-models", "models", "bge", "config.json")
QUERY_PREFIX = "Represent this sentence for searching relevant passages: "


class Exported(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.model.encode(input_ids, token_type_ids, attention_mask)


def sample_texts(n):
    texts = []
    for line in open(os.path.join(REPO, "data", "shift-new-wiki", "corpus.jsonl")):
        d = json.loads(line)
        texts.append(f"{d['title']}\n{d['text']}")
        if len(texts) == n // 2:
            break
    for line in open(os.path.join(REPO, "data", "shift-new-wiki", "queries.jsonl")):
        texts.append(QUERY_PREFIX + json.loads(line)["text"])
        if len(texts) == n:
            break
    return texts


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("base")
    p.add_argument("weights")
    p.add_argument("out")
    p.add_argument("--keep-f32", default=DEFAULT_KEEP,
                   help="comma-separated kinds of layer matrix left unquantised (query, key, value, dense, dense_1, "
                        "dense_2: attention output, feed-forward input, feed-forward output); empty: all int8")
    args = p.parse_args()
    import onnxruntime as ort

    model = Reader(json.load(open(f"{args.base}/config.json")))
    state = {k: v for k, v in load_base(args.base).items() if not k.startswith("pooler.") and k != "embeddings.position_ids"}
    state.update({k: v.float() for k, v in load_file(args.weights).items()})
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert all(m.startswith("reader.") for m in missing) and not unexpected, (missing, unexpected)
    model.eval()

    tok = Tokenizer.from_file(f"{args.base}/tokenizer.json")
    rows = [[101] + tok.encode(t, add_special_tokens=False).ids[:254] + [102] for t in sample_texts(64)]
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    types = torch.zeros_like(ids)

    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        f32 = f"{tmp}/embedder-f32.onnx"
        names = ["input_ids", "attention_mask", "token_type_ids"]
        torch.onnx.export(Exported(model), (ids[:2], mask[:2], types[:2]), f32, input_names=names,
                          output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                          dynamic_axes={n: {0: "texts", 1: "tokens"} for n in names + ["last_hidden_state"]})
        kept = quantise(f32, f"{args.out}/model.onnx", args.keep_f32)
        print(f"{len(kept)} matrices kept in floating point")
    shutil.copyfile(f"{args.base}/tokenizer.json", f"{args.out}/tokenizer.json")
    shutil.copyfile(CONFIG, f"{args.out}/config.json")

    with torch.no_grad():
        want = F.normalize(model.encode(ids, types, mask)[:, 0], dim=-1).numpy()
    session = ort.InferenceSession(f"{args.out}/model.onnx", providers=["CPUExecutionProvider"])
    # One text per pass, as the dense lane runs it (the int8 graph's activation scale is set over a whole batch).
    got = []
    for i, r in enumerate(rows):
        one = {"input_ids": ids[i: i + 1, : len(r)].numpy(), "attention_mask": mask[i: i + 1, : len(r)].numpy(),
               "token_type_ids": types[i: i + 1, : len(r)].numpy()}
        got.append(session.run(None, one)[0][0, 0])
    got = np.stack(got)
    got = got / np.linalg.norm(got, axis=-1, keepdims=True)
    cosine = (want * got).sum(-1)
    print(f"quantised graph vs f32 model on {len(rows)} texts: cosine min {cosine.min():.4f}, mean {cosine.mean():.4f}")
    if cosine.min() < 0.985:
        sys.exit("the quantised graph drifted from the f32 model (cosine < 0.985)")


if __name__ == "__main__":
    main()
