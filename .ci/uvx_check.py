"""CI: `uvx --from <built wheel> gatewright acp` (the ACP Registry's uvx distribution, run as the registry's verifier
runs it) answers `initialize` with an auth method of type agent or terminal.

    python .ci/uvx_check.py path/to/gatewright-X.Y.Z-py3-none-any.whl

uv resolves the wheel's dependencies from the package index into its own cache (a temporary one), in an empty HOME;
the answer must come within the time an editor waits.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: the verifier's request, once
from tests.support.registry import VERIFIER_INITIALIZE, method_type


def main(wheel: str) -> int:
    uvx = shutil.which("uvx")
    if uvx is None:
        sys.stderr.write("uvx_check: uvx is not installed (pip install uv)\n")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        home = os.path.join(tmp, "home")
        os.mkdir(home)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWRIGHT_", "XDG_", "VIRTUAL_ENV"))}
        env.update(HOME=home, TERM="dumb", UV_CACHE_DIR=os.path.join(tmp, "uv-cache"))
        proc = subprocess.run(
            [uvx, "--from", wheel, "gatewright", "acp"],
            input=json.dumps(VERIFIER_INITIALIZE) + "\n",
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            timeout=600,
        )
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or not lines:
        sys.stderr.write(f"uvx_check: exit {proc.returncode}, no answer:\n{proc.stderr[-3000:]}\n")
        return 1
    result = json.loads(lines[0]).get("result") or {}
    kinds = [method_type(m) for m in result.get("authMethods", [])]
    if result.get("protocolVersion") != 1 or not set(kinds) & {"agent", "terminal"}:
        sys.stderr.write(f"uvx_check: unexpected answer: {lines[0][:2000]}\n")
        return 1
    sys.stdout.write(f"uvx_check: uvx --from {os.path.basename(wheel)} gatewright acp answered initialize ({kinds})\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
