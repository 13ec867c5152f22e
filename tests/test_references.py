"""Every reference in the repository leads somewhere a reader of a clone can follow: a file or folder the repository
holds, or a public address. Code, tests and docs never cite a document, a tracker issue or a path that only exists
where the project was written (a design note, a contract file, an issue number, a machine's folders).

Two checks over every tracked text file but the vendored schemas and the generated wire models: no citation of such a
document (the patterns below), and every repository path that a comment, a docstring or a document names exists."""

from __future__ import annotations

import io
import re
import subprocess
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Vendored or generated text that this project does not write.
SKIPPED = ("schemas/", "acp_server/protocol/schema.py", "tests/transcripts/", "tests/fixtures/")

# Citations of what a clone does not hold. The design, contracts and seed documents the project grew from are
# summarised where they belong (ARCHITECTURE.md, docs/); issues of the tracker it was written in are not public, while
# another project's public issue is cited as owner/repo#N or by its address.
CITATIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("the design document", re.compile(r"\bDESIGN\b")),
    ("a contract file", re.compile(r"\bcontracts/|\b(?:CLI|transcript|tools|scripted[- ]model) contract\b", re.I)),
    ("a seed document", re.compile(r"\bseeds?/|\bthe seeds?\b", re.I)),
    ("a folder outside the clone", re.compile(r"(?<![\w.-])(?:shared|/work)/")),
    ("a reference note", re.compile(r"\bstyle guide\b|\bacp-spec\b|\bsecurity checklist\b", re.I)),
    ("an issue of the tracker", re.compile(r"\b(?:issues?|PR|pull request)\s*#?\d+", re.I)),
    ("an issue without its project's address", re.compile(r"(?<![\w/.-])(?<!to )#\d+\b")),
)

# A path names this repository when it starts with one of its top-level folders, or (inside tests/) one of tests'.
_PATH = re.compile(r"(?<![\w.~/:@$<-])(\.?[A-Za-z_][\w.-]*(?:/[\w.*-]+)+/?)")


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True, timeout=60)
    files = [p for p in out.stdout.splitlines() if not p.startswith(SKIPPED)]
    return [p for p in files if p.endswith((".py", ".md", ".toml", ".sh")) or p.startswith(".ci/")]


TRACKED = _tracked()
TOP = {p.split("/", 1)[0] for p in TRACKED if "/" in p} | {".ci"}
TESTS_TOP = {p.split("/")[1] for p in TRACKED if p.startswith("tests/") and p.count("/") >= 2}


def _prose(path: str, text: str) -> str:
    """What a reader reads as prose: all of a document; a Python file's comments and docstrings (a string that is a
    statement of its own). Other strings are data: an extension method's name, a test's example paths."""
    if not path.endswith(".py"):
        return text
    parts: list[str] = []
    before = tokenize.NEWLINE
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and before in _STATEMENT_START):
            parts.append(tok.string)
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            before = tok.type
    return "\n".join(parts)


_STATEMENT_START = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)


def _read(path: str) -> str:
    return (REPO / path).read_text(encoding="utf-8")


def _exists(path: str, ref: str) -> bool:
    """The path is in the repository (from its root, tests/ or the naming file's folder), or it is a place the
    repository's own scripts create, which git ignores (`.ci/acpx/`, `bench/.peers`)."""
    ref = ref.rstrip("/").rstrip(".")
    if "*" in ref:
        return any(REPO.glob(ref))
    here = (REPO / path).parent
    return any((base / ref).exists() for base in (REPO, REPO / "tests", here)) or _ignored(ref)


def _ignored(ref: str) -> bool:
    # As a file or as a folder: a pattern such as `.ci/acpx/` matches only the latter.
    proc = subprocess.run(["git", "check-ignore", ref, ref + "/"], cwd=REPO, capture_output=True, timeout=60)
    return proc.returncode == 0


def _repo_paths(path: str, prose: str) -> list[str]:
    tops = TOP | (TESTS_TOP if path.startswith("tests/") else set())
    found = [m.group(1) for m in _PATH.finditer(prose)]
    return [ref for ref in found if ref.split("/", 1)[0] in tops]


def test_no_file_cites_a_document_or_issue_that_the_repository_does_not_hold() -> None:
    cited = []
    for path in TRACKED:
        if path == "tests/test_references.py":
            continue
        text = _read(path)
        for what, pattern in CITATIONS:
            for m in pattern.finditer(text):
                cited.append(f"{path}:{text.count(chr(10), 0, m.start()) + 1}: {what}: {m.group(0)!r}")
    assert not cited, "\n".join(cited)


def test_every_repository_path_a_file_names_exists() -> None:
    missing = []
    for path in TRACKED:
        prose = _prose(path, _read(path))
        missing += [f"{path}: {ref}" for ref in _repo_paths(path, prose) if not _exists(path, ref)]
    assert not missing, "named but not in the repository:\n" + "\n".join(sorted(set(missing)))


def test_the_checks_see_what_they_are_meant_to_catch() -> None:
    """The patterns are not vacuous: each known kind of dangling reference is caught, and public ones are not."""
    caught = ("see DESIGN.md", "the transcript contract", "seeds/003", "issue 14, hole 4", "(issue #2)", "ductor #175")
    for sample in caught:
        assert any(p.search(sample) for _, p in CITATIONS), sample
    public = ("tree-sitter/tree-sitter-bash#325", "https://github.com/o/r/issues/9", "answer to #2 session/prompt")
    for sample in public:
        assert not any(p.search(sample) for _, p in CITATIONS), sample
    assert _repo_paths("README.md", "`runtime/nowhere.py` and docs/configuration.md") == [
        "runtime/nowhere.py",
        "docs/configuration.md",
    ]
    assert not _exists("README.md", "runtime/nowhere.py")
    assert _exists("README.md", "bench/.peers/vibe")  # made by the peers' set-up line, ignored by git
    assert _exists("tests/e2e/x.py", "support/inprocess.py")
