"""`scripts/train-reader.sh --help` prints its usage and exits 0 before it installs or trains anything (issue 72:
a fresh clone runs it without error). Run with HOME pointed at an empty directory, so that a venv or a work
directory the script made would show."""

import os
import pathlib
import subprocess
import tempfile
import unittest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "train-reader.sh"


class Help(unittest.TestCase):
    def test_help_prints_the_usage_and_touches_nothing(self):
        for flag in ("--help", "-h"):
            with tempfile.TemporaryDirectory() as home:
                env = dict(os.environ, HOME=home)
                for var in ("ATTEST_TRAIN_VENV", "ATTEST_READER_WORK"):
                    env.pop(var, None)
                run = subprocess.run(
                    ["bash", str(SCRIPT), flag], env=env, capture_output=True, text=True, timeout=30
                )
                self.assertEqual(run.returncode, 0, run.stderr)
                self.assertIn("Usage: scripts/train-reader.sh", run.stdout)
                self.assertNotIn("set -euo pipefail", run.stdout)
                self.assertEqual(os.listdir(home), [], "nothing is made under HOME")


if __name__ == "__main__":
    unittest.main()
