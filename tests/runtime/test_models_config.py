"""Model configuration (file, env, flags), the factory, costs, and the pure retry helpers."""

from __future__ import annotations

import email.utils
import subprocess
import sys
import time

import pytest

from runtime.models import ModelFactory, parse_model_spec
from runtime.models.base import Usage
from runtime.models.config import ConfigError, Prices, config_path, is_local_url, load_config, missing_key
from runtime.models.retry import (
    Failure,
    RetryPolicy,
    backoff_delay,
    describe,
    one_line,
    parse_retry_after,
    redact,
)

CONFIG = """
default_model = "sonnet"

[providers.openai]
base_url = "http://file.example/v1"
first_token_timeout = 30

[providers.local]
kind = "openai"
base_url = "http://localhost:8080/v1"

[models.sonnet]
model = "anthropic:claude-sonnet-4-5"
thinking_budget = 4000
prices = { input = 3.0, output = 15.0, cache_read = 0.3, cache_write = 3.75 }

[models.qwen]
model = "local:qwen3-coder"
name = "Qwen3 Coder (local)"
context_window = 32768
images = false
"""


@pytest.fixture
def cfg(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(CONFIG)
    return path


def test_config_path_follows_gatewright_config_then_xdg(tmp_path):
    assert config_path({"GATEWRIGHT_CONFIG": "/x/c.toml", "XDG_CONFIG_HOME": "/y"}) == tmp_path.__class__("/x/c.toml")
    assert str(config_path({"XDG_CONFIG_HOME": "/y"})) == "/y/gatewright/config.toml"


def test_a_missing_config_file_is_an_empty_configuration(tmp_path):
    config = load_config(tmp_path / "nope.toml", env={})
    assert config.models == () and config.default_model is None


def test_named_models_and_providers_are_read_from_the_file(cfg):
    config = load_config(cfg, env={})
    sonnet = config.model("sonnet")
    assert sonnet is not None and sonnet.spec == "anthropic:claude-sonnet-4-5" and sonnet.context_window == 200_000
    assert sonnet.prices == Prices(3.0, 15.0, 0.3, 3.75)
    qwen = config.model("qwen")
    assert qwen is not None and qwen.context_window == 32768 and qwen.name == "Qwen3 Coder (local)"
    local = config.provider("local")
    assert local is not None and local.kind == "openai" and local.api_key_env is None
    openai = config.provider("openai")
    assert openai is not None and openai.first_token_timeout == 30 and openai.api_key_env == "OPENAI_API_KEY"


def test_env_base_url_overrides_the_file(cfg):
    config = load_config(cfg, env={"OPENAI_BASE_URL": "http://env.example/v1"})
    assert config.provider("openai").base_url == "http://env.example/v1"  # type: ignore[union-attr]
    assert config.provider("anthropic").base_url is None  # type: ignore[union-attr]


def test_the_model_flag_overrides_the_default_model_of_the_file(cfg):
    config = load_config(cfg, env={})
    assert ModelFactory(None, config, env={}).default_id == "sonnet"
    flagged = ModelFactory(parse_model_spec("openai:gpt-4.1"), config, env={})
    assert flagged.default_id == "openai:gpt-4.1"
    assert [m.id for m in flagged.choices()] == ["openai:gpt-4.1", "sonnet", "qwen"]
    assert ModelFactory(parse_model_spec("qwen"), config, env={}).default_id == "qwen"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("default_model = 3", "default_model = 3: expected a string"),
        ("[models.x]\nmodel = 'nocolon'", "models.x.model = 'nocolon': expected PROVIDER:MODEL"),
        ("[models.x]\nmodel = 'nowhere:m'", "names provider 'nowhere'"),
        ("[providers.openai]\napi_key = 'sk-123'", "name the variable with api_key_env"),
        ("[providers.foo]\nbase_url = 'http://x'", 'providers.foo.kind is missing: expected "openai"'),
        (
            "[models.x]\nmodel = 'openai:m'\ncontext_window = -1",
            "models.x.context_window = -1: expected a number of at least 0",
        ),
        ("[models.x]\nmodel = 'openai:m'\nprices = { input = 1 }", "models.x.prices.output is missing (required)"),
        ("this is = = not toml", "not valid TOML"),
    ],
)
def test_a_malformed_config_is_refused_with_one_line_naming_file_and_key(tmp_path, text, message):
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert message in str(info.value) and str(path) in str(info.value) and "\n" not in str(info.value)


def test_an_unknown_model_name_or_provider_is_refused_at_start_up(cfg):
    config = load_config(cfg, env={})
    with pytest.raises(ValueError, match="not in the config file"):
        ModelFactory(parse_model_spec("gpt5"), config, env={})
    with pytest.raises(ValueError, match="unknown model provider 'mistral'"):
        ModelFactory(parse_model_spec("mistral:large"), config, env={})


def test_auth_methods_name_each_key_variable_once_and_are_plain_agent_methods(cfg):
    factory = ModelFactory(
        parse_model_spec("openai:gpt-4.1"), load_config(cfg, env={}), env={"OPENAI_API_KEY": "sk-secret-value-123"}
    )
    methods = factory.auth_methods()
    assert [m["id"] for m in methods] == ["env:OPENAI_API_KEY", "env:ANTHROPIC_API_KEY"]
    assert all("type" not in m and m["name"] and m["description"] for m in methods)
    assert methods[0]["_meta"]["gatewright"]["vars"] == [{"name": "OPENAI_API_KEY", "secret": True}]
    assert "sk-secret-value-123" not in str(methods)


def test_images_are_on_for_hosted_models_and_opt_in_for_self_hosted(cfg):
    factory = ModelFactory(None, load_config(cfg, env={}), env={})
    assert factory.create("sonnet").accepts_images  # type: ignore[union-attr]
    assert not factory.create("qwen").accepts_images  # type: ignore[union-attr]


def test_clients_are_shared_between_sessions_but_scripted_models_are_not(cfg, tmp_path):
    factory = ModelFactory(None, load_config(cfg, env={}), env={})
    assert factory.create() is factory.create()
    script = tmp_path / "s.json"
    script.write_text('{"responses": []}')
    scripted = ModelFactory(parse_model_spec(f"scripted:{script}"), load_config(cfg, env={}), env={})
    assert scripted.create() is not scripted.create() and scripted.choices() == ()


def test_cost_prices_cached_and_uncached_prompt_tokens_separately():
    prices = Prices(3.0, 15.0, cache_read=0.3, cache_write=3.75)
    usage = Usage(
        input_tokens=1_000_000 + 2_000_000 + 100_000,
        output_tokens=10_000,
        cached_read_tokens=2_000_000,
        cached_write_tokens=100_000,
    )
    assert prices.cost(usage) == pytest.approx(3.0 + 0.6 + 0.375 + 0.15)
    assert Prices(1.0, 2.0).cost(Usage(500_000, 500_000, cached_read_tokens=500_000)) == pytest.approx(1.5)


def test_starting_the_cli_imports_no_provider_sdk():
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import acp_server.cli, runtime.models"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    imported = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines() if "|" in line}
    assert not imported & {"openai", "anthropic", "httpx", "httpx2", "httpcore", "httpcore2"}


# ---- retry helpers -------------------------------------------------------------------------------------------------
def test_retry_after_reads_milliseconds_seconds_and_http_dates():
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert 28 <= parse_retry_after({"retry-after": date}, now=now) <= 31  # type: ignore[operator]
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_backoff_grows_exponentially_with_jitter_and_is_capped():
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0)
    assert backoff_delay(1, policy, rand=lambda: 0.0) == 0.5
    assert backoff_delay(1, policy, rand=lambda: 1.0) == 1.0
    assert backoff_delay(3, policy, rand=lambda: 1.0) == 4.0
    assert backoff_delay(10, policy, rand=lambda: 1.0) == 5.0
    assert backoff_delay(2, policy, retry_after=7.5) == 7.5


def test_redaction_removes_the_key_and_anything_that_looks_like_a_credential():
    text = "bad key sk-live-abcdefgh1234 and Bearer tok_123 and mine=MYSECRETVALUE"
    out = redact(text, ("MYSECRETVALUE",))
    assert "sk-live" not in out and "tok_123" not in out and "MYSECRETVALUE" not in out


def test_failure_descriptions_are_single_lines():
    long = one_line("line one\nline two " + "x" * 500)
    assert "\n" not in long and len(long) <= 300
    assert (
        describe(Failure("auth", "nope", 401), "openai", 1, "Check OPENAI_API_KEY.")
        == "openai refused the credentials (HTTP 401): nope. Check OPENAI_API_KEY."
    )


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://localhost:11434/v1", True),
        ("http://127.0.0.1:8080/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://192.168.1.20:1234/v1", True),
        ("http://10.0.0.5/v1", True),
        ("http://ollama:11434/v1", True),  # a single-label name: a container or a LAN host
        ("http://gpu-box.local:8000/v1", True),
        ("https://api.deepseek.com/v1", False),
        ("https://openrouter.ai/api/v1", False),
        ("http://8.8.8.8/v1", False),
        ("not a url", False),
    ],
)
def test_a_built_in_provider_needs_no_key_only_at_a_local_address(url, local):
    assert is_local_url(url) is local
    settings = load_config(env={"OPENAI_BASE_URL": url, "XDG_CONFIG_HOME": "/nonexistent"}).provider("openai")
    assert settings is not None
    assert missing_key(settings, {}) == (None if local else "OPENAI_API_KEY")
    assert missing_key(settings, {"OPENAI_API_KEY": "sk-x"}) is None
