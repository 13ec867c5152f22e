"""What the environment the suite runs in must offer, when `.ci/environments` says which one it built.

`GATEWRIGHT_TEST_ENVIRONMENT` names it (`full`, `landlock-only`, `no-landlock`) and `GATEWRIGHT_TEST_USER` whether
it runs as `root` or an `unprivileged` user; the sandbox must find exactly what that environment allows. Without
this check a filter that failed to install, or a chroot that was not one, would pass for the weaker environment and
the corpus would prove nothing about it. Outside `.ci/environments` the variables are unset and this file skips.
"""

from __future__ import annotations

import os

import pytest

from runtime import sandbox

ENV = os.environ.get("GATEWRIGHT_TEST_ENVIRONMENT")
USER = os.environ.get("GATEWRIGHT_TEST_USER")
pytestmark = pytest.mark.skipif(ENV is None, reason="not run by .ci/environments")


def test_the_sandbox_finds_exactly_what_this_environment_allows():
    found = sandbox.support()
    expected = {"full": (True, True), "landlock-only": (True, False), "no-landlock": (False, True)}[str(ENV)]
    assert (found.active, found.namespaces) == expected, found.describe()
    assert found.network_held, found.describe()  # a net namespace, or the seccomp filter where there is none
    assert found.note == "", found.note  # the helper started as asked
    if ENV == "landlock-only":
        assert "user namespaces are refused" in found.namespaces_why, found.namespaces_why
    if ENV == "no-landlock":
        assert found.landlock_why, found.describe()


def test_the_suite_runs_as_the_user_this_environment_names():
    if USER is None:
        pytest.skip("no user named")
    assert (os.geteuid() == 0) is (USER == "root"), os.geteuid()
    assert sandbox.support().root is (USER == "root")
