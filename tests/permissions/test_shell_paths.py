"""The paths a shell command names, so that `safe` and `auto` can ask for outside and protected access (the boundary
corpus's holes 2 and 3) and the fallback without a sandbox can ask before a proven read-only command reads outside.

Each path is the literal text as written; the runtime resolves it against the call's cwd and `~`. `writes` is set
for writing redirections and for whatever a command not proven read-only names; `opaque_paths` says some word may
expand to a path nobody can know here.
"""

from __future__ import annotations

import pytest

from permissions.shell import NamedPath, analyze_command

R, W = False, True

# (command, the paths it names as {text: writes}, opaque)
NAMED = [
    # the red team's reads outside the workspace (hole 2)
    ("cat /etc/shadow", {"/etc/shadow": R}, False),
    ("head ../other-project/.env", {"../other-project/.env": R}, False),
    ("cat < ~/.ssh/id_rsa", {"~/.ssh/id_rsa": R}, False),
    ("git blame --contents=/outside/file f", {"/outside/file": R}, False),
    # the red team's writes in auto mode (hole 3)
    ("echo evil > .git/hooks/pre-commit", {".git/hooks/pre-commit": W}, False),
    ("cp a /outside/b", {"a": W, "/outside/b": W}, False),
    ("git config core.hooksPath /tmp/h", {"/tmp/h": W, ".git": W}, False),
    ("python3 -c 'import shutil; shutil.rmtree(\"/outside/dir\")'", {"/outside/dir": W}, False),
    ("cd .git/hooks && echo evil > pre-commit", {".git/hooks": W, "pre-commit": W}, False),
    # redirections follow their operator; /dev/null and friends are no files
    ("echo x > out", {"out": W}, False),
    ("echo x >> log.txt 2>/dev/null", {"log.txt": W}, False),
    ("ls &> all.log", {"all.log": W}, False),
    ("wc -l < in.txt", {"in.txt": R}, False),
    ("exec 3<>/tmp/fd", {"/tmp/fd": W}, True),  # the parser does not know `<>`: unparsed, hence opaque too
    ("ls > /dev/stderr 2>&1", {}, False),
    ("cat <<'EOF' > out\nhi\nEOF", {"out": W}, False),
    # arguments that look like paths, and files a reader's operands name
    ("ls ~ . .. ./a a/b", {"~": R, ".": R, "..": R, "./a": R, "a/b": R}, False),
    ("cat '~/x'", {"./~/x": R}, False),  # a quoted `~` is a file name in the cwd
    ("[ -f ~/x ] && cat x", {"~/x": R, "x": R}, False),
    ("[[ -d ../x ]]", {"../x": R}, False),
    ("grep -r /api/v1 src", {"src": R}, False),  # the first operand of grep is a pattern
    ("rg --ignore-file=/etc/ig -e /x foo", {"/etc/ig": R, "foo": R}, False),
    ("find /etc -name '*.conf' -newer /tmp/ref", {"/etc": R, "/tmp/ref": R}, False),
    ("jq --rawfile k /etc/key . f.json", {"/etc/key": R, "f.json": R}, False),
    ("echo /etc/passwd", {}, False),  # echo prints its arguments, it opens none
    ("env -C /etc cat shadow", {"/etc": R, "/etc/shadow": R}, False),
    ("/usr/bin/cat x", {"/usr/bin/cat": R, "x": R}, False),
    ("./run.sh --out=/tmp/o", {"./run.sh": W, "/tmp/o": W}, False),
    ("dd if=/dev/zero of=/dev/sda", {"if=/dev/zero": W, "/dev/zero": W, "of=/dev/sda": W, "/dev/sda": W}, False),
    ("sort -o /tmp/out in", {"/tmp/out": W, "in": W}, False),
    # cd names the directory the rest of the line runs in
    ("cd /tmp && ls", {"/tmp": R}, False),
    ("cd /tmp; rm x", {"/tmp": W, "x": W}, False),
    ("cd; cat .bashrc", {"~": R, ".bashrc": R}, False),
    # scripts are walked for the paths they name
    ("bash -c 'cat /etc/passwd > out'", {"/etc/passwd": R, "out": W}, False),
    ("eval 'cat /etc/passwd'", {"/etc/passwd": R}, False),
    ("bash <<'EOF'\ncat /etc/passwd\nEOF", {"/etc/passwd": R}, False),
    ("echo $(cat /etc/x)", {"/etc/x": R}, True),
    # git names .git (under -C) when it may write the repository
    ("git -C sub commit -m 'fix /usr'", {"sub": W, "sub/.git": W}, False),
    ("git add .", {".": W, ".git": W}, False),
    ("git reset --hard", {".git": W}, False),
    ("git stash", {".git": W}, False),
    ("git stash list", {}, False),
    ("git tag", {}, False),
    ("git tag v1", {".git": W}, False),
    ("git config --get user.name", {}, False),
    ("git -C /other status", {"/other": R}, False),
    ("git -C sub log -- ../x", {"sub": R, "sub/../x": R}, False),
    ("git --git-dir=/x/.git log", {"/x/.git": W, ".git": W}, False),
    # files git writes through an output option, whatever the subcommand reads
    ("git diff --output=.git/hooks/pre-commit", {".git/hooks/pre-commit": W}, False),
    ("git log --output /outside/log", {"/outside/log": W}, False),
    ("git archive -o/outside/a.tar HEAD", {"/outside/a.tar": W, ".git": W}, False),
    ("git format-patch --output-directory ../p HEAD~1", {"../p": W, ".git": W}, False),
    # files sed and awk scripts open themselves
    ("sed -n 'w /outside/f' notes.txt", {"notes.txt": W, "/outside/f": W}, False),
    ("sed 's/a/b/gw .git/hooks/pre-commit' f", {"f": W, ".git/hooks/pre-commit": W}, False),
    ("sed -ne '1r /etc/shadow' -e 'W /tmp/o' f", {"f": W, "/etc/shadow": R, "/tmp/o": W}, False),
    ("sed -n '$p;1,3{p;d}' f", {"f": W}, False),
    ("sed '1a text; w /not/a/file' f", {"f": W}, False),  # `a` takes the rest of the line as text
    ("sed -n 2p notes.txt", {"notes.txt": R}, False),  # proven read-only
    ("awk 'BEGIN{print 1 > \"/outside/f\"}'", {"/outside/f": W}, True),
    ("awk -F: '{print $1}' f", {"f": W}, False),
    # ... and the scripts this reader cannot follow: run commands, come from a file or an expansion, or use
    # constructs it does not parse
    ("sed -n '1e touch /outside/f' notes.txt", {"notes.txt": W}, True),
    ("sed 's/x/touch \\/outside\\/f/e' notes.txt", {"notes.txt": W}, True),
    ("sed 's/[/]/x/w /outside/f' notes.txt", {"notes.txt": W}, True),
    ("sed -f script.sed f", {"script.sed": W, "f": W}, True),
    ('sed "$S" f', {"f": W}, True),
    ("awk 'BEGIN{system(\"touch x\")}'", {}, True),
    ("awk '{print | \"sh\"}' f", {"f": W}, True),
    ("awk '$3 > 1' f", {"f": W}, True),  # a comparison reads like a redirection: fail closed
    ("awk -f prog.awk f", {"prog.awk": W, "f": W}, True),
    ("gawk -o/outside/p 1 f", {"/outside/p": W, "f": W}, True),
    ("gawk -i inplace 1 f", {"f": W}, True),
    # words nobody can resolve here
    ('cat "$F"', {}, True),
    ("cat $F", {}, True),
    ("ls /etc/*", {}, True),
    ("cat {a,b}", {}, True),
    ("cat ~nobody/x", {}, True),
    ("cat ~+/x", {}, True),
    ("cd - && ls", {}, True),
    ("xargs cat < list", {"list": R}, True),
    ("wc --files0-from=list", {}, True),
    ("grep -R foo .", {".": R}, True),  # follows links out of every directory it names
    ("zsh -c 'cat /etc/passwd'", {}, True),
]


@pytest.mark.parametrize(("command", "paths", "opaque"), NAMED)
def test_a_command_names_the_paths_it_touches(command: str, paths: dict[str, bool], opaque: bool) -> None:
    analysis = analyze_command(command)
    assert {p.text: p.writes for p in analysis.paths} == paths
    assert analysis.opaque_paths == opaque


def test_paths_are_named_once_and_written_if_any_use_writes() -> None:
    analysis = analyze_command("cat f > f")
    assert analysis.paths == (NamedPath("f", True),)


@pytest.mark.parametrize("command", ["ls ((", "$CMD /etc/x", 'eval "$X"'])
def test_a_command_that_cannot_be_analysed_has_opaque_paths(command: str) -> None:
    assert analyze_command(command).opaque_paths


def test_an_internal_failure_has_opaque_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    from permissions import shell

    def broken(*_: object) -> None:
        raise RuntimeError("parser exploded")

    monkeypatch.setattr(shell._Walk, "script", broken)
    analysis = analyze_command("cat /etc/shadow")
    assert analysis.opaque_paths and not analysis.read_only
