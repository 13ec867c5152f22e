"""Where bash evaluates data as code, the shell analysis proves nothing (the boundary corpus's hole 1).

bash evaluates array subscripts and arithmetic recursively: in `test -v 'a[$(cmd)]'`, `[[ $x -eq 1 ]]`,
`${a[x]}`, `$((x))`, an assignment to an integer variable such as RANDOM, `declare 'a[...]=v'` or
`unset 'a[...]'`, the text `$(cmd)` inside a value runs `cmd`. Each attack below is run by real bash against a
marker file, so the table says what bash does, not what we believe it does; the analysis must not prove any of them
read-only. A few rows bash does not run (the `test` builtin compares plain integers only) are held to the same rule.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from permissions.shell import analyze_command

BASH = "/bin/bash"
S = "'a[$(touch M)]'"  # a subscript whose evaluation creates the marker

# (command, whether real bash creates the marker)
ATTACKS = [
    # -v and -R operands: the subscript of the name is evaluated
    (f"test -v {S}", True),
    (f"[ -v {S} ]", True),
    (f"[[ -v {S} ]]", True),
    (f'x={S}; [ -v "$x" ]', True),
    (f"x={S}; [[ -v a[x] ]]", True),
    (f'x={S}; test -v "a[x]"', True),
    (f"test -R {S}", False),
    # arithmetic comparisons: `[[` evaluates both operands, `test`/`[` do not (fail closed all the same)
    (f"[[ {S} -eq 1 ]]", True),
    (f"x={S}; [[ x -eq 1 ]]", True),
    (f"x={S}; [[ $x -eq 1 ]]", True),
    (f"[ {S} -eq 1 ]", False),
    (f"test 1 -lt {S}", False),
    # arithmetic expansions, commands and loops
    (f"x={S}; echo $((x))", True),
    (f"x={S}; echo $[x]", True),
    (f"x={S}; (( x ))", True),
    (f"x={S}; for ((i=x; i<0; i++)); do :; done", True),
    (f"x={S}; let x", True),
    (f"x={S}; declare -i y=x", True),
    (f"x={S}; typeset -i y=x", True),
    # subscripts, substrings and indirection in expansions
    (f"x={S}; echo ${{a[x]}}", True),
    (f'x={S}; : "${{a[x]}}"', True),
    (f"x={S}; [[ -n ${{a[x]}} ]]", True),
    (f"y=abc; x={S}; echo ${{y:x}}", True),
    (f"y=abc; x={S}; echo ${{y:0:x}}", True),
    (f"x={S}; echo ${{!x}}", True),
    # assignments that evaluate: subscripts, array indexes, integer variables
    (f"x={S}; a[x]=1", True),
    (f"x={S}; a=([x]=1)", True),
    (f"x={S}; a+=([x]=1)", True),
    (f"RANDOM={S}", True),
    (f"SRANDOM={S}", True),
    (f"OPTIND={S}", True),
    (f"HISTCMD={S}", True),
    (f"BASHPID+={S}", True),
    (f"export OPTIND={S}", True),
    (f"for OPTIND in {S}; do :; done", True),
    # declaration commands and unset evaluate the subscript of a quoted name
    ("declare 'a[$(touch M)]=1'", True),
    ("typeset 'a[$(touch M)]=1'", True),
    (f"x={S}; declare a[x]=1", True),
    (f"a=(); unset {S}", True),
    (f'x={S}; a=(); unset "a[x]"', True),
    (f"declare {S}", False),
    (f"read -a {S} <<< x", False),
    (f"printf -v {S} x", True),
    # builtins that run or load code
    ("mapfile -C 'touch M' -c 1 a <<< x", True),
    ("readarray -C 'touch M' -c 1 a <<< x", True),
    ("trap 'touch M' EXIT", True),
    ("hash -p /usr/bin/touch ls; ls M", True),
    ("BASH_CMDS[ls]=/usr/bin/touch; ls M", True),
    ("source <(echo 'touch M')", True),
    (". /dev/stdin <<< 'touch M'", True),
    ("shopt -s expand_aliases\nalias ls='touch M'\nls", True),
    ("complete -C 'touch M' x", False),
    # changing which `ls` runs (the work dir holds a hostile ./ls, and 10/ls ... 20/ls for descriptor numbers)
    ("PATH[0]=.; ls", True),
    ("unset PATH; ls", True),
    ("declare 'PATH=.'; ls", True),
    ("export 'PATH=.'; ls", True),
    ("true {PATH}>/dev/null; ls", True),  # the parser sees an argument `{PATH}`; bash sets PATH to a descriptor
]

# Neighbours of the attacks that stay proven read-only: failing closed must not cost these.
HARMLESS = [
    "test -v a",
    "[[ -v a ]]",
    "[ 1 -eq 1 ]",
    "[[ 1 -lt 2 ]]",
    '[ "$x" = y ]',
    '[ -n "$x" ]',
    "[ -f x ] && cat x",
    "a=([1]=x)",
    "OPTIND=1",
    "declare x=1",
    "unset FOO",
    "export LANG=C.UTF-8",
    "LC_ALL=C sort f",
    "env -u FOO ls",
]


def _hostile_dir(root: Path) -> Path:
    """A work dir whose ./ls and 10/ls ... 20/ls create the marker, written with builtins only (PATH may be gone)."""
    evil = f"#!/bin/sh\n: > {shlex.quote(str(root / 'M'))}\n"
    for d in [root, *(root / str(n) for n in range(10, 21))]:
        d.mkdir(exist_ok=True)
        (d / "ls").write_text(evil)
        (d / "ls").chmod(0o755)
    return root


def _bash(command: str, cwd: Path, **env: str) -> None:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "LC_ALL": "C"}
    subprocess.run(
        [BASH, "-c", command], cwd=cwd, env=base | env, stdin=subprocess.DEVNULL, capture_output=True, timeout=20
    )


@pytest.mark.parametrize("command", [c for c, _ in ATTACKS])
def test_code_that_bash_evaluates_from_data_is_never_proven_read_only(command: str) -> None:
    analysis = analyze_command(command)
    assert not analysis.read_only
    assert analysis.reasons


@pytest.mark.skipif(not os.path.exists(BASH), reason="needs /bin/bash as the oracle")
@pytest.mark.parametrize(("command", "runs"), ATTACKS)
def test_real_bash_runs_exactly_the_attacks_the_table_says_it_runs(tmp_path: Path, command: str, runs: bool) -> None:
    _bash(command, _hostile_dir(tmp_path))
    assert (tmp_path / "M").exists() == runs


@pytest.mark.parametrize("command", HARMLESS)
def test_harmless_neighbours_of_the_attacks_stay_proven_read_only(command: str) -> None:
    analysis = analyze_command(command)
    assert analysis.read_only, analysis.reasons


@pytest.mark.skipif(not os.path.exists(BASH), reason="needs /bin/bash as the oracle")
def test_a_script_for_sh_is_not_read_as_bash_reads_it(tmp_path: Path) -> None:
    """dash reads `$'\\'` as `$` and a quoted backslash, so the quote bash sees as escaped closes a string there."""
    body = "echo $'\\'; touch M; echo '\\'''"
    command = f"sh -c {shlex.quote(body)}"
    assert not analyze_command(command).read_only
    assert analyze_command(f"bash -c {shlex.quote(body)}").read_only  # bash itself reads it as one echo
    _bash(command, tmp_path)
    assert (tmp_path / "M").exists() == os.path.realpath("/bin/sh").endswith("dash")


def test_scripts_for_shells_that_are_not_bash_are_not_analysed_as_bash() -> None:
    """zsh runs code in glob qualifiers (`ls *(e:'cmd':)`), and ksh and fish differ too."""
    for shell in ("zsh", "ksh", "mksh", "fish"):
        analysis = analyze_command(f"{shell} -c 'ls'")
        assert not analysis.read_only
        assert analysis.opaque_paths


@pytest.mark.skipif(
    not (shutil.which("localedef") and Path("/usr/share/i18n/charmaps/GBK.gz").exists()),
    reason="needs localedef and the GBK charmap",
)
def test_switching_to_a_multibyte_locale_is_not_read_only(tmp_path: Path) -> None:
    """Under zh_CN.GBK the bytes of `中\\` form two characters, so bash ends the string at the next quote and runs
    what the parser saw as quoted text. Real bash, with a locale compiled for the test, creates the marker."""
    locales = tmp_path / "locales"
    locales.mkdir()
    subprocess.run(
        ["localedef", "-f", "GBK", "-i", "zh_CN", str(locales / "zh_CN.GBK")], capture_output=True, timeout=120
    )
    if not (locales / "zh_CN.GBK").exists():
        pytest.skip("could not compile the zh_CN.GBK locale")
    work = tmp_path / "work"
    work.mkdir()
    command = 'LC_ALL=zh_CN.GBK\necho "中\\" ; touch M ; echo "中\\"""'
    assert analyze_command(command.replace("LC_ALL=zh_CN.GBK", "LC_ALL=C")).read_only  # one echo, to the parser
    assert not analyze_command(command).read_only
    gbk = command.encode("utf-8")  # bash reads the bytes; only the locale decides how
    subprocess.run(
        [BASH, "-c", gbk],
        cwd=work,
        env={"PATH": "/usr/bin:/bin", "LOCPATH": str(locales)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=20,
    )
    assert (work / "M").exists()


@pytest.mark.parametrize(
    "command",
    [
        "exec -c git log",
        "env -i git log",
        "env - git log",
        "env -u GIT_CONFIG_COUNT git log",
        "env --unset=GIT_PAGER git log",
        "unset GIT_CONFIG_COUNT; git log",
        "GIT_CONFIG_COUNT=0 git log",
    ],
)
def test_commands_that_drop_the_read_only_environment_are_not_read_only(command: str) -> None:
    """The runtime disarms configured programs with `READ_ONLY_GIT_ENV`; a command that drops it proves nothing."""
    assert not analyze_command(command).read_only


@pytest.mark.skipif(not (shutil.which("localedef") and shutil.which("msgfmt")), reason="needs localedef and msgfmt")
def test_a_translated_string_is_not_read_only(tmp_path: Path) -> None:
    """bash expands the translation of `$"..."` as if it were double-quoted text, and TEXTDOMAINDIR may point into
    the workspace: a message catalog there translates `hello` to `$(touch M)`. Real bash creates the marker."""
    locales = tmp_path / "locales"
    locales.mkdir()
    subprocess.run(
        ["localedef", "-f", "UTF-8", "-i", "en_US", str(locales / "en_US.UTF-8")], capture_output=True, timeout=120
    )
    if not (locales / "en_US.UTF-8").exists():
        pytest.skip("could not compile the en_US.UTF-8 locale")
    work = tmp_path / "work"
    (work / "po" / "en_US" / "LC_MESSAGES").mkdir(parents=True)
    (work / "e.po").write_text('msgid "hello"\nmsgstr "$(touch M)"\n')
    subprocess.run(
        ["msgfmt", "-o", str(work / "po" / "en_US" / "LC_MESSAGES" / "evil.mo"), str(work / "e.po")],
        check=True,
        timeout=60,
    )
    command = 'TEXTDOMAINDIR=./po TEXTDOMAIN=evil\necho $"hello"'
    analysis = analyze_command(command)
    assert not analysis.read_only
    assert not analyze_command('echo $"hello"').read_only
    subprocess.run(
        [BASH, "-c", command],
        cwd=work,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=20,
        env={"PATH": "/usr/bin:/bin", "LOCPATH": str(locales), "LC_ALL": "en_US.UTF-8"},
    )
    assert (work / "M").exists()
