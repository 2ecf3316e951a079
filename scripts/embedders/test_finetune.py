"""Tests of finetune.py's encoder pass: the frozen layers get no gradient, the fused attention is the reader's own
function, and a passage's vector does not depend on the padding of its batch. They need PyTorch (the training
environment: `~/.cache/attest-train-venv/bin/python -m unittest discover -s scripts/embedders -p 'test_*.py'`)
and are skipped, saying so, without it.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch

    import finetune
except ImportError:  # the pinned ONNX environment of `make test` has no PyTorch
    torch = None

CONFIG = {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 3, "num_attention_heads": 2,
          "vocab_size": 50, "max_position_embeddings": 32, "type_vocab_size": 2}


@unittest.skipIf(torch is None, "needs PyTorch (the training environment)")
class EncoderPass(unittest.TestCase):
    def model(self):
        torch.manual_seed(0)
        return finetune.Reader(CONFIG)

    def test_frozen_layers_get_no_gradient(self):
        model = self.model()
        v = finetune.embed_rows(model, [[101 % 50, 7, 9, 102 % 50], [3, 4]], frozen=2)
        v.sum().backward()
        for name, p in model.named_parameters():
            trained = name.startswith("encoder.layer.2.")
            if name.startswith(("embeddings.", "encoder.layer.")):
                self.assertEqual(p.grad is not None, trained, name)

    def test_fused_attention_is_the_readers_function(self):
        model = self.model()
        x = torch.randn(2, 5, 8)
        bias = torch.zeros(2, 1, 1, 5)
        bias[1, ..., 3:] = -10000.0
        layer = model.encoder.layer[0]
        fused = finetune.fused_attention_forward(layer, x, bias)
        manual = finetune.READER_LAYER_FORWARD(layer, x, bias)
        self.assertTrue(torch.allclose(fused, manual, atol=1e-5))

    def test_a_vector_does_not_depend_on_its_batch(self):
        model = self.model().eval()
        with torch.no_grad():
            alone = finetune.embed_rows(model, [[5, 6, 7]])
            padded = finetune.embed_rows(model, [[5, 6, 7], [1, 2, 3, 4, 5, 6, 7, 8]])
        self.assertTrue(torch.allclose(alone[0], padded[0], atol=1e-5))
        self.assertAlmostEqual(float(alone[0].norm()), 1.0, places=5)


if __name__ == "__main__":
    unittest.main()
