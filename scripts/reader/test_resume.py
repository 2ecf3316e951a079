"""Training resumes where it stopped (issue 68): a run stopped after N steps and started again continues at step N,
with the same batches in the same order, and ends where an uninterrupted run ends.

Two layers. `Bookkeeping` needs only the standard library: schedule.py's plan and step loop driven by a tiny
pure-Python model whose whole state (weights, momentum, its own random stream) goes into the checkpoint, as
train.py's weights, optimiser, scheduler and RNG state do — it runs in the pinned ONNX environment `make test` uses,
which has no PyTorch. `TrainPy` runs train.py itself on a tiny random BERT (2 layers, hidden size 8) from a built
examples file, stopped by `--stop-after-steps` and rerun, and compares its batch log and exported weights, tensor
for tensor, with an uninterrupted run's; it needs PyTorch and safetensors (the training environment,
~/.cache/attest-train-venv: `$VENV/bin/python -m unittest discover -s scripts/reader -p 'test_*.py'`) and is
skipped, saying so, without them.
"""

import gzip
import io
import json
import os
import pickle
import random
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from schedule import PAUSED_EXIT, PlanMismatch, Progress, fingerprint, plan, run_steps, stop_on_signals  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


class Tiny:
    """A linear model trained by SGD with momentum and a random "dropout" of its features, drawn from its own
    random stream: a resumed run ends with the same weights only if all three were checkpointed and restored."""

    def __init__(self, rows):
        self.features = [[((i * 7 + k * 3) % 11) / 10 for k in range(4)] for i in range(rows)]
        self.targets = [(i % 3) / 2 for i in range(rows)]
        self.w, self.m, self.rng = [0.0] * 4, [0.0] * 4, random.Random(5)

    def update(self, batch):
        grad, loss = [0.0] * 4, 0.0
        for i in batch:
            keep = [self.rng.random() > 0.2 for _ in range(4)]
            x = [f if k else 0.0 for f, k in zip(self.features[i], keep)]
            err = sum(w * f for w, f in zip(self.w, x)) - self.targets[i]
            loss += err * err / len(batch)
            grad = [g + 2 * err * f / len(batch) for g, f in zip(grad, x)]
        self.m = [0.9 * m + g for m, g in zip(self.m, grad)]
        self.w = [w - 0.05 * m for w, m in zip(self.w, self.m)]
        return loss

    def state(self):
        return {"w": self.w, "m": self.m, "rng": self.rng.getstate()}

    def restore(self, s):
        self.w, self.m = s["w"], s["m"]
        self.rng.setstate(s["rng"])


def session(work, lengths, batch=4, stop_after=0, should_stop=lambda step: False):
    """One run of a round in `work` (as train.py: a fresh model, the checkpoint loaded when there is one):
    (step reached, why it stopped, [(step, row ids)] trained, final weights, what it printed)."""
    model, trained, log = Tiny(len(lengths)), [], io.StringIO()
    ckpt = os.path.join(work, "checkpoint.pkl")

    def train_step(step, rows):
        trained.append((step, list(rows)))
        return len(rows), model.update(rows)

    def load():
        if not os.path.exists(ckpt):
            return None
        with open(ckpt, "rb") as f:
            saved = pickle.load(f)
        model.restore(saved["model"])
        return saved["meta"]

    def save(meta):
        with open(ckpt + ".tmp", "wb") as f:
            pickle.dump({"model": model.state(), "meta": meta}, f)
        os.replace(ckpt + ".tmp", ckpt)

    steps = plan(lengths, batch, seed=11, epochs=2)
    step, why, _ = run_steps(steps, train_step, load, save, checkpoint_every=5, where=ckpt, stop_after=stop_after,
                             should_stop=lambda: should_stop(len(trained)), log=log, progress_every=3)
    return step, why, trained, model.w, log.getvalue()


LENGTHS = [(i * 37) % 23 + 3 for i in range(90)]


class Bookkeeping(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def work(self, name):
        path = os.path.join(self.dir.name, name)
        os.makedirs(path)
        return path

    def test_a_stopped_run_continues_at_its_step_in_the_same_order(self):
        total, why, whole, weights, _ = session(self.work("whole"), LENGTHS)
        self.assertEqual((total, why), (len(plan(LENGTHS, 4, 11, 2)), "done"))
        work = self.work("pieces")
        # 7 is not a multiple of the checkpoint interval (5): the stop itself must write the checkpoint.
        step, why, first, _, log = session(work, LENGTHS, stop_after=7)
        self.assertEqual((step, why), (7, "paused"))
        self.assertIn("paused at step 7/", log)
        step, why, second, resumed, log = session(work, LENGTHS)
        self.assertEqual((step, why), (total, "done"))
        self.assertIn(f"resuming at step 7/{total} from {work}/checkpoint.pkl", log)
        self.assertEqual(second[0][0], 7, "the resumed run did not start at the step the first one stopped at")
        self.assertEqual(first + second, whole, "the resumed run's batches are not the uninterrupted run's")
        self.assertEqual(resumed, weights, "model, momentum or random state was not carried over")

    def test_a_round_spread_over_several_runs_equals_one_run(self):
        _, _, whole, weights, _ = session(self.work("whole"), LENGTHS)
        work, trained, runs = self.work("pieces"), [], 0
        while True:
            step, why, part, w, _ = session(work, LENGTHS, stop_after=6)
            trained += part
            runs += 1
            if why == "done":
                break
            self.assertEqual(step, 6 * runs)
        self.assertGreater(runs, 3)
        self.assertEqual(trained, whole)
        self.assertEqual(w, weights)

    def test_a_signal_stops_after_the_step_under_way_and_checkpoints(self):
        _, _, whole, weights, _ = session(self.work("whole"), LENGTHS)
        work = self.work("signalled")
        step, why, first, _, _ = session(work, LENGTHS, should_stop=lambda done: done >= 3)
        self.assertEqual((step, why), (3, "paused"))
        _, _, second, w, _ = session(work, LENGTHS)
        self.assertEqual(first + second, whole)
        self.assertEqual(w, weights)

    def test_sigterm_asks_the_loop_to_stop_once_and_a_second_kills(self):
        import signal

        saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
        self.addCleanup(lambda: (signal.signal(signal.SIGINT, saved[0]), signal.signal(signal.SIGTERM, saved[1])))
        log = io.StringIO()
        should_stop = stop_on_signals(log)
        self.assertFalse(should_stop())
        os.kill(os.getpid(), signal.SIGTERM)
        self.assertTrue(should_stop())
        self.assertIn("signal 15: stopping after this step", log.getvalue())
        self.assertEqual(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)
        self.assertNotEqual(signal.getsignal(signal.SIGINT), signal.SIG_DFL)

    def test_a_checkpoint_of_another_plan_is_refused(self):
        work = self.work("other")
        session(work, LENGTHS, stop_after=4)
        with self.assertRaises(PlanMismatch):
            session(work, LENGTHS, batch=5)

    def test_the_plan_is_drawn_from_the_seed_alone_and_covers_every_row_each_epoch(self):
        a, b = plan(LENGTHS, 4, 11, 2), plan(list(LENGTHS), 4, 11, 2)
        self.assertEqual(a, b)
        self.assertEqual(fingerprint(a), fingerprint(b))
        self.assertNotEqual(fingerprint(a), fingerprint(plan(LENGTHS, 4, 12, 2)))
        half = len(a) // 2
        for epoch in (a[:half], a[half:]):
            self.assertEqual(sorted(i for batch in epoch for i in batch), list(range(len(LENGTHS))))
        self.assertNotEqual(a[:half], a[half:], "each epoch should come in a new order")

    def test_progress_prints_step_total_rate_and_eta(self):
        now = [0.0]
        out = io.StringIO()
        p = Progress(total=100, start=40, every=10, out=out, clock=lambda: now[0])
        for s in range(41, 51):
            now[0] += 0.5
            p.step(s, 16, 0.25)
        # 10 steps of 16 rows in 5 s: 32 rows/s; 50 steps left at 0.5 s each: 25 s, "0 min".
        self.assertEqual(out.getvalue(), "step 50/100 loss 0.250 32.0 rows/s eta 0 min\n")


try:
    import safetensors  # noqa: F401
    import torch
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

CONFIG = {"vocab_size": 40, "hidden_size": 8, "intermediate_size": 16, "num_attention_heads": 2,
          "num_hidden_layers": 2, "max_position_embeddings": 64, "type_vocab_size": 2}


@unittest.skipUnless(HAVE_TORCH, "PyTorch and safetensors are not in this Python environment (the pinned ONNX one "
                                 "has neither): train.py's own resume is tested in the training environment, "
                                 "~/.cache/attest-train-venv; the bookkeeping is tested above")
class TrainPy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        root = cls.dir.name
        sys.path.insert(0, HERE)
        from model import Reader
        from safetensors.torch import save_file

        base = f"{root}/base"
        os.makedirs(base)
        with open(f"{base}/config.json", "w") as f:
            json.dump(CONFIG, f)
        with open(f"{base}/tokenizer.json", "w") as f:
            f.write("{}")  # copied into the output, never read: the examples are built already
        torch.manual_seed(0)
        save_file({k: v.contiguous() for k, v in Reader(CONFIG).state_dict().items()}, f"{root}/init.safetensors")
        rng = random.Random(3)

        def row(task, kind):
            n = rng.randint(6, 30)
            ids = [rng.randint(1, CONFIG["vocab_size"] - 1) for _ in range(n)]
            types = [0] * (n // 3) + [1] * (n - n // 3)
            label = rng.randint(0, 1)
            lo, hi = n // 3, n - 1
            span = [lo + 1, lo + 2] if (task == 0 and label) else ([0, 0] if task == 0 else [-1, -1])
            return [ids, types, task, label, kind, [lo, hi] + span]

        train = [row(i % 2, "answer_removed" if i % 2 == 0 else "synthetic") for i in range(60)]
        heldout = [row(t, k) for t, k in [(0, "answer"), (0, "answer_removed")] * 3 + [(1, "synthetic")] * 4]
        cls.examples = f"{root}/examples.json.gz"
        with gzip.open(cls.examples, "wt") as f:
            json.dump([train, heldout], f)
        cls.root = root

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def train(self, name, *flags):
        work = f"{self.root}/{name}"
        cmd = [sys.executable, f"{HERE}/train.py", "--examples", self.examples, "--base", f"{self.root}/base",
               "--init", f"{self.root}/init.safetensors", "--out", f"{work}/out", "--work", work,
               "--batch-log", f"{work}/batches.log", "--batch", "4", "--epochs", "2", "--seed", "3",
               "--threads", "1", "--frozen-layers", "0", "--span-weight", "1.0", "--checkpoint-every", "4",
               "--kind-weight", "answer_removed=2", *flags]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300)

    def read(self, path, mode="r"):
        with open(path, mode) as f:
            return f.read()

    def test_train_py_stopped_and_rerun_ends_as_one_run(self):
        whole = self.train("whole")
        self.assertEqual(whole.returncode, 0, whole.stderr)
        total = len(self.read(f"{self.root}/whole/batches.log").splitlines())
        self.assertEqual(total, 30)  # 60 rows, batches of 4, 2 epochs
        first = self.train("pieces", "--stop-after-steps", "7")
        self.assertEqual(first.returncode, PAUSED_EXIT, first.stderr)
        self.assertIn("paused at step 7/30", first.stderr)
        self.assertFalse(os.path.exists(f"{self.root}/pieces/out/reader.safetensors"), "a paused run exported")
        second = self.train("pieces")
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertIn(f"resuming at step 7/30 from {self.root}/pieces/checkpoint.pt", second.stderr)
        log = self.read(f"{self.root}/pieces/batches.log").splitlines()
        self.assertEqual(log[7].split()[0], "7", "the rerun did not continue at step 7")
        self.assertEqual(log, self.read(f"{self.root}/whole/batches.log").splitlines())
        from safetensors.torch import load_file

        # Tensor by tensor (the file's metadata is written in no fixed order).
        resumed, whole = (load_file(f"{self.root}/{w}/out/reader.safetensors") for w in ("pieces", "whole"))
        self.assertEqual(resumed.keys(), whole.keys())
        differ = [k for k in whole if not torch.equal(resumed[k], whole[k])]
        self.assertEqual(differ, [], "the resumed run's weights differ: optimiser, scheduler or RNG state was "
                                     "not restored")
        report = json.loads(self.read(f"{self.root}/pieces/out/report.json"))
        self.assertEqual(report["steps"], 30)


if __name__ == "__main__":
    unittest.main()
