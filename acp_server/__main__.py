"""`python -m acp_server` is the same as `gatewright acp`."""

import sys

from acp_server.cli import main_acp

sys.exit(main_acp())
