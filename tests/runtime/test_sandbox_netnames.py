"""Network by name (`runtime.sandbox.netnames`): what a `[sandbox] network` entry names, and what it lets through."""

from __future__ import annotations

import pytest

from runtime.config import parse_sandbox
from runtime.models.config import ConfigError
from runtime.sandbox.netnames import (
    HostPattern,
    allowed,
    loopback_named,
    normalise_host,
    parse_pattern,
    parse_patterns,
    refusal,
)


@pytest.mark.parametrize(
    ("entry", "host", "wildcard", "port"),
    [
        ("pypi.org", "pypi.org", False, None),
        ("PyPI.org.", "pypi.org", False, None),
        ("*.pythonhosted.org", "pythonhosted.org", True, None),
        ("registry.local:4873", "registry.local", False, 4873),
        ("*.corp.example:8443", "corp.example", True, 8443),
        ("127.0.0.1", "127.0.0.1", False, None),
        ("127.0.0.1:8080", "127.0.0.1", False, 8080),
        ("::1", "::1", False, None),
        ("[::1]:8080", "::1", False, 8080),
        ("[0:0::1]", "::1", False, None),
        ("  localhost  ", "localhost", False, None),
        ("bücher.example", "xn--bcher-kva.example", False, None),
        ("my_host.internal", "my_host.internal", False, None),
    ],
)
def test_an_entry_is_read_as_a_host_a_wildcard_and_a_port(entry, host, wildcard, port):
    assert parse_pattern(entry) == HostPattern(host, wildcard, port)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("", "not a host name"),
        ("https://pypi.org", "URL or a path"),
        ("pypi.org/simple", "URL or a path"),
        ("user@pypi.org", "URL or a path"),
        ("*", "every host"),
        ("*:443", "every host"),
        ("a.*.org", "first label"),
        ("**.org", "first label"),
        ("*.127.0.0.1", "not addresses"),
        ("pypi.org:0", "port must be"),
        ("pypi.org:65536", "port must be"),
        ("pypi.org:http", "port must be"),
        ("pypi .org", "not a host name"),
        ("-bad.org", "not a host name"),
        ("a..b", "not a host name"),
        ("[::1", "not a host name"),
        ("[::1]x", "not a host name"),
        ("[nope]", "not a host name"),
        ("a" * 64 + ".org", "not a host name"),
    ],
)
def test_an_entry_that_names_no_host_is_refused_with_what_to_write(entry, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        parse_pattern(entry)


PATTERNS = parse_patterns(["pypi.org", "*.pythonhosted.org", "localhost:8000", "[::1]:9000", "10.0.0.1"])


@pytest.mark.parametrize(
    ("host", "port", "ok"),
    [
        ("pypi.org", 443, True),
        ("pypi.org", 80, True),
        ("www.pypi.org", 443, False),  # an exact name is not a domain
        ("evilpypi.org", 443, False),
        ("pypi.org.evil.example", 443, False),
        ("files.pythonhosted.org", 443, True),
        ("a.b.pythonhosted.org", 443, True),
        ("pythonhosted.org", 443, False),  # a wildcard is the names below it, not the name itself
        ("xpythonhosted.org", 443, False),
        ("localhost", 8000, True),
        ("localhost", 8001, False),
        ("127.0.0.1", 8000, False),  # the name is compared, never its resolution
        ("::1", 9000, True),
        ("::1", 9001, False),
        ("10.0.0.1", 22, True),
    ],
)
def test_a_connection_passes_only_when_an_entry_names_its_host_and_port(host, port, ok):
    assert allowed(PATTERNS, host, port) is ok


@pytest.mark.parametrize(
    ("text", "host"),
    [
        ("Example.ORG.", "example.org"),
        ("[::1]", "::1"),
        ("::ffff:127.0.0.1", "::ffff:7f00:1"),
        ("127.0.0.1", "127.0.0.1"),
        ("", None),
        ("a b", None),
        ("a/b", None),
        ("[::1", None),
        ("x" * 254, None),
    ],
)
def test_a_requested_host_is_normalised_the_way_entries_are(text, host):
    assert normalise_host(text) == host


def test_the_refusal_line_names_the_host_and_says_when_only_the_port_is_not_listed():
    assert refusal(PATTERNS, "example.com", 443) == "gatewright: example.com is not in [sandbox] network"
    assert refusal(PATTERNS, "localhost", 8001) == "gatewright: port 8001 of localhost is not in [sandbox] network"
    assert refusal(PATTERNS, "::2", 80) == "gatewright: [::2] is not in [sandbox] network"


def test_duplicates_are_dropped_and_entries_print_as_written():
    got = parse_patterns(["pypi.org", "PYPI.org", "*.x.org:1", "[::1]:2", "::1"])
    assert [str(p) for p in got] == ["pypi.org", "*.x.org:1", "[::1]:2", "::1"]


@pytest.mark.parametrize(
    ("entries", "named"),
    [
        (["pypi.org"], False),
        (["localhost:4873"], True),
        (["127.0.0.1"], True),
        (["127.9.9.9:1"], True),
        (["[::1]:8080"], True),
        (["*.localhost"], True),
        (["*.example.org"], False),
        (["app.localhost"], True),
        ([], False),
    ],
)
def test_an_entry_naming_the_loopback_is_told_apart(entries, named):
    assert loopback_named(parse_patterns(entries)) is named


# ---- the config file's key -----------------------------------------------------------------------------------------
def test_the_config_key_is_read_as_the_entries_normalised_and_absent_means_every_host():
    assert parse_sandbox({}, "config file c.toml").network is None
    assert parse_sandbox({"network": []}, "config file c.toml").network == ()
    got = parse_sandbox({"network": ["PyPI.org", "*.pythonhosted.org", "pypi.org", "[::1]:80"]}, "c")
    assert got.network == ("pypi.org", "*.pythonhosted.org", "[::1]:80")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "sandbox.network = true: expected a list"),
        ("pypi.org", "sandbox.network = 'pypi.org': expected a list"),
        (["pypi.org", 3], "sandbox.network[1] = 3: expected a string"),
        (
            ["pypi.org", "https://files.pythonhosted.org/"],
            "sandbox.network[1] = 'https://files.pythonhosted.org/': expected a host name",
        ),
        (["*"], "sandbox.network[0] = '*': expected a host name"),
    ],
)
def test_a_network_entry_it_cannot_read_exactly_stops_the_start_naming_it(value, message):
    with pytest.raises(ConfigError) as info:
        parse_sandbox({"network": value}, "config file c.toml")
    assert str(info.value).startswith("config file c.toml: " + message), str(info.value)
