"""What the `initialize` fast path imports: start-up is a benchmark figure (`python -m bench --only startup`), and
every heavy module pulled in before the answer costs milliseconds on every editor launch. This checks the path, not
a time: in a fresh interpreter, do what `gatewright acp --model scripted:PATH` does up to writing the answer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Needed later (the event loop, sessions, tools, providers), never to answer `initialize`.
HEAVY = (
    "anyio",
    "asyncio",
    "sqlite3",
    "pydantic",
    "jsonschema",
    "mcp",
    "openai",
    "anthropic",
    "httpx",
    "httpx2",
    "tree_sitter",
    "rich",
    "prompt_toolkit",
    "runtime.events",
    "runtime.models.base",
    "runtime.loop",
    "acp_server.session",
    "acp_server.methods.sessions",
    "acp_server.rpc",
    "acp_server.dispatch",
    "acp_server.protocol.schema",
    "acp_server.protocol.base",
)


def test_answering_initialize_imports_none_of_the_heavy_modules(tmp_path):
    script = tmp_path / "model.json"
    script.write_text('{"responses": [{"text": "hi"}]}')
    code = f"""
import sys
from acp_server.cli import _check_options, build_parser
import acp_server.server
from acp_server.agent import AgentConfig, GatewrightAgent
args = build_parser().parse_args(["acp", "--model", "scripted:{script}"])
checked = _check_options(args)
factory, mode = checked.factory, checked.mode
agent = GatewrightAgent(AgentConfig(mode=mode, model_factory=factory))
answer = agent.answer_initialize({{"protocolVersion": 1, "clientCapabilities": {{}}}})
assert answer["protocolVersion"] == 1, answer
heavy = [m for m in {HEAVY!r} if m in sys.modules]
assert not heavy, f"imported before the initialize answer: {{heavy}}"
"""
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        timeout=60,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )


def test_warm_up_loads_what_the_first_session_needs(tmp_path):
    """`server.py` calls `GatewrightAgent.warm_up` once the connection idles after `initialize`, so the first
    `session/new` of an editor that opens its first thread later costs ~2 ms instead of ~100 ms (README)."""
    code = f"""
import sys
from acp_server.agent import AgentConfig, GatewrightAgent
agent = GatewrightAgent(AgentConfig(state_dir={str(tmp_path / "state")!r}))
agent.warm_up()
needed = ("acp_server.session", "runtime.store.journal", "acp_server.methods.sessions", "runtime.loop",
          "runtime.tools.builtin.bash", "runtime.tools.builtin.patch", "runtime.tools.builtin.search", "sqlite3")
missing = [m for m in needed if m not in sys.modules]
assert not missing, missing
assert agent.store_is_open
"""
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        timeout=60,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )


def test_a_model_call_needs_no_provider_sdk(tmp_path):
    """Both providers speak their APIs over httpx2: with `openai` and `anthropic` made unimportable, a streamed call
    to each still works (the SDKs cost 1–3 s and 50–80 MB to import on a fresh process's first prompt)."""
    code = """
import sys
sys.modules["openai"] = None  # `import openai` now raises ImportError
sys.modules["anthropic"] = None
import anyio
from runtime.models.anthropic_messages import AnthropicModel
from runtime.models.base import ModelRequest, TextDelta, TextPart, UserMessage
from runtime.models.config import ModelEntry, ProviderSettings
from runtime.models.openai_compat import OpenAIChatModel
from tests.support.fake_providers import FakeProviders, Reply, anthropic_stream, openai_stream

async def main(fp):
    req = ModelRequest("", (UserMessage((TextPart("hi"),)),), ())
    out = []
    for cls, api, base in ((OpenAIChatModel, "openai", fp.url + "/v1"), (AnthropicModel, "anthropic", fp.url)):
        m = cls(ModelEntry(api + ":m", api, "m", "m"), ProviderSettings(api, api, base_url=base), "k")
        out.append("".join([e.text async for e in m.stream(req) if isinstance(e, TextDelta)]))
        await m.aclose()
    assert out == ["from openai", "from anthropic"], out

with FakeProviders() as fp:
    fp.openai(Reply(frames=openai_stream("from openai")))
    fp.anthropic(Reply(frames=anthropic_stream("from anthropic")))
    anyio.run(main, fp)
"""
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        timeout=60,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )


def test_the_sandbox_helper_starts_without_typing_secrets_or_platform():
    """The helper is a `python -S` process started for the first command (runtime/sandbox/client.py): typing,
    secrets and platform were ~7 ms of its CPU and ~4 MiB of its memory, dataclasses (with inspect, ast, tokenize)
    and tempfile (with shutil, random, bz2, lzma) another ~1.4 MiB, and it needs none of them."""
    code = """
import sys
sys.path.insert(0, sys.argv[1])
import runtime.sandbox.helper
heavy = ("typing", "secrets", "platform", "dataclasses", "inspect", "tempfile", "shutil")
loaded = [m for m in heavy if m in sys.modules]
assert not loaded, f"the sandbox helper imports {loaded}"
"""
    subprocess.run(
        [sys.executable, "-S", "-c", code, str(ROOT)], check=True, timeout=60, cwd=ROOT, env={"PATH": "/usr/bin:/bin"}
    )
