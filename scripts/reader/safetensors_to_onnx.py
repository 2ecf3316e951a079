"""Writes a MiniLM reader (train.py's reader.safetensors, f16) as an ONNX graph that ONNX Runtime runs in f32, and back.

Why: candle's CPU forward pass is several times slower than ONNX Runtime's on the same BERT (the embedder measured
5.74x), and the reader's read and verify stages are most of an ask's time once two readers run. The graph keeps the
weights as they are committed — every tensor an f16 initializer, cast to f32 by a Cast node that ONNX Runtime folds
into an f32 constant when it loads the graph — so its logits are candle's up to the order of float additions, and
the file stays the size of the safetensors (45 MB, under the repository's 50 MB for a model). No PyTorch: the graph
is written node by node with the onnx package, as model.Reader computes it (scripts/reader/model.py), its encoder
by the embedder's builder (scripts/onnx/export_minilm.py: the same BERT layers, mask bias -10000, erf GELU), with
the token types as an input, a tanh pooler over [CLS] and the heads.

Inputs `input_ids`, `token_type_ids`, `attention_mask` (int64 [batch, tokens]); outputs `heads` [batch, 2] (the
answerable and supported logits) and `span` [batch, tokens, 2] — the layout of export_onnx.py's int8 graphs, which
crates/attest-models/src/reader/onnx.rs runs. Writes OUT/reader.onnx, OUT/config.json (the model's config with
`span_blend`, `max_len`, `max_first` from the weights' metadata), OUT/tokenizer.json and OUT/reader.sha256.

--check runs the graph under onnxruntime against a NumPy f32 implementation of model.Reader on random pairs with
padding and fails past a difference of 1e-3 in any logit.

--back MODEL_DIR OUT.safetensors writes the graph's f16 initializers back as train.py's reader.safetensors (bit for
bit the tensors it was made from, with the metadata from config.json), so a further round can start from the
committed reader (`train.py --init`).

Usage: python scripts/reader/safetensors_to_onnx.py WEIGHTS.safetensors MODEL_DIR OUT [--check]
       (MODEL_DIR holds the weights' config.json and tokenizer.json; OUT may be MODEL_DIR)
       python scripts/reader/safetensors_to_onnx.py --back MODEL_DIR OUT.safetensors
"""

import argparse
import hashlib
import json
import os
import shutil
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "onnx"))
from export_minilm import OPSET, Graph, encoder_layers, mask_bias, read_safetensors  # noqa: E402

# Metadata of train.py's weights that the Rust reader reads from an ONNX model's config.json.
META_KEYS = ("span_blend", "max_len", "max_first")
# The two logistic heads, one [hidden, 2] product in the graph (column 0 answerable, 1 supported).
HEADS = ("reader.answerable", "reader.supported")


def safetensors_metadata(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)).get("__metadata__", {}) or {}


def write_safetensors(path, tensors, meta):
    """Writes f16 tensors (sorted by name, as safetensors' writers do) with string metadata."""
    header, offset, blobs = {"__metadata__": {k: str(v) for k, v in meta.items()}}, 0, []
    for name in sorted(tensors):
        blob = np.ascontiguousarray(tensors[name], dtype=np.float16).tobytes()
        header[name] = {"dtype": "F16", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


class F16Graph(Graph):
    """The embedder's graph builder with every weight kept f16 (NAME.f16, or NAME.T.f16 transposed) and cast to f32
    by a node whose output has the name the f32 graph gives it."""

    def weight(self, name, transpose=False):
        out = name + (".T" if transpose else "")
        w = self.weights[name].T if transpose else self.weights[name]
        self.const(out + ".f16", np.ascontiguousarray(w, dtype=np.float16))
        self.nodes.append(helper.make_node("Cast", [out + ".f16"], [out], name=out, to=TensorProto.FLOAT))
        return out


def build(tensors, config):
    g = F16Graph(dict(tensors))
    for part in ("weight", "bias"):
        g.weights[f"reader.heads.{part}"] = np.concatenate([tensors[f"{h}.{part}"] for h in HEADS], axis=0)
    # Embeddings: word[ids] + position[0..tokens) + type[token types], then LayerNorm.
    tokens = g.op("Shape", ["input_ids"], "tokens", start=1, end=2)
    zero = g.const("zero_1d", np.array([0], np.int64))
    positions = g.op("Slice", [g.weight("embeddings.position_embeddings.weight"), zero, tokens, zero], "pos")
    x = g.op("Gather", [g.weight("embeddings.word_embeddings.weight"), "input_ids"], "word", axis=0)
    types = g.op("Gather", [g.weight("embeddings.token_type_embeddings.weight"), "token_type_ids"], "type", axis=0)
    x = g.op("Add", [g.op("Add", [x, positions], "add_pos"), types], "add_type")
    x = g.layer_norm(x, "embeddings.LayerNorm", config["layer_norm_eps"])
    _, bias = mask_bias(g)
    x = encoder_layers(g, config, x, bias)
    g.inits.append(numpy_helper.from_array(np.array(0, np.int64), "cls_index"))  # a scalar: [batch, hidden] out
    cls = g.op("Gather", [x, "cls_index"], "cls", axis=1)
    pooled = g.op("Tanh", [g.linear(cls, "reader.pooler")], "pooled")
    g.nodes.append(helper.make_node("Identity", [g.linear(pooled, "reader.heads")], ["heads"], name="heads"))
    g.nodes.append(helper.make_node("Identity", [g.linear(x, "reader.span")], ["span"], name="span"))

    ints = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"])
            for n in ("input_ids", "token_type_ids", "attention_mask")]
    outs = [helper.make_tensor_value_info("heads", TensorProto.FLOAT, ["batch", 2]),
            helper.make_tensor_value_info("span", TensorProto.FLOAT, ["batch", "tokens", 2])]
    graph = helper.make_graph(g.nodes, "attest-reader", ints, outs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="attest")
    model.ir_version = 8  # as the embedder's graph
    onnx.checker.check_model(model, full_check=True)
    return model


def reference(tensors, config, ids, types, mask):
    """model.Reader's forward pass in NumPy f32 (eval mode): (heads [B, 2], span [B, T, 2])."""
    f = {k: v.astype(np.float32) for k, v in tensors.items()}
    h, nh = config["hidden_size"], config["num_attention_heads"]
    d, eps = h // nh, config.get("layer_norm_eps", 1e-12)

    def ln(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * f[f"{p}.weight"] + f[f"{p}.bias"]

    def lin(x, p):
        return x @ f[f"{p}.weight"].T + f[f"{p}.bias"]

    from math import erf
    verf = np.vectorize(erf)
    b, t = ids.shape
    x = ln(f["embeddings.word_embeddings.weight"][ids] + f["embeddings.position_embeddings.weight"][:t][None]
           + f["embeddings.token_type_embeddings.weight"][types], "embeddings.LayerNorm")
    bias = ((1.0 - mask.astype(np.float32)) * -10000.0)[:, None, None, :]
    for n in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{n}"
        q, k, v = (lin(x, f"{p}.attention.self.{m}").reshape(b, t, nh, d).transpose(0, 2, 1, 3)
                   for m in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
        s = np.exp(s - s.max(-1, keepdims=True))
        ctx = ((s / s.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(b, t, h)
        x = ln(x + lin(ctx, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
        i = lin(x, f"{p}.intermediate.dense")
        x = ln(x + lin(i * 0.5 * (1.0 + verf(i / np.sqrt(2.0))), f"{p}.output.dense"), f"{p}.output.LayerNorm")
    pooled = np.tanh(lin(x[:, 0], "reader.pooler"))
    heads = np.concatenate([lin(pooled, "reader.answerable"), lin(pooled, "reader.supported")], axis=-1)
    return heads, lin(x, "reader.span")


def check(path, tensors, config):
    """The largest difference of the graph's logits from the NumPy reference's on four padded random pairs; fails
    past 1e-3."""
    import onnxruntime as ort
    rng = np.random.default_rng(7)
    b, t = 4, 40
    ids = rng.integers(1, config["vocab_size"], (b, t)).astype(np.int64)
    types = np.zeros((b, t), np.int64)
    types[:, 15:] = 1
    mask = np.ones((b, t), np.int64)
    for r, length in enumerate([40, 33, 21, 17]):
        mask[r, length:], ids[r, length:] = 0, 0
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    heads, span = session.run(None, {"input_ids": ids, "token_type_ids": types, "attention_mask": mask})
    want_heads, want_span = reference(tensors, config, ids, types, mask)
    diff = max(np.abs(heads - want_heads).max(), np.abs((span - want_span) * mask[..., None]).max())
    print(f"graph vs NumPy reference on {b} padded pairs: largest logit difference {diff:.2e}")
    if not diff < 1e-3:
        raise SystemExit(f"the graph does not compute the reader (largest logit difference {diff})")
    return diff


def back(model_dir, out):
    model = onnx.load(f"{model_dir}/reader.onnx")
    tensors = {}
    for init in model.graph.initializer:
        if init.name.endswith(".f16"):
            name, value = init.name[: -len(".f16")], numpy_helper.to_array(init)
            if name.endswith(".T"):
                name, value = name[: -len(".T")], value.T
            tensors[name] = value
    for part in ("weight", "bias"):
        both = tensors.pop(f"reader.heads.{part}")
        tensors[f"{HEADS[0]}.{part}"], tensors[f"{HEADS[1]}.{part}"] = both[:1], both[1:]
    config = json.load(open(f"{model_dir}/config.json"))
    meta = {"format": "attest-reader-1"} | {k: config[k] for k in META_KEYS if k in config}
    write_safetensors(out, tensors, meta)
    print(f"wrote {out} ({len(tensors)} tensors)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--back", action="store_true")
    p.add_argument("paths", nargs="+")
    p.add_argument("--check", action="store_true")
    args = p.parse_args()
    if args.back:
        return back(*args.paths)
    convert(*args.paths, check_graph=args.check)


def convert(weights, model_dir, out, check_graph=False):
    """Writes OUT/{reader.onnx,config.json,tokenizer.json,reader.sha256} from WEIGHTS and MODEL_DIR's config."""
    tensors, meta = read_safetensors(Path(weights)), safetensors_metadata(weights)
    config = json.load(open(f"{model_dir}/config.json"))
    model = build(tensors, config)
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        with open(f"{tmp}/reader.onnx", "wb") as f:
            f.write(model.SerializeToString(deterministic=True))
        if check_graph:
            check(f"{tmp}/reader.onnx", tensors, config)
        shutil.move(f"{tmp}/reader.onnx", f"{out}/reader.onnx")
    write_model_files(out, config, meta, f"{model_dir}/tokenizer.json")


def write_model_files(out, config, meta, tokenizer):
    """OUT/config.json (the base's config with the weights' META_KEYS), OUT/tokenizer.json, and OUT/reader.sha256
    over them and OUT/reader.onnx, which must be written already. Also export_onnx.py's (the int8 graphs)."""
    out_config = {k: v for k, v in config.items() if k not in META_KEYS}
    for key in META_KEYS:
        if key in meta:
            out_config[key] = float(meta[key]) if key == "span_blend" else int(meta[key])
    with open(f"{out}/config.json", "w") as f:
        json.dump(out_config, f, indent=2)
    if os.path.abspath(tokenizer) != os.path.abspath(f"{out}/tokenizer.json"):
        shutil.copyfile(tokenizer, f"{out}/tokenizer.json")
    sums = {}
    for name in ("config.json", "tokenizer.json", "reader.onnx"):
        with open(f"{out}/{name}", "rb") as f:
            sums[name] = hashlib.sha256(f.read()).hexdigest()
    with open(f"{out}/reader.sha256", "w") as f:
        f.writelines(f"{h}  {n}\n" for n, h in sums.items())
    print(f"wrote {out}/reader.onnx ({os.path.getsize(f'{out}/reader.onnx') / 1e6:.1f} MB)")

if __name__ == "__main__":
    sys.exit(main())
