"""The order a reader round trains in and where it stands: the plan of batches, the step loop, its checkpoints and
its progress (issue 68: a round takes hours on this CPU, so it is spread over several runs).

No PyTorch here, on purpose: test_resume.py checks the bookkeeping that makes a resumed run exact (same batches
from the step it stopped at, a checkpoint at every stop) in the pinned ONNX environment `make test` runs, which has
no PyTorch; train.py brings the model, the optimiser and their state through the `load`/`save`/`train_step`
callbacks of `run_steps`.

- `plan`: every epoch's batches, drawn once from `--seed` before the first step, so a resumed run rebuilds the same
  list and only needs the step it stopped at; `fingerprint` names the plan, and a checkpoint written for another
  plan (other rows, batch size, seed or epochs) is refused rather than continued in a different order.
- `run_steps`: trains from the checkpoint's step to the end (or `max_steps`), writes a checkpoint every
  `checkpoint_every` steps and at every stop, and stops early, resumable, after `stop_after` steps of this run or
  when `should_stop()` turns true (train.py: SIGINT/SIGTERM).
- `Progress`: step/total, rows/s over this run, ETA, to stderr.
- `stop_on_signals`: SIGINT/SIGTERM end the run after the step under way (the `should_stop` of `run_steps`).
"""

import hashlib
import json
import random
import signal
import sys
import time

# What a run that stopped before the end of its plan exits with (EX_TEMPFAIL): rerun the same command to continue.
PAUSED_EXIT = 75


def batches(lengths, batch, rng):
    """Batches of similar length (less padding), in a seeded random order: row indices, `lengths[i]` the tokens
    of row i. (Rounds 1-10 were trained in this order; keep the draws as they are.)"""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    chunks = [order[i : i + batch * 50] for i in range(0, len(order), batch * 50)]
    out = []
    for c in chunks:
        c.sort(key=lambda i: lengths[i])
        out += [c[i : i + batch] for i in range(0, len(c), batch)]
    rng.shuffle(out)
    return out


def plan(lengths, batch, seed, epochs):
    """Every step's batch for the whole round, each epoch in a new order, from `seed` alone."""
    order = random.Random(seed + 1)
    return [b for _ in range(epochs) for b in batches(lengths, batch, order)]


def fingerprint(steps):
    """A short name of a plan: equal plans, equal names."""
    return hashlib.sha256(json.dumps(steps, separators=(",", ":")).encode()).hexdigest()[:16]


def stop_on_signals(log=None):
    """Makes SIGINT and SIGTERM ask the step loop to stop after the step under way (a second signal kills, as
    usual); returns the `should_stop` callable for `run_steps`."""
    stopping = []

    def stop(signum, _frame):
        stopping.append(signum)
        signal.signal(signum, signal.SIG_DFL)
        print(f"signal {signum}: stopping after this step", file=log or sys.stderr, flush=True)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    return lambda: bool(stopping)


class PlanMismatch(Exception):
    pass


class Progress:
    """Prints `step S/T loss L R rows/s eta M min` every `every` steps (and at the last), to `out`; the rate is this
    run's, so a resumed run's ETA is not diluted by the time before it stopped."""

    def __init__(self, total, start, every=20, out=None, clock=time.monotonic):
        self.total, self.start, self.every = total, start, every
        self.out, self.clock = out or sys.stderr, clock
        self.began, self.rows = clock(), 0

    def rate(self):
        return self.rows / max(self.clock() - self.began, 1e-9)

    def step(self, step, rows, loss):
        self.rows += rows
        if step % self.every and step != self.total:
            return
        rate = self.rate()
        done = step - self.start
        per_step = (self.clock() - self.began) / max(done, 1)
        eta = (self.total - step) * per_step / 60
        print(f"step {step}/{self.total} loss {loss:.3f} {rate:.1f} rows/s eta {eta:.0f} min", file=self.out,
              flush=True)


def run_steps(steps, train_step, load, save, checkpoint_every, *, where="checkpoint", stop_after=0, max_steps=0,
              time_limit=0, should_stop=lambda: False, log=None, clock=time.monotonic, progress_every=20):
    """Trains `steps` (a `plan`) from where the last checkpoint stopped.

    train_step(step, batch) -> (rows, loss) trains one batch; load() -> the last checkpoint's `meta` (what `save`
    was given) or None; save(meta) writes a checkpoint with meta = {"step", "plan", "elapsed"} (the step to start
    at next time, the plan's fingerprint, seconds trained so far). Returns (step, why, seconds): why is "done"
    when the plan (or `max_steps` of it) is trained, "time limit" when `time_limit` seconds ran out (train.py
    reports and exports then, as before), "paused" when `stop_after` steps of this run are done or `should_stop()` — a checkpoint is
    written at every stop, so a rerun continues at `step`, in the same order; seconds: trained over all runs."""
    log = log or sys.stderr
    name = fingerprint(steps)
    planned = len(steps)
    end = min(planned, max_steps) if max_steps else planned
    meta = load()
    step, elapsed = 0, 0.0
    if meta:
        if meta["plan"] != name:
            raise PlanMismatch(f"{where} was written for another plan ({meta['plan']}, this run's is {name}: other "
                               "rows, batch size, seed or epochs); remove it or use another --work")
        step, elapsed = meta["step"], meta.get("elapsed", 0.0)
        print(f"resuming at step {step}/{end} from {where}", file=log, flush=True)
    else:
        print(f"starting at step 0/{end} ({planned} planned)", file=log, flush=True)
    progress = Progress(end, step, progress_every, log, clock)
    began, first = clock(), step

    def seconds():
        return elapsed + clock() - began

    def checkpoint():
        save({"step": step, "plan": name, "elapsed": seconds()})

    while step < end:
        if time_limit and clock() - began > time_limit:
            print(f"time limit: stopped at step {step}/{end}", file=log, flush=True)
            checkpoint()
            return step, "time limit", seconds()
        if (stop_after and step - first >= stop_after) or should_stop():
            checkpoint()
            print(f"paused at step {step}/{end} ({progress.rate():.1f} rows/s), checkpoint {where}: rerun the "
                  "same command to continue", file=log, flush=True)
            return step, "paused", seconds()
        rows, loss = train_step(step, steps[step])
        step += 1
        progress.step(step, rows, loss)
        if step % checkpoint_every == 0 or step == end:
            checkpoint()
    return step, "done", seconds()

