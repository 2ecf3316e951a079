"""`scripts/reader/device-kit.sh narrow` leaves nothing of the repository to travel with a device call (no tracked
file, no untracked file that git does not ignore) but the kit, and `restore` gives back the index and
.git/info/exclude as they were, the working tree's changes untouched; narrowing is refused over staged changes,
which `restore` (a reset of the index) would otherwise drop. Run on a throwaway repository that holds a copy of the
script."""

import pathlib
import shutil
import subprocess
import tempfile
import unittest

SCRIPT = pathlib.Path(__file__).resolve().parent / "device-kit.sh"


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


class NarrowAndRestore(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.repo = pathlib.Path(self.dir.name)
        git(self.repo, "init", "-q")
        git(self.repo, "config", "user.email", "kit@example.invalid")
        git(self.repo, "config", "user.name", "kit")
        (self.repo / "scripts" / "reader").mkdir(parents=True)
        shutil.copy(SCRIPT, self.repo / "scripts" / "reader" / "device-kit.sh")
        (self.repo / "models").mkdir()
        (self.repo / "models" / "reader.onnx").write_bytes(b"\0" * 1024)
        (self.repo / "README.md").write_text("readme\n")
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-q", "-m", "start")
        (self.repo / ".git" / "info" / "exclude").write_text("/.device/\n")
        (self.repo / ".device").mkdir()
        (self.repo / ".device" / "run.sh").write_text("echo kit\n")
        (self.repo / "README.md").write_text("readme, changed\n")
        (self.repo / "notes.txt").write_text("untracked\n")

    def tearDown(self):
        self.dir.cleanup()

    def kit(self, *args):
        return subprocess.run(["bash", "scripts/reader/device-kit.sh", *args], cwd=self.repo,
                              capture_output=True, text=True, timeout=30)

    def test_nothing_but_the_kit_travels_and_restore_puts_everything_back(self):
        exclude = (self.repo / ".git" / "info" / "exclude").read_text()
        narrowed = self.kit("narrow")
        self.assertEqual(narrowed.returncode, 0, narrowed.stderr)
        self.assertEqual(git(self.repo, "ls-files"), "", "nothing tracked")
        self.assertEqual(git(self.repo, "ls-files", "--others", "--exclude-standard"), "", "nothing unignored")
        self.assertNotEqual(self.kit("narrow").returncode, 0, "narrowing twice is refused")
        restored = self.kit("restore")
        self.assertEqual(restored.returncode, 0, restored.stderr)
        self.assertEqual((self.repo / ".git" / "info" / "exclude").read_text(), exclude)
        self.assertEqual(sorted(git(self.repo, "ls-files").split()),
                         ["README.md", "models/reader.onnx", "scripts/reader/device-kit.sh"])
        self.assertEqual(git(self.repo, "status", "--porcelain").splitlines(),
                         [" M README.md", "?? notes.txt"])
        self.assertEqual((self.repo / "README.md").read_text(), "readme, changed\n")
        self.assertTrue((self.repo / ".device" / "run.sh").exists())

    def test_staged_changes_are_not_narrowed_over(self):
        git(self.repo, "add", "README.md")
        refused = self.kit("narrow")
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("staged", refused.stderr)
        self.assertEqual(len(git(self.repo, "ls-files").split()), 3, "the index untouched")


if __name__ == "__main__":
    unittest.main()
