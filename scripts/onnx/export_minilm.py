"""Writes all-MiniLM-L6-v2 as an ONNX graph for the local embedder's ONNX Runtime back end (issue 18, item 4).

No PyTorch: the BERT encoder is written node by node with `onnx.helper` from the installed weights
(models/all-minilm-l6-v2/model.safetensors, read with numpy), so the set-up needs only the small `onnx` and
`numpy` wheels. The graph is the whole embedder — token, position and type embeddings, six post-LayerNorm
encoder layers (exact erf GELU), mean pooling over the attention mask and L2 normalisation — so the Rust side
feeds token ids and a mask and gets the finished vectors:

    inputs   input_ids       int64 [batch, tokens]
             attention_mask  int64 [batch, tokens]   (1 = a real token, 0 = padding)
    output   embedding       float [batch, hidden]   (mean pooled, L2-normalised)

Token type ids are always 0 for a single text, so type embedding 0 is a constant of the graph.
The output is deterministic (same weights, same onnx version → same bytes); scripts/install-onnxruntime.sh
checks it against crates/attest-models/onnx.sha256, the hash the embedder checks on load.

    python scripts/onnx/export_minilm.py MODEL_DIR OUT.onnx
"""
import json
import struct
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # LayerNormalization is a core operator from 17 on
DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file (8-byte little-endian header length, JSON header, raw data)."""
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + header_len])
    data = raw[8 + header_len:]
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        out[name] = np.frombuffer(data[start:end], dtype=DTYPES[meta["dtype"]]).reshape(meta["shape"])
    return out


class Graph:
    """Accumulates nodes and initialisers; every intermediate gets a unique readable name."""

    def __init__(self, weights):
        self.weights, self.nodes, self.inits, self.count = weights, [], [], 0

    def const(self, name, array):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def weight(self, name, transpose=False):
        """The f32 value of a checkpoint tensor (transposed: named NAME.T)."""
        w = self.weights[name].astype(np.float32)
        return self.const(name + (".T" if transpose else ""), w.T if transpose else w)

    def op(self, op_type, inputs, hint, **attrs):
        self.count += 1
        out = f"{hint}_{self.count}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def linear(self, x, prefix):
        """x · Wᵀ + b for a `torch.nn.Linear` stored as weight [out, in] and bias [out]."""
        y = self.op("MatMul", [x, self.weight(prefix + ".weight", transpose=True)], prefix + ".matmul")
        return self.op("Add", [y, self.weight(prefix + ".bias")], prefix + ".add")

    def layer_norm(self, x, prefix, eps):
        return self.op("LayerNormalization", [x, self.weight(prefix + ".weight"), self.weight(prefix + ".bias")],
                       prefix, axis=-1, epsilon=eps)


def mask_bias(g):
    """(the mask as floats, the attention bias: 0 for real tokens, -10000 for padding, [batch, 1, 1, tokens])."""
    mask = g.op("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    bias = g.op("Mul", [g.op("Sub", [g.const("one_f", np.array(1.0, np.float32)), mask], "inv_mask"),
                        g.const("neg_big", np.array(-10000.0, np.float32))], "mask_bias")
    return mask, g.op("Unsqueeze", [bias, g.const("axes_1_2", np.array([1, 2], np.int64))], "mask_bias4")


def encoder_layers(g, cfg, x, bias):
    """BERT's post-LayerNorm encoder layers over the embeddings `x` (exact erf GELU); the last hidden states.
    Also the reader's encoder (scripts/reader/safetensors_to_onnx.py); `one_f` comes from mask_bias."""
    hidden, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    head_dim = hidden // heads
    split_heads = g.const("split_heads", np.array([0, 0, heads, head_dim], np.int64))
    merge_heads = g.const("merge_heads", np.array([0, 0, hidden], np.int64))
    scale = g.const("scale", np.array(1.0 / np.sqrt(head_dim), np.float32))
    sqrt_half = g.const("inv_sqrt2", np.array(1.0 / np.sqrt(2.0), np.float32))
    half = g.const("half", np.array(0.5, np.float32))

    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}"

        def heads_of(name):  # [b, t, hidden] → [b, heads, t, head_dim]
            y = g.op("Reshape", [g.linear(x, f"{p}.attention.self.{name}"), split_heads], f"{p}.{name}.split")
            return g.op("Transpose", [y], f"{p}.{name}.heads", perm=[0, 2, 1, 3])

        q, k, v = heads_of("query"), heads_of("key"), heads_of("value")
        kt = g.op("Transpose", [k], f"{p}.key.t", perm=[0, 1, 3, 2])
        scores = g.op("Mul", [g.op("MatMul", [q, kt], f"{p}.scores"), scale], f"{p}.scaled")
        probs = g.op("Softmax", [g.op("Add", [scores, bias], f"{p}.masked")], f"{p}.probs", axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v], f"{p}.ctx")], f"{p}.ctx.t", perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, merge_heads], f"{p}.ctx.merged")
        attn = g.linear(ctx, f"{p}.attention.output.dense")
        x = g.layer_norm(g.op("Add", [attn, x], f"{p}.attn.residual"), f"{p}.attention.output.LayerNorm", eps)

        h = g.linear(x, f"{p}.intermediate.dense")
        erf = g.op("Erf", [g.op("Mul", [h, sqrt_half], f"{p}.gelu.scaled")], f"{p}.gelu.erf")
        gelu = g.op("Mul", [g.op("Mul", [h, half], f"{p}.gelu.half"),
                            g.op("Add", [erf, "one_f"], f"{p}.gelu.one_plus")], f"{p}.gelu")
        out = g.linear(gelu, f"{p}.output.dense")
        x = g.layer_norm(g.op("Add", [out, x], f"{p}.ffn.residual"), f"{p}.output.LayerNorm", eps)
    return x


def build(model_dir: Path) -> onnx.ModelProto:
    cfg = json.loads((model_dir / "config.json").read_text())
    hidden, eps = cfg["hidden_size"], cfg["layer_norm_eps"]
    g = Graph(read_safetensors(model_dir / "model.safetensors"))

    # Embeddings: word[ids] + position[0..tokens) + type[0], then LayerNorm.
    # Position embeddings are the table's first `tokens` rows (a Slice up to the ids' second dimension).
    tokens = g.op("Shape", ["input_ids"], "tokens", start=1, end=2)
    zero = g.const("zero_1d", np.array([0], np.int64))
    positions = g.op("Slice", [g.weight("embeddings.position_embeddings.weight"), zero, tokens, zero], "pos")
    x = g.op("Gather", [g.weight("embeddings.word_embeddings.weight"), "input_ids"], "word", axis=0)
    x = g.op("Add", [x, positions], "add_pos")
    type0 = g.const("type_embedding_0", g.weights["embeddings.token_type_embeddings.weight"][0].astype(np.float32))
    x = g.layer_norm(g.op("Add", [x, type0], "add_type"), "embeddings.LayerNorm", eps)

    mask, bias = mask_bias(g)
    x = encoder_layers(g, cfg, x, bias)

    # Mean over the real tokens, then L2 normalisation (what sentence-transformers does for this model).
    mask3 = g.op("Unsqueeze", [mask, g.const("axis_2", np.array([2], np.int64))], "mask3")
    tokens_axis = g.const("tokens_axis", np.array([1], np.int64))
    summed = g.op("ReduceSum", [g.op("Mul", [x, mask3], "masked_hidden"), tokens_axis], "summed", keepdims=0)
    counts = g.op("Max", [g.op("ReduceSum", [mask, tokens_axis], "counts", keepdims=1),
                          g.const("tiny_count", np.array(1e-9, np.float32))], "counts_clamped")
    mean = g.op("Div", [summed, counts], "mean")
    norm = g.op("Max", [g.op("ReduceL2", [mean], "norm", axes=[1], keepdims=1),
                        g.const("tiny_norm", np.array(1e-12, np.float32))], "norm_clamped")
    g.nodes.append(helper.make_node("Div", [mean, norm], ["embedding"], name="embedding"))

    graph = helper.make_graph(
        g.nodes, "all-minilm-l6-v2",
        inputs=[helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
                helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"])],
        outputs=[helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])],
        initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="attest")
    model.ir_version = 8  # readable by every ONNX Runtime from 1.14 on
    onnx.checker.check_model(model, full_check=True)
    return model


def main(model_dir: Path, out: Path):
    model = build(model_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name("." + out.name + ".partial")
    tmp.write_bytes(model.SerializeToString(deterministic=True))
    tmp.replace(out)
    print(f"export_minilm: wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {len(model.graph.node)} nodes)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: export_minilm.py MODEL_DIR OUT.onnx")
    main(Path(sys.argv[1]), Path(sys.argv[2]))
