"""How the sandbox's own Python processes start: the helper and the editor-terminal launcher run this install's code,
and nothing a workspace, a user's site directory or an environment variable could put in their way.

Both run unconfined until they apply a sandbox, so what they import must be the install's. They start as
`python -I -S -c BOOT INSTALL_ROOT ...`:
- `-I` (isolated): no current directory and no script directory on `sys.path` (a workspace `json.py`, `socket.py`
  or `runtime/sandbox/__main__.py` is never found), no user site directory, and every `PYTHON*` variable ignored
  (`PYTHONPATH`, `PYTHONSTARTUP`, `PYTHONHOME`, `PYTHONUSERBASE`, ...);
- `-S`: no `site` at all, so no `sitecustomize`/`usercustomize` and no `.pth` file of any site directory runs;
- `INSTALL_ROOT` (the directory holding this `runtime` package) is *appended* to `sys.path`, after the standard
  library: a module of the install's directory cannot shadow a standard one either.

What does not hold: when the install itself lies inside a workspace root (an editable install of the checkout you
are working on, or a virtual environment inside the project), the install's files are workspace files, and a command
allowed to write the workspace can change the code these processes (and the agent's next start) run.
"""

from __future__ import annotations

import os
import sys

# The directory holding the `runtime` package: the checkout of an editable install, else site-packages.
INSTALL_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
ISOLATION = ("-I", "-S")

_PATH = "import sys; sys.path.append(sys.argv[1]); "
HELPER_BOOT = _PATH + "from runtime.sandbox.helper import main; main(int(sys.argv[2]))"
LAUNCHER_BOOT = _PATH + "from runtime.sandbox.__main__ import main; sys.exit(main(sys.argv[2:]))"


def interpreter(boot: str) -> list[str]:
    """The argv prefix that runs `boot` in an isolated interpreter of this install (its arguments follow)."""
    return [sys.executable, *ISOLATION, "-c", boot, INSTALL_ROOT]
