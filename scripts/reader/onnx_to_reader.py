"""Turns the reader's own int8 ONNX graph (export_onnx.py's reader.onnx) back into a reader.safetensors that
train.py can start a further round from (`--init`), dequantised to f32 (issue 41, round 9 starts from round 8's
graph as committed in 9f05b15, so that the CPU and a GPU start from the same weights).

Every weight is found by what it feeds, not by node names (the export names its nodes by the last module only):
the embeddings keep their parameter names (`reader.embeddings.*_quantized` with `_scale` and `_zero_point`); a
Linear's int8 weight feeds MatMulInteger -> Cast -> Mul -> Add, and that Add's other input is the Linear's bias,
which keeps its parameter name (`reader.encoder.layer.0.attention.self.query.bias`), so the weight is that name's
`.weight`. Weights are stored [in, out] with one scale and zero point per output column; they come back [out, in].

--check runs the graph under onnxruntime and model.Reader on the dequantised weights over a few pairs and fails
when a head logit differs by more than 1.5 or changes sign where the graph's is past ±1: the graph quantises its
activations to 8 bits per tensor at every layer, the f32 model does not (round 8's graph: largest difference 0.84
over logits of 2-5), while a weight mapped wrongly gives unrelated logits.

Usage: python scripts/reader/onnx_to_reader.py MODEL_DIR OUT.safetensors [--check]
       (MODEL_DIR holds reader.onnx, config.json, tokenizer.json; e.g. `git show 9f05b15:…/reader.onnx`)
"""

import argparse
import json
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(__file__))
from model import Reader, collate, pair_ids  # noqa: E402

PREFIX = "reader."  # export_onnx.py wraps the model as `Exported.reader`


def dequantise(q, scale, zero):
    return (q.astype(np.float32) - zero.astype(np.float32)) * scale.astype(np.float32)


def convert(path):
    graph = onnx.load(path).graph
    init = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    consumers = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)

    def next_op(output, op):
        found = [n for n in consumers.get(output, []) if n.op_type == op]
        assert len(found) == 1, (output, op, [n.name for n in consumers.get(output, [])])
        return found[0]

    state = {}
    for name, value in init.items():
        if name.endswith("_quantized") and name.startswith(f"{PREFIX}embeddings."):
            stem = name.removesuffix("_quantized")
            state[stem] = dequantise(value, init[f"{stem}_scale"], init[f"{stem}_zero_point"])
        elif not name.endswith(("_quantized", "_scale", "_zero_point")) and value.dtype == np.float32 \
                and name.startswith(PREFIX) and value.ndim == 1:
            state[name] = value  # biases and LayerNorm parameters keep their names
    for n in graph.node:
        if n.op_type != "MatMulInteger" or n.input[1] not in init:
            continue
        stem = n.input[1].removesuffix("_quantized")
        w = dequantise(init[n.input[1]], init[f"{stem}_scale"], init[f"{stem}_zero_point"])
        add = next_op(next_op(next_op(n.output[0], "Cast").output[0], "Mul").output[0], "Add")
        bias = next(i for i in add.input if i in init)
        assert bias.endswith(".bias"), bias
        weight = bias.removesuffix(".bias") + ".weight"
        assert weight not in state, weight
        state[weight] = np.ascontiguousarray(w.T)
    return {k.removeprefix(PREFIX): torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in state.items()}


def check(model_dir, state, config):
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    tok.no_truncation()
    tok.no_padding()
    pairs = [("Who won Super Bowl 50?", "The Denver Broncos defeated the Carolina Panthers 24-10.", "Super Bowl 50."),
             ("Where was Super Bowl 50 played?", "The game was played at Levi's Stadium.", "Super Bowl 50."),
             ("Who won Super Bowl 50?", "The 49ers won Super Bowl XIX.", "Super Bowl 50."),
             ("What PSU does the writer own?", "My PSU is a Corsair 650W.", "Help with my GPU."),
             ("Denver won Super Bowl 50.", "Super Bowl 50: the Denver Broncos defeated the Carolina Panthers.", None)]
    rows = [pair_ids(tok, q, s, c)[:2] for q, s, c in pairs]
    ids, types, mask = collate(rows)
    model = Reader(config).eval()
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    with torch.no_grad():
        heads, _ = model(ids, types, mask)
    session = ort.InferenceSession(f"{model_dir}/reader.onnx", providers=["CPUExecutionProvider"])
    ref = session.run(None, {"input_ids": ids.numpy(), "token_type_ids": types.numpy(),
                             "attention_mask": mask.numpy()})[0]
    ours = heads.numpy()
    diff = float(np.abs(ours - ref).max())
    decisive = np.abs(ref) > 1.0
    flipped = int((np.sign(ours) != np.sign(ref))[decisive].sum())
    print(f"dequantised reader vs the int8 graph on {len(rows)} pairs: head logits max |diff| {diff:.3f}, "
          f"{flipped} decisive signs flipped")
    assert diff <= 1.5 and flipped == 0, "the weights do not reproduce the graph"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model_dir")
    p.add_argument("out")
    p.add_argument("--check", action="store_true")
    args = p.parse_args()
    config = json.load(open(f"{args.model_dir}/config.json"))
    state = convert(f"{args.model_dir}/reader.onnx")
    meta = {"format": "attest-reader-1", "from": "reader.onnx (int8, dequantised)"}
    for key in ("span_blend", "max_len", "max_first"):
        if key in config:
            meta[key] = str(config[key])
    save_file({k: v.contiguous() for k, v in state.items()}, args.out, metadata=meta)
    print(f"wrote {args.out}: {len(state)} tensors")
    if args.check:
        check(args.model_dir, state, config)


if __name__ == "__main__":
    main()
