"""The local embedder's model under ONNX Runtime, against the candle embedder run alongside (issue 18, item 4:
"measure before choosing").

all-MiniLM-L6-v2 (models/all-minilm-l6-v2) is exported to ONNX from the same weights (PyTorch, the training
environment of scripts/train-reader.sh), quantised to int8 with ONNX Runtime's dynamic quantisation (weights of
constant matrix products only, per channel: quantising the attention's activation products as well cost 0.06 of
cosine), and timed on the first 64 paragraphs of data/squad-sample the way `attest ingest` embeds them (batches of
4 sorted by length, 2 threads). Fidelity: the cosine of each ONNX embedding with PyTorch's fp32 one (mean pooled,
L2-normalised, 256 tokens at most, as crates/attest-embed does).

    benches/bench-embed-onnx.sh           # runs the candle example, then this, and prints the ratios
"""
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
from onnxruntime.quantization import QuantType, quantize_dynamic
from safetensors.torch import load_file
from tokenizers import Tokenizer

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts/reader"))
from model import Embeddings, Encoder  # noqa: E402  (the reader's BERT layers: the same architecture)

BASE = REPO / "models/all-minilm-l6-v2"
TEXTS, BATCH, THREADS, MAX_TOKENS = 64, 4, 2, 256


class Embedder(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.embeddings = Embeddings(cfg["vocab_size"], h, cfg["max_position_embeddings"], cfg["type_vocab_size"])
        self.encoder = Encoder(cfg["num_hidden_layers"], h, i, cfg["num_attention_heads"])

    def forward(self, ids, mask):
        e = self.embeddings
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = e.LayerNorm(e.word_embeddings(ids) + e.position_embeddings(pos) + e.token_type_embeddings(torch.zeros_like(ids)))
        m = mask.float()
        bias = (1.0 - m[:, None, None, :]) * -10000.0
        for layer in self.encoder.layer:
            x = layer(x, bias)
        pooled = (x * m[:, :, None]).sum(1) / m.sum(1, keepdim=True).clamp(min=1e-9)
        return pooled / pooled.norm(dim=1, keepdim=True).clamp(min=1e-12)


def main(out_dir: Path, candle_per_s: float | None):
    torch.set_num_threads(THREADS)
    model = Embedder(json.loads((BASE / "config.json").read_text()))
    weights = {k: v.float() for k, v in load_file(BASE / "model.safetensors").items() if k.startswith(("embeddings.", "encoder."))}
    weights.pop("embeddings.position_ids", None)
    model.load_state_dict(weights)
    model.eval()
    tok = Tokenizer.from_file(str(BASE / "tokenizer.json"))
    tok.enable_truncation(MAX_TOKENS)
    tok.no_padding()
    texts = [json.loads(l)["text"] for l in (REPO / "data/squad-sample/corpus.jsonl").open()][:TEXTS]
    enc = [tok.encode(t).ids for t in texts]
    order = sorted(range(len(enc)), key=lambda i: len(enc[i]))
    batches = [order[i:i + BATCH] for i in range(0, len(order), BATCH)]

    def arrays(b):
        t = max(len(enc[i]) for i in b)
        ids, mask = np.zeros((len(b), t), np.int64), np.zeros((len(b), t), np.int64)
        for r, i in enumerate(b):
            ids[r, :len(enc[i])], mask[r, :len(enc[i])] = enc[i], 1
        return ids, mask

    def timed(embed):
        embed(batches[:2])  # warm-up
        started = time.perf_counter()
        out = embed(batches)
        return len(enc) / (time.perf_counter() - started), out

    def torch_embed(bs):
        out = {}
        with torch.no_grad():
            for b in bs:
                e = model(*(torch.tensor(a) for a in arrays(b))).numpy()
                out.update({j: e[r] for r, j in enumerate(b)})
        return out

    out_dir.mkdir(parents=True, exist_ok=True)
    fp32, int8 = out_dir / "minilm.onnx", out_dir / "minilm-int8.onnx"
    ids, mask = arrays(batches[-1])
    torch.onnx.export(model, (torch.tensor(ids), torch.tensor(mask)), str(fp32), input_names=["ids", "mask"],
                      output_names=["embedding"], opset_version=17, dynamo=False,
                      dynamic_axes={"ids": {0: "batch", 1: "tokens"}, "mask": {0: "batch", 1: "tokens"}, "embedding": {0: "batch"}})
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True,
                     extra_options={"MatMulConstBOnly": True})

    def ort_embed(path):
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = THREADS, 1
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

        def embed(bs):
            out = {}
            for b in bs:
                i, m = arrays(b)
                e = session.run(None, {"ids": i, "mask": m})[0]
                out.update({j: e[r] for r, j in enumerate(b)})
            return out
        return embed

    reference_per_s, reference = timed(torch_embed)
    rows = [("pytorch fp32", reference_per_s, reference)]
    for name, path in [("onnxruntime fp32", fp32), ("onnxruntime int8", int8)]:
        rows.append((name, *timed(ort_embed(path))))
    report = {"texts": len(enc), "mean_tokens": sum(map(len, enc)) / len(enc), "batch": BATCH, "threads": THREADS,
              "onnxruntime": ort.__version__, "candle_passages_per_s": candle_per_s, "runs": []}
    for name, per_s, out in rows:
        cos = [float(np.dot(out[i], reference[i])) for i in range(len(enc))]
        run = {"name": name, "passages_per_s": per_s, "cosine_min": min(cos), "cosine_mean": float(np.mean(cos)),
               "vs_candle": per_s / candle_per_s if candle_per_s else math.nan}
        report["runs"].append(run)
        print(f"{name:18} {per_s:7.1f} passages/s  x{run['vs_candle']:.2f} candle  cosine to fp32 min {run['cosine_min']:.4f} mean {run['cosine_mean']:.5f}")
    print(json.dumps(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else None)
