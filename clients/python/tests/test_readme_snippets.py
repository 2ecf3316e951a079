"""The Python snippets of the READMEs (README.md at the top of the repository and clients/python/README.md), run as
written against a fresh `attest dev`: what a new user copies must work, and work again when run a second time.

The snippets are read from the Markdown when the tests run, so the documents cannot drift from what is tested.
Every ```python fence is run; the fences of one README section (a heading to the next) run in order as one script,
so a later snippet may use what an earlier one made (the LangChain snippet searches the quick start's collection);
a README's sections run in order, and then all of them once more against the same server, which proves that the
quick start can be re-run (no 409 for the collection, no duplicate document). The snippets find the server through
$ATTEST_SERVER, as a user's would. An exception names the README's own line: each script is compiled with the
Markdown's path and line numbers.

Not run: a fence right after an HTML comment ``<!-- not run: why -->`` (blank lines may separate them) — e.g. one
that shows a remote server — and fences of other languages (```bash and the indented shell blocks are kept correct
by hand). ``from attest`` / ``import attest`` anywhere else in the Markdown fails the test, so a Python snippet
cannot drop out of it by losing its fence. Sections named in CHECKS also have their results checked: a snippet
that runs but finds nothing (as the quick start's ``filter={"lang": "en"}`` did, its document uploaded without
that metadata) fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import Any

import pytest

import attest
from conftest import REPO, Dev

READMES = [REPO / "README.md", REPO / "clients" / "python" / "README.md"]

FENCE = re.compile(r"^(?P<marker>`{3,}|~{3,})\s*(?P<info>[^\s`]*)")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.*?)\s*#*\s*$")
NOT_RUN = re.compile(r"^\s*<!--\s*not run\b")
PYTHON = re.compile(r"^\s*(from|import)\s+attest\b")
PYTHON_INFO = {"python", "py", "python3"}


@dataclass(frozen=True)
class Snippet:
    section: str
    first_line: int  # 1-based, in the Markdown file
    code: str
    run: bool  # False: marked `<!-- not run: ... -->`


@dataclass(frozen=True)
class Markdown:
    snippets: list[Snippet]
    stray_python: list[int]  # lines of Python outside any python fence


def read_markdown(path: Path) -> Markdown:
    """The python fences of a Markdown file, with their sections, and the lines of Python outside them."""
    lines = path.read_text(encoding="utf-8").splitlines()
    snippets: list[Snippet] = []
    stray: list[int] = []
    section = ""
    not_run = False
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence:
            marker = fence["marker"]
            closing = re.compile(rf"^{re.escape(marker[0])}{{{len(marker)},}}\s*$")
            end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), len(lines))
            body = lines[i + 1:end]
            if fence["info"].lower() in PYTHON_INFO:
                snippets.append(Snippet(section, i + 2, "\n".join(body), run=not not_run))
            else:
                stray += [i + 2 + k for k, text in enumerate(body) if PYTHON.match(text)]
            not_run = False
            i = end + 1
            continue
        heading = HEADING.match(line)
        if heading:
            section, not_run = heading["title"], False
        elif NOT_RUN.match(line):
            not_run = True
        elif line.strip():
            # The mark belongs to the fence right after it; any other text in between cancels it.
            not_run = False
            if PYTHON.match(line):
                stray.append(i + 1)
        i += 1
    return Markdown(snippets, stray)


def section_scripts(path: Path) -> list[tuple[str, CodeType]]:
    """Each section's runnable snippets as one script, in the order of the file. Blank lines stand in for the
    Markdown between the snippets, so that a traceback's line numbers are the file's."""
    by_section: dict[str, list[Snippet]] = {}
    for snippet in read_markdown(path).snippets:
        if snippet.run:
            by_section.setdefault(snippet.section, []).append(snippet)
    scripts = []
    for section, snippets in by_section.items():
        source: list[str] = []
        for snippet in snippets:
            source += [""] * (snippet.first_line - 1 - len(source))
            source += snippet.code.splitlines()
        scripts.append((section, compile("\n".join(source) + "\n", str(path), "exec")))
    return scripts


def _doc_ids(documents: list[Any]) -> list[str]:
    return [d.metadata["doc_id"] for d in documents]


def _root_set_up(ns: dict[str, Any]) -> None:
    # The quick start's own print(... hits[0] ...) fails when the search finds nothing.
    assert _doc_ids(ns["docs"]) == ["log"], "the LangChain retriever found not (only) the quick start's document"


def _client_quick_start(ns: dict[str, Any]) -> None:
    assert ns["report"].ok and ns["report"].accepted == 1
    assert [h.doc_id for h in ns["hits"]] == ["1"], "filter={'lang': 'en'} found not (only) the uploaded document"
    assert isinstance(ns["answer"], attest.AskResponse)


def _client_adapters(ns: dict[str, Any]) -> None:
    assert _doc_ids(ns["docs"]) == ["1"] and _doc_ids(ns["top"]) == ["1"]
    assert [n.node.metadata["doc_id"] for n in ns["nodes"]] == ["1"]
    assert isinstance(ns["response"].metadata["attest"], attest.AskResponse)


#: What some sections' snippets must have found, by (README relative to the repository, section).
CHECKS: dict[tuple[str, str], Callable[[dict[str, Any]], None]] = {
    ("README.md", "Set up (fresh Debian machine)"): _root_set_up,
    ("clients/python/README.md", "attest-client"): _client_quick_start,
    ("clients/python/README.md", "LangChain and LlamaIndex"): _client_adapters,
}


def _name(path: Path) -> str:
    return str(path.relative_to(REPO))


@pytest.fixture(scope="module")
def readme_dev(workdir) -> Iterator[Dev]:
    """An `attest dev` of these tests alone: the snippets' first run meets an empty server, as a new user's does."""
    d = Dev("readme", workdir, [])
    yield d
    d.stop()


@pytest.fixture
def user_env(readme_dev, monkeypatch) -> str:
    """The environment of a user whose server is `readme_dev`: $ATTEST_SERVER set, no key, no private CA."""
    monkeypatch.setenv("ATTEST_SERVER", readme_dev.url)
    monkeypatch.delenv("ATTEST_API_KEY", raising=False)
    monkeypatch.delenv("ATTEST_CA_CERT", raising=False)
    return readme_dev.url


@pytest.mark.parametrize("readme", READMES, ids=_name)
def test_readme_snippets_run_as_written_twice(readme, user_env):
    scripts = section_scripts(readme)
    assert scripts, f"{_name(readme)}: no ```python snippet to run"
    for run in (1, 2):
        for section, script in scripts:
            namespace: dict[str, Any] = {"__name__": "__main__"}
            try:
                exec(script, namespace)
                check = CHECKS.get((_name(readme), section))
                if check is not None:
                    check(namespace)
            except Exception as e:
                raise AssertionError(f"{_name(readme)}, section {section!r}, run {run}: {e!r}") from e


@pytest.mark.parametrize("readme", READMES, ids=_name)
def test_no_python_outside_python_fences(readme):
    stray = read_markdown(readme).stray_python
    assert not stray, (
        f"{_name(readme)}: Python on lines {stray} is in no ```python fence, so no test runs it "
        "(fence it, or mark it `<!-- not run: why -->` on the line before)"
    )


def test_every_checked_section_has_snippets():
    found = {(_name(path), section) for path in READMES for section, _ in section_scripts(path)}
    assert set(CHECKS) <= found, f"sections renamed or emptied, no longer checked: {sorted(set(CHECKS) - found)}"


def test_the_extractor_runs_python_fences_and_skips_what_is_marked(tmp_path):
    md = tmp_path / "README.md"
    md.write_text(
        "# Title\n"
        "```python\nx = 1\n```\n"
        "## Remote\n"
        "<!-- not run: a remote server -->\n\n"
        "```python\nfrom attest import Client\nClient('https://attest.example.com')\n```\n"
        "<!-- not run: this mark is cancelled by the text after it -->\n"
        "Some prose.\n"
        "````py\ny = x + 1\n````\n"
        "```bash\nexport ATTEST_SERVER=http://127.0.0.1:7800\n```\n"
        "Indented, not fenced:\n\n"
        "    from attest import Client\n",
        encoding="utf-8",
    )
    parsed = read_markdown(md)
    assert [(s.section, s.first_line, s.code, s.run) for s in parsed.snippets] == [
        ("Title", 3, "x = 1", True),
        ("Remote", 9, "from attest import Client\nClient('https://attest.example.com')", False),
        ("Remote", 15, "y = x + 1", True),
    ]
    assert parsed.stray_python == [22]
    namespace: dict[str, Any] = {}
    scripts = section_scripts(md)
    assert [section for section, _ in scripts] == ["Title", "Remote"]
    for _, script in scripts:
        exec(script, namespace)
    assert namespace["y"] == 2
