"""choose_bars.py keeps the grid's settings that meet every limit (a kind of text included) and ranks them by the
chosen set's coverage; a set the grid lacks is an error, not a silent pass."""

import json
import pathlib
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import choose_bars  # noqa: E402

SCRIPT = pathlib.Path(__file__).resolve().parent / "choose_bars.py"


def figures(hallucination, coverage, kinds=None):
    rate = lambda r: {"rate": r, "n": 100, "hits": round(100 * r), "lo": 0, "hi": 1}  # noqa: E731
    return {"hallucination": rate(hallucination), "coverage": rate(coverage),
            "by_domain": {k: {"hallucination": rate(h), "coverage": rate(0.9)} for k, h in (kinds or {}).items()}}


def row(setting, squad, company, reddit):
    return {"setting": setting, "sets": [
        {"file": "/tmp/pair/slice.jsonl", "figures": figures(*squad)},
        {"file": "/tmp/pair/company-dev.jsonl", "figures": figures(*company)},
        {"file": "/tmp/pair/reddit-slice.jsonl", "figures": figures(*reddit)},
    ]}


GRID = [
    row("lax", (0.03, 0.85), (0.01, 0.95, {"api": 0.02}), (0.04, 0.5)),     # squad hallucination over 2%
    row("good", (0.01, 0.78), (0.01, 0.95, {"api": 0.02}), (0.04, 0.45)),
    row("better", (0.02, 0.80), (0.02, 0.95, {"api": 0.05}), (0.05, 0.41)),  # at the limits: meets them
    row("one kind", (0.0, 0.90), (0.03, 0.95, {"api": 0.12}), (0.02, 0.45)),  # a kind of text over 10%
    row("tight", (0.0, 0.70), (0.0, 0.90, {"api": 0.0}), (0.0, 0.30)),       # coverage under the floors
]


class Choose(unittest.TestCase):
    def test_only_settings_meeting_every_limit_pass_ranked_by_the_chosen_sets_coverage(self):
        passing, n = choose_bars.choose(GRID, choose_bars.DEFAULT_LIMITS, 0.10, "slice")
        self.assertEqual(n, 5)
        self.assertEqual([s for s, _ in passing], ["better", "good"])
        passing, _ = choose_bars.choose(GRID, choose_bars.DEFAULT_LIMITS, 0.10, "reddit-slice")
        self.assertEqual([s for s, _ in passing], ["good", "better"])

    def test_why_a_setting_misses(self):
        sets = choose_bars.sets_of(GRID[3])
        self.assertEqual(choose_bars.misses(sets, choose_bars.DEFAULT_LIMITS, 0.10),
                         ["company-dev a kind of text at 0.120 > 0.1"])

    def test_a_limit_on_a_set_the_grid_lacks_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "not \\['wiki'\\]"):
            choose_bars.choose(GRID, {"wiki": (0.02, 0.7)}, 0.10, "slice")

    def test_the_command_exits_1_when_nothing_passes(self):
        with tempfile.TemporaryDirectory() as d:
            grid = pathlib.Path(d) / "grid.json"
            grid.write_text(json.dumps(GRID))
            ok = subprocess.run([sys.executable, str(SCRIPT), str(grid)], capture_output=True, text=True)
            self.assertEqual(ok.returncode, 0, ok.stderr)
            self.assertIn("2 of 5 settings meet", ok.stdout)
            self.assertLess(ok.stdout.index("better"), ok.stdout.index("good"))
            none = subprocess.run([sys.executable, str(SCRIPT), str(grid), "--limit", "slice=0:0.95"],
                                  capture_output=True, text=True)
            self.assertEqual(none.returncode, 1)
            self.assertIn("0 of 5 settings meet", none.stdout)


if __name__ == "__main__":
    unittest.main()
