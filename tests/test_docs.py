"""The README and docs/ as a newcomer reads them: a README short enough to read top to bottom, whose first command is
the one CI runs, and links that lead somewhere (every relative link names a file of the repository, and every
`#anchor` a heading of that file, as GitHub makes them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~)")


def _prose(text: str) -> str:
    """The text outside fenced code blocks (a snippet's brackets are not links)."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return "\n".join(out)


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in _prose(path.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_the_readme_is_under_300_lines():
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines < 300, f"README.md has {lines} lines: move detail into docs/"


def test_the_readme_set_up_line_is_the_one_ci_runs():
    """`.ci/run` runs the README's set-up command as written; the two must not drift apart."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    first = next(line for line in readme.splitlines() if line.startswith("python3 -m venv"))
    command = first.split("   #", 1)[0].strip()
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert command in ci.splitlines(), command


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_leads_to_a_file_and_heading_of_the_repository(doc: Path):
    broken = []
    for target in _LINK.findall(_prose(doc.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists() or REPO not in (dest, *dest.parents):
            broken.append(f"{target}: no such file in the repository")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(REPO)}")
    assert not broken, "\n".join(broken)


def test_the_docs_list_every_option_of_every_command_as_its_help_shows_it():
    from tests.support.cli_options import option_rows

    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    documented = [line for line in text.splitlines() if re.match(r"^\| `gatewright[^`]*` \| `-", line)]
    assert documented == option_rows()


def test_every_option_the_docs_mention_is_in_some_commands_help():
    """Before, `--log-level` was documented and in no `--help`."""
    from tests.support.cli_options import options

    known = options() | {"--help"}
    mentioned: dict[str, str] = {}
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        # A gatewright command line (in a code span or a shell block), or an option on its own where only
        # gatewright's are named (the README, the configuration reference; docs/models.md quotes other servers').
        commands = re.findall(r"(?m)(?:`|^)gatewright [^`\n]*", text)
        alone = re.findall(r"`(--[a-z][a-z-]+)", text) if doc.name in ("README.md", "configuration.md") else []
        unquoted = [re.sub(r"\"[^\"]*\"|'[^']*'", "", c) for c in commands]  # a prompt's words are no options
        for option in [o for c in unquoted for o in re.findall(r"(?<![\w-])--[a-z][a-z-]+", c)] + alone:
            mentioned.setdefault(option, doc.name)
    unknown = {o: where for o, where in mentioned.items() if o not in known}
    assert not unknown, unknown
