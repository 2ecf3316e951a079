"""Tests of finetune.py's encoder pass: the frozen layers get no gradient, the fused attention is the reader's own
function, and a passage's vector does not depend on the padding of its batch; and of export_onnx.py's mixed
precision: the matrices --keep-f32 names are found in the exported graph and left unquantised. They need PyTorch (the training
environment: `~/.cache/attest-train-venv/bin/python -m unittest discover -s scripts/embedders -p 'test_*.py'`)
and are skipped, saying so, without it.
"""
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch

    import export_onnx
    import finetune
    import quantise
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


@unittest.skipIf(torch is None, "needs PyTorch (the training environment)")
class MixedPrecisionExport(unittest.TestCase):
    def test_kept_matrices_run_in_float_and_the_rest_are_int8(self):
        import tempfile

        import numpy as np
        import onnx
        import onnxruntime as ort

        torch.manual_seed(0)
        model = finetune.Reader(CONFIG).eval()
        ids = torch.tensor([[1, 5, 6, 2], [1, 7, 8, 9]])
        feed = {"input_ids": ids.numpy(), "attention_mask": np.ones_like(ids.numpy()),
                "token_type_ids": np.zeros_like(ids.numpy())}
        names = list(feed)
        outputs = {}
        with tempfile.TemporaryDirectory() as tmp:
            f32 = f"{tmp}/f32.onnx"
            torch.onnx.export(export_onnx.Exported(model), (ids, torch.ones_like(ids), torch.zeros_like(ids)), f32,
                              input_names=names, output_names=["last_hidden_state"], opset_version=17, dynamo=False)
            for keep in ("", "value,dense_2", ",".join(quantise.KINDS)):
                path = f"{tmp}/q-{len(keep)}.onnx"
                kept = quantise.quantise(f32, path, keep)
                nodes = onnx.load(path).graph.node
                self.assertEqual(sum(n.op_type == "MatMulInteger" for n in nodes), 6 * 3 - len(kept), keep)
                self.assertTrue(set(kept) <= {n.name for n in nodes if n.op_type == "MatMul"})
                outputs[keep] = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feed)[0]
            with self.assertRaises(SystemExit):
                quantise.quantise(f32, f"{tmp}/bad.onnx", "values")
            self.assertEqual(len(quantise.layer_matmuls(onnx.load(f32).graph, "value,dense_2")), 2 * 3)
        want = model.encode(ids, torch.zeros_like(ids), torch.ones_like(ids)).detach().numpy()
        error = {keep: float(np.abs(out - want).max()) for keep, out in outputs.items()}
        # Every matrix kept (stored f16): the f32 model up to f16 rounding; fewer kept, more quantisation error.
        self.assertLess(error[",".join(quantise.KINDS)], 1e-2, error)
        self.assertLess(error[",".join(quantise.KINDS)], error[""], error)

@unittest.skipIf(torch is None, "needs PyTorch (the training environment)")
class Resume(unittest.TestCase):
    """A run paused after N steps and started again continues at step N with the same batches: its weights end
    equal to those of a run that never stopped."""

    def setUp(self):
        import tempfile

        from tokenizers import Tokenizer, models, pre_tokenizers

        words = [f"w{i}" for i in range(40)]
        self.tok = Tokenizer(models.WordLevel({w: i + 3 for i, w in enumerate(words)}, unk_token="w0"))
        self.tok.pre_tokenizer = pre_tokenizers.Whitespace()
        rng = random.Random(3)
        self.pairs = [(" ".join(rng.sample(words, 4)), " ".join(rng.sample(words, 6)), " ".join(rng.sample(words, 6)),
                       f"d{i % 7}") for i in range(24)]
        self.args = finetune.argparse.Namespace(lr=1e-3, temperature=0.05, frozen_layers=1, train_max_len=16, seed=5,
                                                device="cpu", checkpoint_every=2)
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def model(self):
        torch.manual_seed(0)
        return finetune.Reader({**CONFIG, "vocab_size": 128, "max_position_embeddings": 64})

    def test_a_paused_run_continues_where_it_stopped(self):
        steps = finetune.plan_steps(len(self.pairs), 4, 2)
        self.assertEqual(len(steps), 12)
        straight = self.model()
        torch.manual_seed(9)
        self.assertEqual(finetune.fit(straight, self.tok, self.pairs, steps, self.args, f"{self.tmp.name}/a.pt"),
                         (12, "done"))

        ckpt = f"{self.tmp.name}/b.pt"
        first = self.model()
        torch.manual_seed(9)
        self.assertEqual(finetune.fit(first, self.tok, self.pairs, steps, self.args, ckpt, stop_after=5), (5, "paused"))
        resumed = self.model()
        torch.manual_seed(1234)  # the checkpoint's random state, not this one, must be what the run goes on with
        self.assertEqual(finetune.fit(resumed, self.tok, self.pairs, steps, self.args, ckpt), (12, "done"))
        for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
            self.assertTrue(torch.allclose(a, b, atol=1e-6), name)
        self.assertFalse(torch.equal(straight.state_dict()["encoder.layer.2.output.dense.weight"],
                                     self.model().state_dict()["encoder.layer.2.output.dense.weight"]))

    def test_a_checkpoint_of_other_settings_is_refused(self):
        steps = finetune.plan_steps(len(self.pairs), 4, 1)
        ckpt = f"{self.tmp.name}/c.pt"
        finetune.fit(self.model(), self.tok, self.pairs, steps, self.args, ckpt, stop_after=2)
        self.args.lr = 2e-3
        with self.assertRaises(SystemExit):
            finetune.fit(self.model(), self.tok, self.pairs, steps, self.args, ckpt)
        self.args.lr = 1e-3
        with self.assertRaises(SystemExit):  # another plan: one step fewer
            finetune.fit(self.model(), self.tok, self.pairs, steps[:-1], self.args, ckpt)


if __name__ == "__main__":
    unittest.main()
