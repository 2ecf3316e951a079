"""Tests of safetensors_to_onnx.py: the reader's ONNX graph computes model.Reader, and gives its weights back.

Run by `make test` with the ONNX venv's Python (scripts/install-onnxruntime.sh installs onnx, onnxruntime and
numpy there); a tiny random reader (2 layers, hidden 8) written here, so no model or PyTorch is needed.
"""

import hashlib
import json
import os
import tempfile
import unittest

import numpy as np

from safetensors_to_onnx import back, check, convert, write_safetensors

CONFIG = {"hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 2, "intermediate_size": 16,
          "vocab_size": 50, "max_position_embeddings": 64, "type_vocab_size": 2, "layer_norm_eps": 1e-12}
META = {"format": "attest-reader-1", "span_blend": "0.5", "max_len": "128", "max_first": "48"}


def tiny_reader(seed=3):
    """Random f16 weights under every name model.Reader has."""
    rng = np.random.default_rng(seed)
    h, i = CONFIG["hidden_size"], CONFIG["intermediate_size"]
    shapes = {"embeddings.word_embeddings.weight": (CONFIG["vocab_size"], h),
              "embeddings.position_embeddings.weight": (CONFIG["max_position_embeddings"], h),
              "embeddings.token_type_embeddings.weight": (2, h),
              "embeddings.LayerNorm.weight": (h,), "embeddings.LayerNorm.bias": (h,),
              "reader.pooler.weight": (h, h), "reader.pooler.bias": (h,),
              "reader.answerable.weight": (1, h), "reader.answerable.bias": (1,),
              "reader.supported.weight": (1, h), "reader.supported.bias": (1,),
              "reader.span.weight": (2, h), "reader.span.bias": (2,)}
    for n in range(CONFIG["num_hidden_layers"]):
        p = f"encoder.layer.{n}"
        for m in ("query", "key", "value"):
            shapes |= {f"{p}.attention.self.{m}.weight": (h, h), f"{p}.attention.self.{m}.bias": (h,)}
        shapes |= {f"{p}.attention.output.dense.weight": (h, h), f"{p}.attention.output.dense.bias": (h,),
                   f"{p}.attention.output.LayerNorm.weight": (h,), f"{p}.attention.output.LayerNorm.bias": (h,),
                   f"{p}.intermediate.dense.weight": (i, h), f"{p}.intermediate.dense.bias": (i,),
                   f"{p}.output.dense.weight": (h, i), f"{p}.output.dense.bias": (h,),
                   f"{p}.output.LayerNorm.weight": (h,), f"{p}.output.LayerNorm.bias": (h,)}
    return {k: rng.normal(0, 0.5, shape).astype(np.float16) for k, shape in shapes.items()}


class ReaderGraph(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        root = self.dir.name
        self.weights, self.model_dir, self.out = f"{root}/reader.safetensors", f"{root}/model", f"{root}/out"
        os.makedirs(self.model_dir)
        with open(f"{self.model_dir}/config.json", "w") as f:
            json.dump(CONFIG, f)
        with open(f"{self.model_dir}/tokenizer.json", "w") as f:
            f.write("{}")
        self.tensors = tiny_reader()
        write_safetensors(self.weights, self.tensors, META)
        convert(self.weights, self.model_dir, self.out, check_graph=True)

    def tearDown(self):
        self.dir.cleanup()

    def test_the_graph_computes_the_reader_and_not_another(self):
        self.assertLess(check(f"{self.out}/reader.onnx", self.tensors, CONFIG), 1e-4)
        swapped = dict(self.tensors)
        swapped["reader.answerable.weight"], swapped["reader.supported.weight"] = (
            self.tensors["reader.supported.weight"], self.tensors["reader.answerable.weight"])
        with self.assertRaises(SystemExit):
            check(f"{self.out}/reader.onnx", swapped, CONFIG)

    def test_the_config_carries_the_weights_metadata_and_the_sums_match(self):
        config = json.load(open(f"{self.out}/config.json"))
        self.assertEqual((config["span_blend"], config["max_len"], config["max_first"]), (0.5, 128, 48))
        sums = dict(reversed(line.split()) for line in open(f"{self.out}/reader.sha256"))
        self.assertEqual(set(sums), {"config.json", "tokenizer.json", "reader.onnx"})
        with open(f"{self.out}/reader.onnx", "rb") as f:
            self.assertEqual(sums["reader.onnx"], hashlib.sha256(f.read()).hexdigest())

    def test_back_gives_the_weights_bit_for_bit_and_a_second_export_the_same_bytes(self):
        back(self.out, f"{self.dir.name}/back.safetensors")
        with open(self.weights, "rb") as a, open(f"{self.dir.name}/back.safetensors", "rb") as b:
            self.assertEqual(a.read(), b.read())
        again = f"{self.dir.name}/again"
        convert(f"{self.dir.name}/back.safetensors", self.model_dir, again)
        with open(f"{self.out}/reader.onnx", "rb") as a, open(f"{again}/reader.onnx", "rb") as b:
            self.assertEqual(a.read(), b.read())


if __name__ == "__main__":
    unittest.main()
