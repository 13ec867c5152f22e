"""`bash`: run a command to completion (`exec`) or manage the session's background processes.

`exec` runs `/bin/bash -c COMMAND` (an argv list, never `shell=True`) in the session cwd or a `cwd` resolved through
the workspace boundary, in its own process group, stdin closed, with the agent's secrets removed from the
environment, inside the OS sandbox the call's approval allows (`ctx.confinement` → `runtime.sandbox`: writes,
reads, network; `TMPDIR` is the session's private temp dir). After `timeoutMs` (default 30 s) or a cancelled prompt
everything it started is killed. When the editor advertised `terminal`, `exec` runs in an editor terminal instead
(`terminal/create` … `terminal/release`), through the sandbox launcher (`python -m runtime.sandbox`), so the user
watches it live and it is confined the same way. `start`/`status`/`logs`/`write`/`stop`/`list` drive background
processes, sandboxed likewise, that live until stopped or until the session closes (see `runtime.processes`).

For approval, the command is analysed by `permissions.shell` when available: a proven read-only command needs no
question in `safe` mode, and "allow always" binds to the canonical command and working directory.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from typing import Any

import anyio

from permissions.policy import SESSION_ONLY_KEY
from permissions.shell import ShellAnalysis, analyze_command, needs_approval_reasons, read_only_git_env
from runtime import processes, secret_files, secrets
from runtime.repositories import protected_paths
from runtime.sandbox import SandboxSpec, build_spec, child_env, session_tmpdir, support
from runtime.sandbox.client import NetLimit, SandboxError, Spawner
from runtime.sandbox.launcher_env import launcher_command
from runtime.tools.base import (
    Effect,
    Tool,
    ToolContext,
    ToolFailure,
    ToolResult,
    digest,
    display_path,
    environ_without_secrets,
    visible,
)
from runtime.tools.builtin import textio
from runtime.workspace import PathError, ResolvedPath, Workspace

DEFAULT_TIMEOUT_MS = 30_000
HEAD_BYTES = TAIL_BYTES = 12_000
DEFAULT_LOG_CHARS = 12_000
TERMINAL_OUTPUT_LIMIT = 64_000
SHELL = "/bin/bash"
READ_ACTIONS = frozenset({"status", "logs", "list"})
OPAQUE_PATHS = "names paths that are only known once it runs, and no sandbox holds it to the workspace"
OPAQUE_CODE = "runs code that can write anywhere (no analysis follows it), and no sandbox holds it to the workspace"


def sandbox_active() -> bool:
    """Whether the OS sandbox confines the processes this tool starts (see `runtime.sandbox`)."""
    return support().active


def _live_output(ctx: ToolContext) -> Any:
    """While a command runs, the editor gets its output so far as `in_progress` updates (once a second at most)."""
    report = ctx.progress
    if report is None:
        return None

    async def progress(text: str) -> None:
        assert report is not None
        await report(
            ToolResult(
                "",
                content=({"type": "content", "content": {"type": "text", "text": text}},),
                raw_output={"output": text, "running": True},
            )
        )

    return progress


def _place(text: str, base: str) -> str:
    """Where bash finds a path the command names: `~` is the home directory, other relative paths are relative to
    the call's cwd (`base`, itself relative to the workspace)."""
    if text == "~" or text.startswith("~/"):
        return os.path.expanduser(text)
    if os.path.isabs(text) or not base:
        return text
    return os.path.join(base, text)


@functools.lru_cache(maxsize=64)
def _analysis(command: str) -> ShellAnalysis | None:
    """The analysis of a command, once: describing one call reads it for its paths, its proof, its rule key and what
    it reads unnamed (0.1-0.4 ms a parse); the result is frozen, so calls share it."""
    try:
        return analyze_command(command)
    except Exception:  # an analyser failure proves nothing: the call asks
        return None


def canonical_command(command: str) -> str:
    """The identity of a command for rules: the shell analysis's canonical form (`npm  test` is `npm test`)."""
    a = _analysis(command)
    return (a.canonical if a is not None else None) or command.strip()


def run_rule_key(where: str, canonical: str) -> str:
    """The rule key of running a command (canonical form) in directory `where` (resolved, or a placeholder)."""
    return f"bash:run:{where}:{digest(canonical)}"


def _short(command: str, limit: int = 80) -> str:
    """The command's first line, cut at `limit` (the describer and the loop escape what would not show)."""
    shown = command.strip()
    first = shown.splitlines()[0] if shown else shown
    more = first != shown
    if len(first) > limit:
        first, more = first[: limit - 1], True
    return first + ("…" if more else "")


def command_block(command: str) -> tuple[dict[str, Any], ...]:
    """The whole command as the question's content, when its title cannot show all of it (a second line, a long
    line, characters made visible): what is approved is what the user saw, never a first line hiding the rest."""
    shown = visible(command).strip()
    if _short(command) == shown:  # one short line with nothing to escape: the title shows all of it
        return ()
    longest = max((len(run) for run in re.findall(r"`+", shown)), default=0)
    fence = "`" * max(3, longest + 1)
    return ({"type": "content", "content": {"type": "text", "text": f"{fence}sh\n{shown}\n{fence}"}},)


def _sandbox_notes(exit_code: int | None, stderr: str, notes: list[str]) -> list[str]:
    """What the model must know about the sandbox to understand a failure (nothing when the command succeeded)."""
    if exit_code == 0:
        return []
    out = []
    why = processes.setup_failure(stderr)
    if why is not None:
        out.append(f"[the sandbox could not be set up, so the command did not run: {why}]")
    out += [f"[sandbox: {n}]" for n in notes]
    return out


def _network_notes(spec: SandboxSpec, refused: list[str] | tuple[str, ...], exit_code: int | None) -> list[str]:
    """Under `[sandbox] network`: which connections the proxy refused (whatever the exit status: a command may
    swallow the error), and, when the command failed, how its network works."""
    if not spec.limited:
        return []
    names = ", ".join(spec.hosts or ()) or "no host"
    where = f"commands reach only {names} ([sandbox] network in the user's config file)"
    if refused:
        lines = [r.removeprefix("gatewright: ") for r in refused[:5]] + (["…"] if len(refused) > 5 else [])
        return [
            f"[the sandbox's network proxy refused: {'; '.join(lines)}. {where.capitalize()}; a host that is "
            "needed must be added there by the user]"
        ]
    if exit_code == 0:
        return []
    return [
        f"[sandbox: {where}, through the HTTP proxy in HTTPS_PROXY/HTTP_PROXY; direct connections and DNS lookups fail]"
    ]


class BashTool(Tool):
    name = "bash"
    kind = "execute"
    sandboxed = True
    description = (
        "Run a shell command with bash. action=exec (default) runs it and waits (timeoutMs, default 30000; the "
        "command and all its children are killed after it); stdin is closed, so commands must not wait for input. "
        "For servers and watchers use action=start, then status/logs (offset, limit)/write (input)/stop with the "
        "processId, and list. cwd is relative to the workspace."
    )

    @staticmethod
    def _action(args: Mapping[str, Any]) -> str:
        return str(args.get("action") or "exec")

    def effect(self, args: Mapping[str, Any]) -> Effect:
        return "read" if self._action(args) in READ_ACTIONS else "execute"

    def starts_process(self, args: Mapping[str, Any]) -> bool:
        return self._action(args) in ("exec", "start")

    def paths(self, args: Mapping[str, Any]) -> list[tuple[str, bool]]:
        """The cwd (a command may write anywhere under it, so a protected or outside cwd asks) and every path the
        command names, placed where bash would find it (`~` is the home directory, relative paths are relative to
        the cwd)."""
        command, cwd = args.get("command"), args.get("cwd")
        if self._action(args) not in ("exec", "start") or not isinstance(command, str):
            return []
        base = cwd if isinstance(cwd, str) and cwd else ""
        out = [(base, True)] if base else []
        a = _analysis(command)
        for named in a.paths if a is not None else ():
            out.append((_place(named.text, base), named.writes))
        return out

    def locations(self, args: Mapping[str, Any], ws: Workspace) -> list[dict[str, Any]]:
        return []

    def title(self, args: Mapping[str, Any], ws: Workspace) -> str:
        action = self._action(args)
        cmd = args.get("command")
        pid = args.get("processId", "?")
        if action in ("exec", "start"):
            if not isinstance(cmd, str):
                return "Run a command"
            where = args.get("cwd")
            suffix = f" in {display_path(ws, where)}" if isinstance(where, str) and where not in ("", ".") else ""
            return f"{'Run' if action == 'exec' else 'Start'} {_short(cmd)}{suffix}" + (
                " in the background" if action == "start" else ""
            )
        return {
            "status": f"Check process {pid}",
            "logs": f"Read output of process {pid}",
            "write": f"Send input to process {pid}",
            "stop": f"Stop process {pid}",
            "list": "List background processes",
        }.get(action, f"bash {action}")

    async def preview(self, args: Mapping[str, Any], ctx: ToolContext) -> tuple[dict[str, Any], ...]:
        if self._action(args) in ("exec", "start") and isinstance(args.get("command"), str):
            return command_block(args["command"])
        return ()

    def summary(self, args: Mapping[str, Any], ws: Workspace) -> str:
        action = self._action(args)
        if action in ("exec", "start") and isinstance(args.get("command"), str):
            return f"`{_short(args['command'], 60)}`"
        return f"bash {action}" + (f" on {args['processId']}" if args.get("processId") else "")

    def rule_key(self, args: Mapping[str, Any], ws: Workspace) -> str:
        action = self._action(args)
        if action in ("exec", "start") and isinstance(args.get("command"), str):
            try:
                where = ws.resolve(args.get("cwd") or ".").path
            except PathError:
                where = str(args.get("cwd"))
            # exec and start of the same command are one rule: approving either approves running it there. The
            # command is kept as a digest: a secret in it never reaches the rules file.
            return run_rule_key(where, canonical_command(args["command"]))
        # Process ids (`proc_1`) restart in every agent process: these calls are remembered for this session only, and
        # the key holds everything that decides the effect (for `write`, the input sent).
        key = f"bash:{action}:{args.get('processId', '')}"
        if action == "write":
            key += f":{digest(args.get('input'))}"
        return SESSION_ONLY_KEY + key

    def analyse(self, args: Mapping[str, Any], ws: Workspace) -> tuple[bool, tuple[str, ...]]:
        action = self._action(args)
        if action not in ("exec", "start") or not isinstance(args.get("command"), str):
            return False, ()
        a = _analysis(args["command"])
        if a is None:
            return False, ()
        try:
            reasons = tuple(needs_approval_reasons(a))
        except Exception:  # an analyser failure proves nothing: its own reasons still ask
            reasons = a.reasons
        found = support()
        confined = found.active
        # Under the sandbox a command that only git's repository-configured programs keep from being read-only is
        # read-only in effect: it runs where it can write nothing and reach no network. Without a net namespace
        # such a program could still send (UDP always, TCP too below Landlock ABI 4): it asks.
        read_only = a.read_only or (a.read_only_when_confined and confined and found.network_held)
        proven = bool(a.parsed and read_only) and action == "exec"
        if a.opaque_paths and not confined:
            # Without a sandbox nothing holds a path the words do not show: ask, in every mode.
            reasons += (OPAQUE_PATHS,)
        if a.opaque_code and not confined and not proven:
            # Nor what an interpreter, a script or an unknown program does: Landlock was what held it in `auto`.
            reasons += (OPAQUE_CODE,)
        return proven, reasons

    def unnamed_reads(self, args: Mapping[str, Any], ws: Workspace) -> list[str]:
        command = args.get("command")
        if self._action(args) not in ("exec", "start") or not isinstance(command, str):
            return []
        a = _analysis(command)
        if a is None or not a.parsed:
            return []  # not proven read-only, and asked about in every mode as unparsed
        try:
            cwd = ws.resolve(args.get("cwd") or ".").path
        except PathError:
            return []
        redirected = [("<", *a.unseen_targets)] if a.unseen_targets else []
        return secret_files.unnamed_reads([*(c.argv for c in a.commands), *redirected], cwd, a.opaque_paths)

    def timeout_seconds(self, args: Mapping[str, Any]) -> float | None:
        if self._action(args) == "exec":
            return int(args.get("timeoutMs") or DEFAULT_TIMEOUT_MS) / 1000
        return None

    # ---- running ---------------------------------------------------------------------------------------------------
    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        action = self._action(args)
        if action in ("exec", "start"):
            command = args.get("command")
            if not isinstance(command, str) or not command.strip():
                raise ToolFailure(f"bash {action} needs a command", "InvalidArguments")
            resolved = textio.resolve(ctx, args.get("cwd") or ".")
            if action == "exec":
                return await self._exec(command, resolved, args, ctx)
            return await self._start(command, resolved, ctx)
        table = processes.session_table(ctx.session_id)
        if action == "list":
            procs = table.list()
            if not procs:
                return ToolResult("no background processes in this session", raw_output={"processes": []})
            lines = [
                f"{p.id}  {p.status}{'' if p.exit_code is None else f' (exit {p.exit_code})'}  pid {p.pid}  "
                f"{_short(p.command, 60)}"
                for p in procs
            ]
            return ToolResult("\n".join(lines), raw_output={"processes": [p.info() for p in procs]})
        pid = args.get("processId")
        if not isinstance(pid, str):
            raise ToolFailure(f"bash {action} needs a processId (see action=list)", "InvalidArguments")
        proc = table.get(pid)
        if proc is None:
            known = ", ".join(p.id for p in table.list()) or "none"
            raise ToolFailure(f"no background process {pid!r} in this session (known: {known})", "ProcessNotFound")
        if action == "status":
            info = proc.info()
            text = f"{proc.id} is {proc.status}" + ("" if proc.exit_code is None else f" (exit code {proc.exit_code})")
            return ToolResult(
                f"{text}; {info['logSize']} characters of output so far (read with action=logs)", raw_output=info
            )
        if action == "logs":
            offset = int(args.get("offset") or 0)
            limit = int(args.get("limit") or DEFAULT_LOG_CHARS)
            text, start, nxt, lost = proc.log.read(offset, limit)
            end = proc.log.end
            notes = []
            if lost:
                notes.append(f"[output before offset {start} was dropped from the log buffer]")
            more = nxt < end
            notes.append(
                f"[{proc.id} {proc.status}; offset {start}–{nxt} of {end}"
                + (f"; more with offset={nxt}" if more else "")
                + "]"
            )
            notes += _network_notes(proc.spec, proc.child.refused(), 0) if proc.spec is not None else []
            raw = {
                "processId": proc.id,
                "offset": start,
                "nextOffset": nxt,
                "truncated": lost,
                "content": text,
                "status": proc.status,
                "exitCode": proc.exit_code,
            }
            return ToolResult((text if text else "(no new output)") + "\n" + "\n".join(notes), raw_output=raw)
        if action == "write":
            data = args.get("input")
            if not isinstance(data, str):
                raise ToolFailure("bash write needs input", "InvalidArguments")
            try:
                n = await anyio.to_thread.run_sync(table.write, pid, data)
            except (BrokenPipeError, OSError) as exc:
                raise ToolFailure(f"could not write to {pid}: {exc}", "ProcessNotRunning") from None
            return ToolResult(f"wrote {n} bytes to {pid}", raw_output={"processId": pid, "bytesWritten": n})
        if action == "stop":
            was = proc.status
            await table.stop(pid)
            text = f"{pid} was already {was}" if was != "running" else f"stopped {pid}"
            return ToolResult(f"{text} (exit code {proc.exit_code})", raw_output=proc.info())
        raise ToolFailure(f"unknown bash action {action!r}", "InvalidArguments")

    def _open_cwd(self, ctx: ToolContext, resolved: ResolvedPath) -> int:
        try:
            return ctx.workspace.open_dir(resolved, ctx.grants)
        except PathError as exc:
            if exc.error_type == "FileNotFound":
                raise ToolFailure(
                    f"cwd {ctx.workspace.display(resolved.path)} is not an existing directory", exc.error_type
                ) from None
            raise ToolFailure(str(exc), exc.error_type) from None

    @staticmethod
    def _env(cwd: str, ctx: ToolContext) -> dict[str, str]:
        env = environ_without_secrets()
        env["PWD"] = cwd
        env.setdefault("PAGER", "cat")
        env.setdefault("GIT_PAGER", "cat")
        env["GIT_TERMINAL_PROMPT"] = "0"
        if not ctx.confinement.write:
            # A command proven read-only is proven so only with git's repository-configured programs switched off
            # (fsmonitor, pagers, signature programs, lazy fetches): the analysis relies on this environment.
            env = read_only_git_env(env)
        return env

    @staticmethod
    def _spec(ctx: ToolContext, grace: float | None) -> SandboxSpec:
        """The sandbox this call's approval allows (`ctx.confinement`, set by the approval decorator)."""
        return build_spec(
            ctx.confinement,
            ctx.workspace.roots,
            tmpdir=session_tmpdir(ctx.session_id),
            grace=grace,
            extra_protected=protected_paths(ctx),  # every `.git`/`.gatewright` there now, nested ones included
        )

    async def _exec(
        self, command: str, resolved: ResolvedPath, args: Mapping[str, Any], ctx: ToolContext
    ) -> ToolResult:
        timeout = int(args.get("timeoutMs") or DEFAULT_TIMEOUT_MS) / 1000
        fd = self._open_cwd(ctx, resolved)
        editor = ctx.editor
        try:
            if editor is not None and getattr(editor, "can_terminal", False):
                return await self._exec_terminal(command, resolved.path, timeout, ctx)
            notes: list[str] = []
            spec = self._spec(ctx, processes.EXEC_GRACE)
            res = await processes.run_exec(
                [SHELL, "-c", command],
                cwd=resolved.path,
                cwd_fd=fd,
                env=self._env(resolved.path, ctx),
                timeout=timeout,
                head_bytes=HEAD_BYTES,
                tail_bytes=TAIL_BYTES,
                spec=spec,
                note=notes,
                progress=_live_output(ctx),
            )
        except SandboxError as exc:
            raise ToolFailure(f"the command did not run: {exc}", "SandboxError") from None
        finally:
            os.close(fd)
        parts = []
        if res.stdout:
            parts.append(res.stdout.rstrip("\n"))
        if res.stderr:
            parts.append("[stderr]\n" + res.stderr.rstrip("\n"))
        if not parts:
            parts.append("(no output)")
        if res.timed_out:
            parts.append(
                f"[timed out after {timeout:g} s: the command and all its child processes were killed; "
                "use a larger timeoutMs, or action=start for long-running processes]"
            )
        elif res.signal:
            parts.append(f"[killed by signal {res.signal}]")
        else:
            parts.append(f"[exit code {res.exit_code}]")
        if res.leftovers_killed:
            parts.append(
                "[background processes the command left running were stopped; use action=start to keep "
                "a process running]"
            )
        parts += _sandbox_notes(res.exit_code, res.stderr, notes)
        parts += _network_notes(spec, res.refused, res.exit_code)
        output = "\n".join(parts)
        raw: dict[str, Any] = {
            "command": command,
            "cwd": resolved.path,
            "exitCode": res.exit_code,
            "signal": res.signal,
            "timedOut": res.timed_out,
            "stdout": res.stdout,
            "stderr": res.stderr,
            "pid": res.pid,
            "durationMs": res.duration_ms,
            "truncated": res.truncated,
        }
        if res.refused:
            raw["refusedConnections"] = list(res.refused)
        return ToolResult(output, is_error=res.timed_out, raw_output=raw)

    # The deadline is the command's own (timeoutMs): on expiry the terminal is killed and its output still read and
    # reported, which a caller's cancel scope could not do.
    async def _exec_terminal(
        self,
        command: str,
        cwd: str,
        timeout: float,  # noqa: ASYNC109
        ctx: ToolContext,
    ) -> ToolResult:
        editor = ctx.editor
        assert editor is not None  # only called when the editor advertised terminals
        spec = self._spec(ctx, processes.EXEC_GRACE)
        net = None
        if spec.limited:  # the launcher reaches the network proxy through an endpoint opened for it
            try:
                net = Spawner.get().net_limit(spec, launcher=True)
            except SandboxError as exc:
                raise ToolFailure(f"the command did not run: {exc}", "SandboxError") from None
            spec = net.spec
        try:
            return await self._in_terminal(command, cwd, timeout, ctx, spec, net)
        finally:
            if net is not None:
                net.close()

    async def _in_terminal(
        self,
        command: str,
        cwd: str,
        timeout: float,  # noqa: ASYNC109
        ctx: ToolContext,
        spec: SandboxSpec,
        net: NetLimit | None,
    ) -> ToolResult:
        editor = ctx.editor
        assert editor is not None
        # The editor starts the command in its own environment, which may hold our keys too: blank them there.
        env = child_env(secrets.blank_secret_names(self._env(cwd, ctx)), spec)
        # The editor runs our launcher, which applies the same sandbox to the shell it runs.
        launcher, launcher_args = launcher_command(spec, [SHELL, "-c", command])
        try:
            tid = await editor.create_terminal(launcher, launcher_args, cwd, env, TERMINAL_OUTPUT_LIMIT)
        except textio.EditorError as exc:
            raise ToolFailure(f"the editor could not start a terminal: {exc.message}", "EditorError") from None
        terminal = {"type": "terminal", "terminalId": tid}
        timed_out = False
        try:
            if ctx.progress is not None:
                await ctx.progress(ToolResult("", content=(terminal,)))
            status: dict[str, Any] = {}
            with anyio.move_on_after(timeout) as deadline:
                status = await editor.wait_for_terminal_exit(tid)
            if deadline.cancelled_caught:
                timed_out = True
                await editor.kill_terminal(tid)
            out = await editor.terminal_output(tid)
        except textio.EditorError as exc:
            raise ToolFailure(f"the editor terminal failed: {exc.message}", "EditorError") from None
        except BaseException:
            # Cancelled: the command must not outlive the prompt.
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                try:
                    await editor.kill_terminal(tid)
                except Exception:  # noqa: S110 - best effort; release below still runs
                    pass
            raise
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                try:
                    await editor.release_terminal(tid)
                except Exception:  # noqa: S110 - the terminal may already be gone
                    pass
        exit_status = out.get("exitStatus") or status or {}
        code, sig = exit_status.get("exitCode"), exit_status.get("signal")
        text = str(out.get("output") or "")
        parts = [text.rstrip("\n") if text else "(no output)"]
        if out.get("truncated"):
            parts.insert(0, f"[output truncated by the terminal to its last {TERMINAL_OUTPUT_LIMIT} bytes]")
        if timed_out:
            parts.append(
                f"[timed out after {timeout:g} s: the terminal's command was killed; use a larger "
                "timeoutMs, or action=start for long-running processes]"
            )
        elif sig:
            parts.append(f"[killed by signal {sig}]")
        else:
            parts.append(f"[exit code {code}]")
        refused = net.refused() if net is not None else []
        parts += _network_notes(spec, refused, code)
        output = "\n".join(parts)
        raw = {
            "command": command,
            "cwd": cwd,
            "exitCode": code,
            "signal": sig,
            "timedOut": timed_out,
            "terminalId": tid,
            "output": text,
            "truncated": bool(out.get("truncated")),
        }
        if refused:
            raw["refusedConnections"] = refused
        content = (terminal, {"type": "content", "content": {"type": "text", "text": output}})
        return ToolResult(output, is_error=timed_out, content=content, raw_output=raw)

    async def _start(self, command: str, resolved: ResolvedPath, ctx: ToolContext) -> ToolResult:
        table = processes.session_table(ctx.session_id)
        fd = self._open_cwd(ctx, resolved)
        try:
            proc = table.start(
                [SHELL, "-c", command],
                command=command,
                cwd=resolved.path,
                env=self._env(resolved.path, ctx),
                cwd_fd=fd,
                spec=self._spec(ctx, None),
            )
        except processes.ProcessLimit as exc:
            raise ToolFailure(str(exc), "ProcessLimit") from None
        except SandboxError as exc:
            raise ToolFailure(f"the command did not run: {exc}", "SandboxError") from None
        except OSError as exc:
            raise ToolFailure(f"could not start the command: {exc}", "StartFailed") from None
        finally:
            os.close(fd)
        return ToolResult(
            f"started {proc.id} (pid {proc.pid}): {_short(command)}\nRead its output with "
            f"action=logs processId={proc.id}; stop it with action=stop.",
            raw_output=proc.info(),
        )
