"""The official TypeScript SDK (`@agentclientprotocol/sdk` 2.4.0, the release that ships schema 1.25) as the client
of the real binary (tests/e2e/ts_sdk_client.mjs): `initialize` with the newer capabilities, a session with
`additionalDirectories`, a prompt whose permission question it answers, the newer updates as it parses them
(`notice`, `name` on tool calls, `messageId` on chunks, `updatedAt`), then `logout`. The SDK is installed from npm
into `.ci/ts-sdk` (pinned); without Node the test is skipped, except in CI (`GATEWRIGHT_REQUIRE_TS_SDK=1`)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.harness import write_script

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[2]
PREFIX = REPO / ".ci" / "ts-sdk"
SDK_VERSION = "2.4.0"
SCRIPT = Path(__file__).with_name("ts_sdk_client.mjs")


def install_ts_sdk() -> Path:
    """Install the pinned SDK into `.ci/ts-sdk` with npm, once (what `.ci/run` calls before the tests)."""
    marker = PREFIX / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"
    PREFIX.mkdir(parents=True, exist_ok=True)
    with open(PREFIX / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists() or json.loads(marker.read_text())["version"] != SDK_VERSION:
            npm = ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", str(PREFIX)]
            proc = subprocess.run(
                [*npm, f"@agentclientprotocol/sdk@{SDK_VERSION}"], capture_output=True, text=True, timeout=600
            )
            if proc.returncode != 0 or not marker.exists():
                raise RuntimeError(f"npm could not install @agentclientprotocol/sdk@{SDK_VERSION}:\n{proc.stderr}")
    return PREFIX


@pytest.fixture(scope="module")
def sdk() -> Path:
    if not (shutil.which("node") and shutil.which("npm")):
        if os.environ.get("GATEWRIGHT_REQUIRE_TS_SDK"):
            pytest.fail("Node and npm are required here (GATEWRIGHT_REQUIRE_TS_SDK)")
        pytest.skip("no Node or npm")
    return install_ts_sdk()


def test_the_typescript_sdk_client_gets_two_roots_the_newer_updates_and_logout(sdk, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    model = write_script(
        tmp_path / "m.json",
        [
            {
                "thinking": "two roots",
                "tool_calls": [
                    {"id": "c1", "name": "write_file", "arguments": {"path": str(two / "t.txt"), "content": "ts\n"}}
                ],
            },
            {"text": "Wrote it in the second root.", "chunks": 3},
        ],
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "GATEWRIGHT_STATE_DIR": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "GATEWRIGHT_SANDBOX": "off",  # the no-sandbox notice is one of the newer updates this client takes
    }
    agent = [sys.executable, "-m", "acp_server", "--model", f"scripted:{model}"]
    proc = subprocess.run(
        ["node", str(SCRIPT), str(sdk), str(one), str(two), "--", *agent],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    caps = seen["init"]["agentCapabilities"]
    assert caps["sessionCapabilities"]["additionalDirectories"] == {} and caps["auth"] == {"logout": {}}
    assert [m["type"] for m in seen["init"]["authMethods"]] == ["terminal"]
    assert seen["result"]["stopReason"] == "end_turn" and seen["logout"] == {}
    assert (two / "t.txt").read_text() == "ts\n"  # the second root is the workspace
    (question,) = seen["permissions"]
    assert question["toolCall"]["name"] == "write_file"
    updates = seen["updates"]
    kinds = [u["sessionUpdate"] for u in updates]
    assert "notice" in kinds and "No sandbox" in json.dumps([u for u in updates if u["sessionUpdate"] == "notice"])
    (call,) = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    assert call["name"] == "write_file"
    chunks = [u for u in updates if u["sessionUpdate"] in ("agent_message_chunk", "agent_thought_chunk")]
    assert chunks and all(u.get("messageId") for u in chunks)
    assert len({u["messageId"] for u in chunks if u["sessionUpdate"] == "agent_message_chunk"}) == 1
    assert any(u["sessionUpdate"] == "session_info_update" and u.get("updatedAt") for u in updates)
