"""Shell command analysis for the approval policy: what a command line runs and whether it is provably harmless.

This module owns the shell syntax: it parses a command line with tree-sitter-bash, splits it into every simple
command it can reach (through pipes, lists, subshells, compound statements, command and process substitutions, and
the literal bodies of `bash -c`, `eval` and heredocs fed to a shell), tracks redirections and expansions, collects
the paths the command names, and renders a canonical form used as the identity of remembered rules. What each
program does (and which of its words are files) is judged in `permissions._shell_programs`.

It fails closed: a parse error, a construct it does not know, a dynamically built command, any place where bash
would evaluate data as arithmetic or as an array subscript (`test -v 'a[$(cmd)]'`), or an internal error yields
`read_only=False` and a reason. A proof of read-only holds for the environment `READ_ONLY_GIT_ENV` describes, which
the runtime applies to every command proven read-only. It is sans-I/O; tree-sitter is imported on first use.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from permissions import _shell_programs as programs
from permissions import lazy  # tree-sitter: imported the first time a command is analysed
from permissions._shell_programs import (
    FILTERS_OFF_FAILED,
    READ_ONLY_GIT_ENV,
    NamedPath,
    Word,
    git_without_filters,
    read_only_git_env,
)

if TYPE_CHECKING:
    from tree_sitter import Language, Node, Parser

__all__ = [
    "FILTERS_OFF_FAILED",
    "READ_ONLY_GIT_ENV",
    "NamedPath",
    "ShellAnalysis",
    "SimpleCommand",
    "analyze_command",
    "git_without_filters",
    "needs_approval_reasons",
    "read_only_git_env",
]


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One simple command. `argv` holds unquoted words (non-literal words keep their source text); `argv[0]` is
    the program once wrappers such as `env`, `sudo`, `timeout` or `xargs` (listed in `wrappers`) are taken off."""

    argv: tuple[str, ...]
    wrappers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShellAnalysis:
    """Everything the policy may know about a shell command line.

    `read_only` holds only when the command runs with `READ_ONLY_GIT_ENV` applied (the runtime's duty).

    `paths` are the files the command names: redirection targets, arguments that look like paths (absolute, `~`,
    `~/...`, `.`, `..`, or with a `/`), the operands of programs known to take files (`cat x`, `cd x`), values of
    `--opt=VALUE` options, argv[0] when it holds a `/`, and the paths of the scripts it embeds (`bash -c`, `eval`,
    a heredoc fed to a shell). Each is the literal text, unresolved: `~` and `~/...` are the home directory, any
    other relative path is relative to the call's cwd. `writes` is set for redirections that write, for every path
    a command not proven read-only names (unless the program is known only to read it), for the directory `cd`
    moves to unless the whole line is read-only, and for `.git` (under `git -C dir`) of a git command that may
    write the repository. `opaque_paths` says some word may expand to a path nobody can know here: `$X`, `$(...)`,
    a glob, `~user`, `cd -`, arguments `xargs` reads; the named paths are then not all the paths it touches.
    """

    source: str
    parsed: bool
    commands: tuple[SimpleCommand, ...]
    read_only: bool
    destructive: bool
    network: bool
    reasons: tuple[str, ...]
    canonical: str
    paths: tuple[NamedPath, ...] = ()
    opaque_paths: bool = True
    # The source text of redirection targets nobody can know here (`< $'\x2eenv'`, `> ~+/x`), for the checks that
    # expand what needs no state (`permissions.shell_words`).
    unseen_targets: tuple[str, ...] = ()
    # Not proven read-only only because git may run programs its repository configures (fsmonitor, textconv,
    # filters): read-only once it runs in a sandbox that writes nothing and reaches no network.
    read_only_when_confined: bool = False
    # Runs code no analysis follows (an interpreter's code, a script, a program this analysis does not know, a
    # command built at run time): only a sandbox can hold what it touches.
    opaque_code: bool = True


UNPARSED = "could not fully parse the command"
FAILED = "could not analyse the command"
DYNAMIC = "runs a dynamically built command"
FUNCTION = "defines a shell function"  # what it runs is decided by later words: e.g. the fork bomb `:(){ :|:& };:`
DOWNLOAD_PIPED = "pipes a download into a shell"
DOWNLOAD_RUN = "downloads and runs code in one command"
NETWORK_SUBSTITUTION = "sends the output of a command substitution over the network"
NETWORK_EXPANSION = "sends expanded variables over the network"
NETWORK_PIPED = "pipes data into a network command"
SOCKET = "redirects to a network socket"
SUBSTITUTION = "uses command substitution"
EVALUATES = "evaluat"  # in every reason that says bash evaluates data ("uses arithmetic evaluation", ...)
_URGENT = programs.DESTRUCTIVE_REASONS | {UNPARSED, FAILED, DYNAMIC, DOWNLOAD_PIPED, DOWNLOAD_RUN, NETWORK_PIPED}
_URGENT |= {NETWORK_SUBSTITUTION, NETWORK_EXPANSION, SOCKET, FUNCTION}
"""Reasons that make the policy ask even in auto mode."""

_MAX_SOURCE = 100_000
_MAX_NESTING = 100  # syntax depth; deeper input is refused rather than risking Python's recursion limit
_MAX_SCRIPTS = 5  # `bash -c 'bash -c ...'` depth
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_UNNAMED_TARGETS = _HARMLESS_TARGETS | {"/dev/stdin", "/dev/tty", "/dev/zero", "/dev/random", "/dev/urandom"}
_FD_VARIABLE = re.compile(rb"(?:^|[\s;&|()])\{[A-Za-z_][A-Za-z0-9_]*\}\Z")
_ARRAY_INDEX = re.compile(r"\[([^\]]*)\]\+?=")
_WRITE_OPS = frozenset({">", ">>", "&>", "&>>", ">|", ">&", "<>"})
_READ_OPS = frozenset({"<", "<&", "<&-", ">&-"})
# Separators bash honours are space, tab and newline; anything else the parser might treat differently.
_ODD_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u0085\u00a0\u1680\u2000-\u200b\u2028\u2029\u202f\u205f\u3000\ufeff]")
# tree-sitter splits `-del\<newline>ete` into two words where bash joins them into `-delete`.
_ASTRAL = re.compile(r"[\U00010000-\U0010FFFF]")
_JOINED_LINES = re.compile(r"\S\\\n\S")
# tree-sitter can glue a newline into a word (`ls\n\\rm x`) where bash ends the command.
_LOOSE_WHITESPACE = re.compile(r"(?<!\\)\s")
# `${!x}` and `${x:1}` evaluate arithmetic or names taken from data, `${x@P}` runs prompt expansion, `${x:=v}` assigns.
_RISKY_EXPANSIONS = frozenset({"!", ":", "@", "=", ":="})
_BRACE_EXPANSION = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")
_GLOB = re.compile(r"[*?()]|\[.*\]")
_ESCAPED = re.compile(r"\\.", re.DOTALL)


def _kinds(text: str) -> frozenset[str]:
    return frozenset(text.split())


_WALKED = _kinds(
    "program list subshell compound_statement do_group if_statement elif_clause else_clause while_statement "
    "negated_command case_item test_command binary_expression unary_expression ternary_expression "
    "parenthesized_expression postfix_expression string concatenation expansion simple_expansion array subscript "
    "heredoc_body translated_string brace_expression variable_assignments"
)
_TEST_STRUCTURE = _kinds("binary_expression unary_expression parenthesized_expression negated_expression")
_LEAVES = _kinds(
    "word raw_string number string_content variable_name special_variable_name test_operator regex extglob_pattern "
    "file_descriptor heredoc_start heredoc_end heredoc_content ansi_c_string comment"
)
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_SEQUENCES = _kinds(
    "program compound_statement subshell do_group if_statement elif_clause else_clause case_item while_statement"
)
_SEPARATORS = frozenset({";", "&", ";;", ";&", ";;&"})
_RENDERED = _SEQUENCES | _kinds(
    "list pipeline command command_name redirected_statement while_statement for_statement negated_command "
    "case_statement function_definition variable_assignments declaration_command unset_command"
)

_language: Language | None = None
_local = threading.local()  # a Parser is not safe to share between threads


def _parser() -> Parser:
    global _language
    parser: Parser | None = getattr(_local, "parser", None)
    if parser is None:
        if _language is None:
            _language = lazy.tree_sitter.Language(lazy.tree_sitter_bash.language())
        parser = _local.parser = lazy.tree_sitter.Parser(_language)
    return parser


@dataclass(slots=True)
class _Fact:
    safe: bool
    network: bool = False
    download: bool = False
    interpreter: bool = False
    stdin_script: bool = False
    opaque_code: bool = False  # runs code no analysis follows: an interpreter, a script, an unknown program


@dataclass(slots=True)
class _Walk:
    """Accumulates what a walk over one command line (and the scripts it embeds) finds."""

    commands: list[SimpleCommand] = field(default_factory=list)
    facts: list[_Fact] = field(default_factory=list)
    reasons: dict[str, None] = field(default_factory=dict)
    parsed: bool = True
    clean: bool = True
    destructive: bool = False
    trees: list[Any] = field(default_factory=list)
    paths: dict[str, bool | None] = field(default_factory=dict)  # text -> writes (None: unless the line is read-only)
    opaque: bool = False
    unseen_targets: list[str] = field(default_factory=list)  # redirection targets' source text it cannot see through
    evaluates: bool = False
    stdin: str | None = None  # the literal text a heredoc or herestring feeds the command being walked

    def name(self, text: str, use: str, safe: bool = False) -> None:
        """Record a path the command names, with its use (`programs.READS` ...); `safe`: the command is proven."""
        if use == programs.BY_PROOF:
            use = programs.READS if safe else programs.WRITES
        writes = True if use == programs.WRITES else None if use == programs.BY_LINE else False
        known = self.paths.get(text, False)
        self.paths[text] = True if True in (known, writes) else None if None in (known, writes) else False

    def deny(self, *reasons: str) -> None:
        self.clean = False
        self.reasons.update(dict.fromkeys(reasons))
        # Data bash evaluates (arithmetic, subscripts) can hold a command substitution no analysis sees.
        if any(EVALUATES in r for r in reasons):
            self.evaluates = True

    def unparsed(self, reason: str = UNPARSED) -> None:
        self.parsed = False
        self.deny(reason, UNPARSED)

    # -- scripts and statements ----------------------------------------------------------------------------------

    def script(self, source: str, scripts: int, depth: int = 0, dialect: str = "bash") -> Node | None:
        """Walk one script (the command line itself, or a `bash -c` / `eval` body) and return its syntax tree.
        `dialect="sh"`: a POSIX shell such as dash runs it, which reads `$'...'` as `$` and a quoted string."""
        if scripts > _MAX_SCRIPTS:
            self.unparsed("nests shells too deeply")
            return None
        if _ODD_CHARS.search(source):
            self.unparsed("contains control or unusual whitespace characters")
        if _ASTRAL.search(source):
            # tree-sitter-bash's scanner reads out of bounds on code points above U+FFFF (a segfault was found by
            # fuzzing: `b:{` followed by U+108712); such text is never handed to the parser.
            self.unparsed("contains characters outside the Basic Multilingual Plane")
            return None
        if _JOINED_LINES.search(source):
            self.unparsed("joins words with a line continuation")
        data = source.encode("utf-8")
        # Keep every Tree alive while its nodes are in use: a Node must never outlive the Tree it points into.
        tree = _parser().parse(data)
        self.trees.append(tree)
        root = tree.root_node
        nodes = _descendants(root)
        if root.has_error or _unexplained(root, data, nodes):
            self.unparsed()
        if dialect == "sh" and any(n.type in ("ansi_c_string", "translated_string") for n in nodes):
            self.unparsed("uses $'...' quoting, which sh does not read as bash does")
        if any(n.type in _REDIRECTS and _fd_variable_before(data, n.start_byte) for n in nodes):
            self.unparsed("uses a {name} redirection, which assigns a variable the parser does not see")
        self.walk(root, depth, scripts)
        return root

    def walk(self, node: Node, depth: int, scripts: int) -> None:
        if depth > _MAX_NESTING:
            return self.unparsed("is nested too deeply to analyse")
        kind, d = node.type, depth + 1
        if not node.is_named or kind == "comment":
            return None
        if kind == "command":
            self.command(node, [], d, scripts)
        elif kind == "redirected_statement":
            self.redirected(node, d, scripts)
        elif kind == "pipeline":
            self.pipeline(node, d, scripts)
        elif kind == "variable_assignment":
            self.assignment(node, d, scripts)
        elif kind in ("command_substitution", "process_substitution"):
            self.substitution(node, d, scripts)
        elif kind in _REDIRECTS:
            if self.redirect(node, d, scripts):
                self.unparsed()
        elif kind in ("for_statement", "declaration_command"):
            self.binding(node, d, scripts)
        elif kind == "unset_command":
            self.unset(node, d, scripts)
        elif kind == "test_command":
            self.test(node, d, scripts)
        elif kind in _LEAVES:
            if kind == "word":
                self.loose(node)
            return None
        elif kind in _WALKED:
            if kind == "compound_statement" and not _spaced_brackets(node):
                self.unparsed()  # to bash, `{ls;}` runs a program called `{ls`
            if _evaluates_arithmetic(node):
                self.deny("uses arithmetic evaluation")
            if kind == "translated_string":
                # bash expands the translation it finds in a message catalog (TEXTDOMAINDIR can be the workspace)
                self.deny('translates a $"..." string, whose translation bash expands')
            if kind == "expansion" and any(c.type in _RISKY_EXPANSIONS for c in node.children):
                self.deny("uses an assigning, indirect, substring or transforming expansion")
            self.children(node, d, scripts)
        elif kind in ("arithmetic_expansion", "c_style_for_statement"):
            self.deny("uses arithmetic evaluation")
            self.children(node, d, scripts)
        elif kind == "case_statement":
            self.deny("uses a case statement, whose patterns are not analysed")
            self.children(node, d, scripts)
        elif kind == "function_definition":
            self.deny(FUNCTION)
            self.children(node, d, scripts)
        else:
            self.unparsed()
            self.children(node, d, scripts)
        return None

    def loose(self, node: Node) -> None:
        if _LOOSE_WHITESPACE.search(node.text.decode("utf-8", "replace") if node.text else ""):
            self.unparsed()

    def children(self, node: Node, depth: int, scripts: int) -> None:
        for child in node.children:
            self.walk(child, depth, scripts)

    def pipeline(self, node: Node, depth: int, scripts: int) -> None:
        start = len(self.facts)
        stages: list[tuple[int, int]] = []
        # After a heredoc (`cat <<EOF | sh`) the parser starts the pipeline with its `|`: every stage is fed.
        fed = bool(node.children) and node.children[0].type in ("|", "|&")
        for child in node.named_children:
            s = len(self.facts)
            self.walk(child, depth, scripts)
            stages.append((s, len(self.facts)))
        for j, (s, e) in enumerate(stages, start=fed):
            here = self.facts[s:e]
            if j > 0 and any(f.network for f in here):
                self.deny(NETWORK_PIPED)
            if j > 0 and any(f.stdin_script for f in here):
                self.deny(DYNAMIC)
            if any(f.interpreter for f in here) and any(f.download for f in self.facts[start:s]):
                self.deny(DOWNLOAD_PIPED)

    def substitution(self, node: Node, depth: int, scripts: int) -> None:
        start = len(self.facts)
        self.children(node, depth, scripts)
        if any(not f.safe for f in self.facts[start:]):
            self.deny(SUBSTITUTION)

    def assignment(self, node: Node, depth: int, scripts: int) -> None:
        name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
        base = name.child_by_field_name("name") if name is not None and name.type == "subscript" else name
        text = ""
        if base is not None and base.type == "variable_name":
            text = base.text.decode("utf-8", "replace") if base.text else ""
            if not programs.IDENTIFIER.fullmatch(text):
                self.unparsed()  # `?x=1` is a glob to bash, hence a program name
        word = Word("", True, True)
        for child in node.children:
            if value is not None and child == value and value.type != "array":
                word = self.word(child, depth, scripts)
            else:
                self.walk(child, depth, scripts)
        if value is not None and value.type == "array":
            word = Word("(", False, False)
            for element in value.named_children:
                source = element.text.decode("utf-8", "replace") if element.text else ""
                # `a=([i]=v)`: the index is arithmetic (the parser reads it as plain words)
                index = _ARRAY_INDEX.match(source) if source.startswith("[") else None
                if source.startswith("[") and not (index and re.fullmatch(r"[0-9]+", index[1])):
                    self.deny("uses arithmetic evaluation")
        if text:
            self.variable(text, word)

    def variable(self, name: str, value: Word | None = None, *, assigned: bool = True) -> None:
        """Judge a variable the command sets (`value=None`: to a value nobody knows here); `assigned=False`
        only declares it."""
        why = programs.assignment_risk(name, value) if assigned else None
        if not assigned and programs.is_sensitive_variable(name):
            why = f"sets {name}, which changes what runs"
        if why:
            self.deny(why)

    def binding(self, node: Node, depth: int, scripts: int) -> None:
        # `for PATH in ...` and `declare -n ref=PATH` rebind variables as surely as an assignment does.
        variable = node.child_by_field_name("variable")
        if variable is not None and variable.text:
            self.variable(variable.text.decode("utf-8", "replace"))
        if node.type == "declaration_command":
            words = [self.word(c, depth, scripts) for c in node.named_children if c.type != "variable_assignment"]
            if any(not w.exact or w.text.startswith(("-", "+")) for w in words):
                self.deny("declares variables with attributes")
            for w in words:
                if not w.exact:
                    continue
                # `declare 'a[$(cmd)]=1'` assigns as surely as `declare a=1`, and evaluates the subscript.
                name, eq, value = w.text.partition("=")
                name = name.removesuffix("+") if eq else name
                if not programs.IDENTIFIER.fullmatch(name):
                    self.deny("declares a variable whose name bash evaluates (an array subscript)")
                else:
                    self.variable(name, Word(value, True, True), assigned=bool(eq))
            for c in node.named_children:
                if c.type == "variable_assignment":
                    self.walk(c, depth, scripts)
        else:
            self.children(node, depth, scripts)

    def unset(self, node: Node, depth: int, scripts: int) -> None:
        for w in (self.word(c, depth, scripts) for c in node.named_children):
            if not w.exact:
                self.deny("unsets variables whose names are expanded")
            elif w.text in ("-v", "-f", "-n"):
                continue
            elif not programs.IDENTIFIER.fullmatch(w.text):
                self.deny("unset evaluates the subscript of an array element as arithmetic")
            elif why := programs.assignment_risk(w.text, None):
                self.deny(why.replace("sets ", "unsets ", 1).replace("assigns ", "unsets ", 1))

    def test(self, node: Node, depth: int, scripts: int) -> None:
        """`[ ... ]` is the `[` builtin run on expanded words; `[[ ... ]]` a conditional bash parses itself."""
        if not _spaced_brackets(node):
            self.unparsed()  # to bash, `[x ]` runs a program called `[x`
        pieces: list[tuple[Node, Word]] = []
        for child in node.children[1:-1]:
            self.tokens(child, pieces, depth, scripts)
        tokens = _join_pieces(pieces)
        if node.children[0].type == "[":
            self.simple([Word("[", True, True), *tokens, Word("]", True, True)], (), len(self.facts), scripts, depth)
            return
        if why := programs.test_risk(tokens, conditional=True):
            self.deny(why)
        paths, opaque = programs.test_paths(tokens, conditional=True)
        for p in paths:
            self.name(p, programs.READS)
        self.opaque = self.opaque or opaque

    def tokens(self, node: Node, out: list[tuple[Node, Word]], depth: int, scripts: int) -> None:
        """The pieces of a test expression in order, operators included (`_join_pieces` makes words of them)."""
        if depth > _MAX_NESTING:
            self.unparsed("is nested too deeply to analyse")
        elif node.type in _TEST_STRUCTURE:
            for child in node.children:
                self.tokens(child, out, depth + 1, scripts)
        elif node.type == "test_operator" or not node.is_named:
            out.append((node, Word(node.text.decode("utf-8", "replace") if node.text else "", True, True)))
        elif node.type != "comment":
            out.append((node, self.word(node, depth, scripts)))

    # -- commands and redirections -------------------------------------------------------------------------------

    def redirected(self, node: Node, depth: int, scripts: int) -> None:
        extras: list[Word] = []
        body = node.child_by_field_name("body")
        stdin = None
        for child in node.named_children:
            if child.type in _REDIRECTS:
                extras += self.redirect(child, depth, scripts)
                stdin = _literal_input(child) if child.type == "heredoc_redirect" else stdin
        if body is not None and body.type == "command":
            self.stdin = stdin
            self.command(body, extras, depth, scripts)
            return
        if extras:
            self.unparsed()
        if body is not None:
            self.walk(body, depth, scripts)

    def redirect(self, node: Node, depth: int, scripts: int) -> list[Word]:
        """Judge one redirection; return the words the parser put after its target (they are really arguments)."""
        if node.type != "file_redirect":
            self.redirect_body(node, depth, scripts)
            return []
        targets = [c for i, c in enumerate(node.children) if node.field_name_for_child(i) == "destination"]
        words = [self.word(t, depth, scripts) for t in targets]
        for child in node.named_children:
            if child.type == "file_descriptor":
                self.descriptor(child.text or b"")
            elif child not in targets:
                self.walk(child, depth, scripts)
        if words and any(s in words[0].text for s in ("/dev/tcp/", "/dev/udp/")):
            self.deny(SOCKET)  # bash opens these itself: a redirection that talks to the network
        self.opens(_operator(node), targets[0] if targets else None, words)
        return words[1:]

    def redirect_body(self, node: Node, depth: int, scripts: int) -> None:
        """A heredoc or herestring: what it feeds is walked (the file redirections inside it judged as any)."""
        for child in node.named_children:
            if child.type == "file_redirect":
                if self.redirect(child, depth, scripts):
                    self.unparsed()
            elif child.type not in ("heredoc_start", "heredoc_end"):
                self.walk(child, depth, scripts)

    def descriptor(self, text: bytes) -> None:
        if not re.fullmatch(rb"\d+|\{[A-Za-z_]\w*\}", text):
            self.unparsed()  # the parser reads `--pre=x2>&1` as descriptor `--pre=x2`; bash as a word
        elif text.startswith(b"{"):
            self.variable(text[1:-1].decode(), None)  # `{name}>f` assigns a descriptor number to name

    def opens(self, op: str, target: Node | None, words: list[Word]) -> None:
        """What redirection `op` does to the file its first word names: read it, write it, or duplicate a
        descriptor (`2>&1`, which names no file)."""
        to_descriptor = target is not None and target.type == "number"
        if op in _READ_OPS or (op == ">&" and words and to_descriptor):
            if words and op in ("<", "<&") and not to_descriptor and words[0].text != "-":
                self.target(words[0], writes=False)
        elif op in _WRITE_OPS:
            if not words or not words[0].exact or words[0].text not in _HARMLESS_TARGETS:
                self.deny("writes to a file via redirection")
            if words:
                self.target(words[0], writes=True)
        else:
            self.unparsed()

    def target(self, word: Word, *, writes: bool) -> None:
        """Name the file a redirection opens."""
        if not word.exact:
            self.opaque = self.opaque or not word.fd_path
            if not word.fd_path:
                self.unseen_targets.append(word.text)
        elif word.text not in _UNNAMED_TARGETS and not word.text.startswith(("/dev/fd/", "/dev/tcp/", "/dev/udp/")):
            place = programs.path_text(word)
            if place is None:
                self.opaque = True
                self.unseen_targets.append(word.text)
            elif place:
                self.name(place, programs.WRITES if writes else programs.READS)

    def command(self, node: Node, extras: list[Word], depth: int, scripts: int) -> None:
        start = len(self.facts)
        stdin, self.stdin = self.stdin, None
        words: list[Word] = []
        for i, child in enumerate(node.children):
            if not child.is_named:
                self.unparsed()  # `echo $"x"`: the parser drops the `$` of a translated string
                continue
            if child.type == "comment":
                continue
            if child.type == "variable_assignment":
                self.assignment(child, depth, scripts)
            elif child.type in _REDIRECTS:
                if self.redirect(child, depth, scripts):
                    self.unparsed()
                if child.type != "file_redirect":
                    stdin = _literal_input(child)
            elif node.field_name_for_child(i) == "name":
                named = child.named_children
                if len(named) != 1:
                    self.unparsed()
                words += [self.word(c, depth, scripts) for c in named]
            else:
                words.append(self.word(child, depth, scripts))
        if words:
            self.simple(words + extras, (), start, scripts, depth, stdin)
        elif extras:
            self.unparsed()

    def simple(
        self,
        words: list[Word],
        wrappers: tuple[str, ...],
        start: int,
        scripts: int,
        depth: int,
        stdin: str | None = None,
    ) -> None:
        """Judge one simple command; `stdin` is the literal text a heredoc or herestring feeds it, if any."""
        unwrapped = programs.unwrap(words)
        wrappers += tuple(unwrapped.wrappers)
        self.commands.append(SimpleCommand(tuple(w.text for w in unwrapped.words), wrappers))
        if not unwrapped.words[0].exact:
            self.built_program(words)
            return
        v = programs.judge(unwrapped.words, known=not unwrapped.stuck)
        fact = _Fact(
            safe=unwrapped.read_only and v.read_only and not v.dynamic,
            network=bool(v.network),
            download=v.download,
            interpreter=v.interpreter,
            stdin_script=v.stdin_script,
            opaque_code=v.interpreter or v.unknown or v.dynamic,
        )
        self.facts.append(fact)
        self.judged(unwrapped, v, fact, start)
        paths, opaque = programs.named_paths(words, unwrapped, v)
        for text, use in paths:
            self.name(text, use, fact.safe)
        self.opaque = self.opaque or opaque
        self.embedded(v, stdin, scripts, depth)
        for nested, wrapper in v.nested:
            if nested:
                self.simple(nested, (*wrappers, wrapper), len(self.facts), scripts, depth + 1)

    def built_program(self, words: list[Word]) -> None:
        """A command whose program word is expanded (`$CMD x`): nobody here knows what runs, or what it touches."""
        self.facts.append(_Fact(safe=False, opaque_code=True))
        self.deny(DYNAMIC)
        self.opaque = True
        for w in words:
            place = programs.path_text(w) if w.exact and programs.looks_like_path(w.text) else None
            if place:
                self.name(place, programs.WRITES)

    def judged(self, unwrapped: programs.Unwrapped, v: programs.Verdict, fact: _Fact, start: int) -> None:
        """What the program's verdict adds to the line: its reasons, and what it means among the line's other
        commands (network fed by substitutions, code run on what an earlier stage downloads)."""
        if not fact.safe:
            self.deny(*unwrapped.reasons, *v.reasons)
        if v.destructive:
            self.destructive = True
        if unwrapped.dynamic or v.dynamic:
            self.unparsed(DYNAMIC)
        if v.network and any(w.subst for w in unwrapped.words):
            self.deny(NETWORK_SUBSTITUTION)
        elif v.network and any(w.expands for w in unwrapped.words):
            self.deny(NETWORK_EXPANSION)
        runs_code = v.interpreter or v.dynamic or v.script is not None
        if runs_code and any(f.download for f in self.facts[start:-1]):
            self.deny(DOWNLOAD_PIPED)

    def embedded(self, v: programs.Verdict, stdin: str | None, scripts: int, depth: int) -> None:
        """Walk the script a command runs (`bash -c`, `eval`), or the literal heredoc a shell reads as its script
        (the command stays unproven); any other input is a script nobody can see."""
        if v.script is not None:
            self.script(v.script, scripts + 1, depth, v.dialect)
        elif v.stdin_script and stdin is not None and v.dialect in ("bash", "sh"):
            self.script(stdin, scripts + 1, depth, v.dialect)
        elif v.stdin_script:
            self.opaque = True

    # -- words ---------------------------------------------------------------------------------------------------

    def word(self, node: Node, depth: int, scripts: int) -> Word:
        """The value of one shell word, walking any substitution inside it."""
        pieces: list[tuple[str, str]] = []  # (kind, text): "lit" exact text, "raw" unquoted source, "exp" expansion
        flags = {"subst": False}
        self.pieces(node, pieces, flags, depth, scripts)
        source = node.text.decode("utf-8", "replace") if node.text else ""
        # Globs and brace expansions are judged on the whole word (`{"a",b}` expands), with quoted text masked.
        shape = "".join((_ESCAPED.sub("_", t) if "\\" in t else t) if k == "raw" else "_" for k, t in pieces)
        special = _special(shape)
        first_kind, first = next(((k, t) for k, t in pieces if t or k not in ("lit", "raw")), ("exp", ""))
        tilde = first_kind == "raw" and first.startswith("~")  # `~/x` is the home directory; `"~"/x` and `\~` not
        if all(k in ("lit", "raw") for k, _ in pieces) and not special:
            text = "".join(t if k == "lit" else _unescape(t) for k, t in pieces)
            return Word(text, True, True, tilde=tilde)
        # Whatever a glob or a quoted expansion becomes, it keeps the word's first character; unquoted expansions
        # can split into several words, so they are never safe.
        lead = first if first_kind == "lit" else first if first[:1].isalnum() or first[:1] in "./_:=,%^" else ""
        unquoted = any(k == "exp" for k, _ in pieces)
        safe = bool(lead) and lead[0] not in "-+" and not unquoted
        return Word(
            source,
            False,
            safe,
            subst=flags["subst"],
            expands=True,
            splits=unquoted or special,
            tilde=tilde,
            fd_path=node.type == "process_substitution",
        )

    def pieces(self, node: Node, out: list[tuple[str, str]], flags: dict[str, bool], depth: int, scripts: int) -> None:
        kind = node.type
        text = node.text.decode("utf-8", "replace") if node.text else ""
        if depth > _MAX_NESTING:
            self.unparsed("is nested too deeply to analyse")
            out.append(("exp", text))
        elif kind in ("word", "number", "variable_name"):
            self.loose(node)
            out.append(("raw", text))
        elif kind == "raw_string":
            out.append(("lit", text[1:-1]))
        elif kind == "string":
            self.string(node, out, flags, depth, scripts)
        elif kind == "concatenation" and _contiguous(node):
            for child in node.children:
                self.pieces(child, out, flags, depth + 1, scripts)
        else:
            if kind in ("command_substitution", "process_substitution"):
                flags["subst"] = True
            # A quoted expansion stays one word, but its value is unknown; mark it as such.
            out.append(("exp", text))
            self.walk(node, depth + 1, scripts)

    def string(self, node: Node, out: list[tuple[str, str]], flags: dict[str, bool], depth: int, scripts: int) -> None:
        if not _contiguous(node):
            out.append(("exp", "?"))
        out.append(("lit", ""))  # `""` is still one (empty) argument
        for i, child in enumerate(node.children):
            text = child.text.decode("utf-8", "replace") if child.text else ""
            if child.type == '"':
                # The parser folds whitespace before the closing quote into the quote token.
                out.append(("lit", text[:-1] if i else ""))
            elif child.type == "string_content":
                out.append(("lit", re.sub(r'\\([$`"\\\n])', lambda m: "" if m[1] == "\n" else m[1], text)))
            else:
                if child.type in ("command_substitution", "process_substitution"):
                    flags["subst"] = True
                out.append(("qexp", text))
                self.walk(child, depth + 1, scripts)


def _operator(node: Node) -> str:
    """A file redirection's operator (`>`, `>>`, `<&`...), or "" when the parser gave it none or several."""
    ops = [c.type for c in node.children if not c.is_named]
    if ops == ["<"] and any(c.type == "ERROR" and c.text == b">" for c in node.children):
        ops = ["<>"]  # the parser does not know `<>` (it reports an error, so the command is unparsed anyway)
    return ops[0] if len(ops) == 1 else ""


def _join_pieces(pieces: list[tuple[Node, Word]]) -> list[Word]:
    """Words of a test expression as bash splits them: pieces with no space between them are one word (the parser
    reads `~/x` as the operator `~` and `/x`, and `a=b` as a comparison; to bash each is one word)."""
    words: list[Word] = []
    group: list[tuple[Node, Word]] = []
    for node, word in [*pieces, (None, None)]:
        if group and (node is None or node.start_byte != group[-1][0].end_byte):
            if len(group) == 1:
                words.append(group[0][1])
            else:
                parts = [w for _, w in group]
                text = "".join(w.text for w in parts)
                tilde = not group[0][0].is_named and parts[0].text == "~" or parts[0].tilde
                if all(w.exact for w in parts):
                    words.append(Word(text, True, parts[0].option_safe, tilde=tilde))
                else:
                    splits = any(w.splits for w in parts)
                    words.append(Word(text, False, False, any(w.subst for w in parts), True, splits, tilde))
            group = []
        if node is not None and word is not None:
            group.append((node, word))
    return words


def _evaluates_arithmetic(node: Node) -> bool:
    """Arithmetic contexts expand variables recursively, so `a[$(cmd)]` stored in a variable runs `cmd`."""
    kind, first = node.type, node.children[0].type if node.child_count else ""
    if kind == "compound_statement":
        return first == "(("
    if kind == "subscript":
        index = node.child_by_field_name("index")
        return index is None or index.type != "number" and index.text not in (b"@", b"*")
    return False


def _fd_variable_before(data: bytes, start: int) -> bool:
    """True when the redirection at `start` follows a `{name}` word: bash reads `true {PATH}>f` as a redirection
    that sets PATH to a descriptor number, where the parser sees an argument."""
    if start == 0 or data[start - 1 : start] != b"}":
        return False
    opening = data.rfind(b"{", 0, start - 1)
    if opening < 0 or not re.fullmatch(rb"[A-Za-z_][A-Za-z0-9_]*", data[opening + 1 : start - 1]):
        return False
    return opening == 0 or data[opening - 1 : opening] in (b" ", b"\t", b"\n", b";", b"&", b"|", b"(")


def _literal_input(node: Node) -> str | None:
    """The text a heredoc or herestring feeds its command, when it is literal (no expansion can change it)."""
    if node.type == "herestring_redirect":
        value = node.named_children[-1] if node.named_children else None
        if value is not None and value.type == "raw_string" and value.text:
            return value.text.decode("utf-8", "replace")[1:-1]
        return None
    start = next((c for c in node.children if c.type == "heredoc_start"), None)
    body = next((c for c in node.children if c.type == "heredoc_body"), None)
    if start is None:
        return None
    text = body.text.decode("utf-8", "replace") if body is not None and body.text else ""
    quoted = any(q in (start.text or b"") for q in (b"'", b'"', b"\\"))
    return text if quoted or not re.search(r"[$`\\]", text) else None


def _unexplained(root: Node, data: bytes, nodes: list[Node]) -> bool:
    """True when the parser skipped text bash would read (`\\ ls` loses its backslash) or saw a comment bash
    would not (`}#x` is one word to bash)."""
    covered = bytearray(len(data))
    for node in nodes:
        if node.type == "heredoc_body":
            # Heredoc text between expansions is data, unless it hides an expansion the parser did not see.
            text = bytearray(data[node.start_byte : node.end_byte])
            for child in node.children:
                text[child.start_byte - node.start_byte : child.end_byte - node.start_byte] = bytes(
                    child.end_byte - child.start_byte
                )
            start = node.parent.child(1) if node.parent is not None and node.parent.child_count > 1 else None
            delimiter = (start.text or b"") if start is not None and start.type == "heredoc_start" else b""
            quoted = any(q in delimiter for q in (b"'", b'"', b"\\"))
            if not quoted and (b"$" in text or b"`" in text):
                return True
            covered[node.start_byte : node.end_byte] = b"\x01" * (node.end_byte - node.start_byte)
        elif node.child_count == 0:
            covered[node.start_byte : node.end_byte] = b"\x01" * (node.end_byte - node.start_byte)
            if node.type == "comment" and node.start_byte > 0 and data[node.start_byte - 1] not in b" \t\n;&|()<>":
                return True
    skipped = bytes(b for b, c in zip(data, covered, strict=True) if not c)
    return bool(skipped.replace(b"\\\n", b"").strip(b" \t\n"))


def _spaced_brackets(node: Node) -> bool:
    """Bash only reads `[`, `[[` and `{` as words of their own, and `}` only after a command terminator."""
    text = node.text or b""
    opening, closing = node.children[0].text or b"", node.children[-1].text or b""
    if opening == b"((":
        return True
    inner = text[len(opening) : len(text) - len(closing)]
    if opening == b"{":
        return inner[:1].isspace() and inner.rstrip(b" \t")[-1:] in (b";", b"&", b"\n")
    return len(inner) >= 2 and inner[:1].isspace() and inner[-1:].isspace()


def _descendants(node: Node) -> list[Node]:
    out, stack = [], list(node.children)
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(n.children)
    return out


def _special(shape: str) -> bool:
    """True when a word's unquoted characters (`shape`) hold glob or brace patterns the shell would expand."""
    return bool(_GLOB.search(shape) or _BRACE_EXPANSION.search(shape))


def _unescape(raw: str) -> str:
    return _ESCAPED.sub(lambda m: m[0][1], raw.replace("\\\n", "")) if "\\" in raw else raw


def _contiguous(node: Node) -> bool:
    # A gap between the parts of a word would be text the parser did not explain.
    position = node.start_byte
    for child in node.children:
        if child.start_byte != position:
            return False
        position = child.end_byte
    return position == node.end_byte


def _render(node: Node) -> str:
    """Whitespace-normalised source: structure is re-joined with single spaces, words keep their exact text.

    Two command lines render alike only when they differ in insignificant whitespace, comments or in a newline
    written for a `;`; anything the renderer does not know is kept verbatim, so it can only tell more apart.
    """
    if node.type not in _RENDERED:
        return node.text.decode("utf-8", "replace") if node.text else ""
    parts: list[str] = []
    children = [c for c in node.children if c.type != "comment"]
    in_body = node.type != "case_item"  # a case item's patterns come before its `)`
    for i, child in enumerate(children):
        parts.append(_render(child))
        in_body = in_body or child.type == ")"
        following = children[i + 1] if i + 1 < len(children) else None
        if following is None or child.type in _SEPARATORS or following.type in _SEPARATORS:
            continue
        if (node.type in _SEQUENCES and in_body and child.is_named) or following.type == "do_group":
            parts.append(";")  # the newline that ended this statement or word list
    return " ".join(p for p in parts if p)


def _unparsed_identity(command: object) -> str:
    # Comments are never rendered, so no parsed rendering starts with `#`: the verbatim text of a command that could
    # not be parsed cannot collide with the canonical form of one that could.
    return f"# unparsed: {str(command).strip()}"


def analyze_command(command: str) -> ShellAnalysis:
    """Analyse one shell command line. Never raises: an internal failure is reported as an unanalysable command."""
    try:
        return _analyze(command)
    except Exception:  # the fail-closed boundary: no input may crash the policy
        return ShellAnalysis(command, False, (), False, False, False, (FAILED,), _unparsed_identity(command))


def _analyze(command: str) -> ShellAnalysis:
    walk = _Walk()
    root = None
    if len(command) > _MAX_SOURCE:
        walk.unparsed("is too long to analyse")
    else:
        root = walk.script(command, 0)
    canonical = _render(root) if root is not None and walk.parsed else _unparsed_identity(command)
    downloads = any(f.download for f in walk.facts) and any(f.interpreter for f in walk.facts)
    if downloads and DOWNLOAD_PIPED not in walk.reasons:
        walk.deny(DOWNLOAD_RUN)
    read_only = walk.parsed and walk.clean and all(f.safe for f in walk.facts)
    return ShellAnalysis(
        source=command,
        parsed=walk.parsed,
        commands=tuple(walk.commands),
        read_only=read_only,
        destructive=walk.destructive,
        network=SOCKET in walk.reasons or any(f.network for f in walk.facts),
        reasons=tuple(walk.reasons),
        canonical=canonical,
        paths=tuple(NamedPath(t, not read_only if w is None else w) for t, w in walk.paths.items()),
        opaque_paths=walk.opaque or not walk.parsed,
        unseen_targets=tuple(walk.unseen_targets),
        opaque_code=not walk.parsed or walk.evaluates or any(f.opaque_code for f in walk.facts),
        read_only_when_confined=not read_only
        and walk.parsed
        and bool(walk.reasons)
        and all(programs.is_configured_program_reason(r) for r in walk.reasons),
    )


def needs_approval_reasons(a: ShellAnalysis) -> tuple[str, ...]:
    """Reasons that must make the policy ask even in auto mode; empty when nothing dangerous was found."""
    reasons = [r for r in a.reasons if r in _URGENT]
    if not a.parsed and UNPARSED not in reasons and FAILED not in reasons:
        reasons.append(UNPARSED)
    if a.destructive and not any(r in programs.DESTRUCTIVE_REASONS for r in reasons):
        reasons.append("deletes or overwrites data")
    return tuple(reasons)
