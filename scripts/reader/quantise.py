"""Dynamic int8 quantisation of an exported BERT graph, with the matrices that lose most left in floating point.

Used by both exports of the model.Reader encoder: the dense lane's fine-tuned embedder
(scripts/embedders/export_onnx.py) and the bge-small reader (scripts/reader/export_onnx.py). Every layer MatMul is
quantised per output channel (ONNX Runtime's `quantize_dynamic`: int8 weights, activations quantised to 8 bits per
tensor at run time) except the kinds named in `keep`, which stay floating point. Those are stored as f16
initializers behind a Cast to f32, as safetensors_to_onnx.py stores the MiniLM reader: ONNX Runtime folds the Cast
into an f32 constant when it loads the graph, so they run in f32 while the file grows by half their f32 size (the
repository takes models up to 50 MB).

Why `value` and `dense_2` (the feed-forward output): on the first fine-tuned embedder, keeping one kind of matrix
at a time, those two moved its vectors closest to the f32 model's (cosine mean 0.9929 all int8; value kept 0.9948,
dense_2 kept 0.9975, both 0.9985; query, key and the attention output ~0.993): they write straight into the
residual stream, and dense_2's input, after GELU, has the widest range of any activation quantised per tensor
(docs/decisions/embedders.md "Which matrices stay f32").

Why 8-bit weights are stored unsigned: ONNX Runtime multiplies a u8 activation by an s8 weight on AVX2 CPUs without
VNNI (AMD Zen 3, Intel before Ice Lake) with VPMADDUBSW, whose pairwise sum saturates at 16 bits once |w| > 64
(2 x 255 x 65 > 32,767); with VNNI it accumulates in 32 bits. The same graph then gives other vectors on other CPUs
(the fine-tuned embedder: cosine 0.993 between the two). As u8 weights with their zero point moved by 128 — the same
integers — the U8U8 kernel widens before it multiplies and every CPU computes the exact product
(`unsigned_weights`). The readers' 7-bit weights (`reduce_range`, at most 64) never reach the bound and stay as
they are.
"""

import sys

import numpy as np

KINDS = ("query", "key", "value", "dense", "dense_1", "dense_2")
DEFAULT_KEEP = "value,dense_2"


def layer_matmuls(graph, kinds):
    """Names of the graph's MatMul nodes `.../layer.N/<kind>/MatMul` for the comma-separated `kinds`."""
    wanted = {k.strip() for k in kinds.split(",") if k.strip()}
    if wanted - set(KINDS):
        raise SystemExit(f"unknown kinds of matrix {sorted(wanted - set(KINDS))} (known: {', '.join(KINDS)})")
    names = []
    for node in graph.node:
        parts = node.name.split("/")
        if (node.op_type == "MatMul" and len(parts) >= 4 and parts[-1] == "MatMul" and parts[-2] in wanted
                and parts[-3].startswith("layer.")):
            names.append(node.name)
    if wanted and not names:
        raise SystemExit(f"no MatMul of the kinds {sorted(wanted)} in the exported graph")
    return names


def store_half(model, node_names):
    """Rewrites the f32 weight initializers of the named MatMuls as f16 initializers behind a Cast to f32."""
    from onnx import TensorProto, helper, numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    casts = []
    for node in model.graph.node:
        if node.name not in node_names:
            continue
        weight = next((name for name in node.input if name in inits), None)
        if weight is None:
            raise SystemExit(f"{node.name}: no weight initializer among its inputs")
        init = inits.pop(weight)
        half = numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), f"{weight}_f16")
        model.graph.initializer.remove(init)
        model.graph.initializer.append(half)
        casts.append(helper.make_node("Cast", [half.name], [weight], name=f"{weight}_to_f32", to=TensorProto.FLOAT))
    # A Cast's output must exist before its reader: the casts go first (they read initializers only).
    for cast in reversed(casts):
        model.graph.node.insert(0, cast)


def unsigned_weights(model):
    """Rewrites every MatMulInteger's int8 weight initializer and zero point as uint8 shifted by 128: the same
    integer product, computed without 16-bit saturation on every CPU (the module's docstring). Returns the count."""
    from onnx import TensorProto, numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    changed = 0
    for node in model.graph.node:
        if node.op_type != "MatMulInteger" or len(node.input) < 4:
            continue
        weight, zero_point = inits.get(node.input[1]), inits.get(node.input[3])
        if weight is None or zero_point is None or weight.data_type != TensorProto.INT8:
            continue
        for init in (weight, zero_point):
            shifted = (numpy_helper.to_array(init).astype(np.int16) + 128).astype(np.uint8)
            init.CopyFrom(numpy_helper.from_array(shifted, init.name))
        changed += 1
    return changed


def quantise(f32_path, out_path, keep=DEFAULT_KEEP, reduce_range=False):
    """Writes `out_path`: `f32_path` quantised to int8 except the `keep` kinds (f16-stored). Returns the kept names."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    kept = layer_matmuls(onnx.load(f32_path).graph, keep)
    quantize_dynamic(f32_path, out_path, weight_type=QuantType.QInt8, per_channel=True, reduce_range=reduce_range,
                     nodes_to_exclude=kept)
    model = onnx.load(out_path)
    if kept:
        store_half(model, set(kept))
    if not reduce_range:
        unsigned_weights(model)
    onnx.checker.check_model(model)
    onnx.save(model, out_path)
    return kept


if __name__ == "__main__":
    # quantise.py --unsigned IN OUT: an already exported graph's 8-bit weights made unsigned (no other change).
    if len(sys.argv) != 4 or sys.argv[1] != "--unsigned":
        raise SystemExit("usage: quantise.py --unsigned IN.onnx OUT.onnx")
    import onnx

    graph = onnx.load(sys.argv[2])
    print(f"{unsigned_weights(graph)} weight matrices made unsigned")
    onnx.checker.check_model(graph)
    onnx.save(graph, sys.argv[3])
