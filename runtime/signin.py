"""`gatewright setup` (also `gatewright acp setup`: ACP's terminal auth method appends its args to the agent's
command): sign in on the terminal, with prompt_toolkit.

1. the provider: OpenAI, Anthropic, or any OpenAI-compatible server by URL (Ollama, llama.cpp, LM Studio, vLLM,
   OpenRouter…);
2. the key, typed hidden; a server that lists its models without one (a local server) is not asked for one;
3. one real request verifies it (the provider's model list), and a refusal or an unreachable server is said in one
   line, then asked again;
4. the default model, from that list (Tab completes) where the provider has one;
5. the key goes to the credentials file (`runtime.credentials`: 0600 in the config dir), the choices into
   `config.toml` (`default_model`, and a `[providers.NAME]` table for a server by URL), edited with tomlkit so that
   the user's comments, order and other keys stay as they were; the file is checked before it is replaced.

After it, `gatewright acp` with no flags answers with the chosen model. Exit 0 when signed in, 1 when the user
stopped (Ctrl-C, Ctrl-D), 2 without a terminal or when the config file cannot be used; nothing is written before the
last step.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx2
import tomlkit
from prompt_toolkit import prompt
from prompt_toolkit.completion import FuzzyWordCompleter
from prompt_toolkit.shortcuts import choice
from prompt_toolkit.validation import Validator

from runtime import credentials
from runtime.models.config import ConfigError, config_path, parse_config

EXIT_OK, EXIT_STOPPED, EXIT_CONFIG = 0, 1, 2
VERIFY_TIMEOUT_S = 15.0
# The model offered first when the provider lists it (else the first of the list).
PREFERRED = ("claude-sonnet-4-5", "claude-sonnet-4", "gpt-4.1", "gpt-5", "gpt-4o")
LOCAL_URL = "http://localhost:11434/v1"  # Ollama's OpenAI-compatible endpoint


@dataclass(frozen=True, slots=True)
class Provider:
    name: str  # the provider's name in the config file and in `PROVIDER:MODEL`
    kind: str  # openai | anthropic
    base_url: str
    key_var: str  # where its key is read from (the environment first, then the credentials file)
    builtin: bool


class Stopped(Exception):
    """The user left (Ctrl-C, Ctrl-D)."""


def run_setup(env: Mapping[str, str] | None = None, out: Any = None) -> int:
    env = os.environ if env is None else env
    out = out or sys.stdout
    if not sys.stdin.isatty():
        sys.stderr.write("gatewright: setup asks questions: run it in a terminal (`gatewright setup`)\n")
        return EXIT_CONFIG
    try:
        return _setup(env, out)
    except (Stopped, KeyboardInterrupt, EOFError):
        out.write("\nSetup stopped: nothing was changed.\n")
        return EXIT_STOPPED


def _setup(env: Mapping[str, str], out: Any) -> int:
    cfg = config_path(env)
    try:
        doc = _read_config(cfg)
    except ConfigError as exc:
        out.write(f"gatewright: {exc}\n")
        return EXIT_CONFIG
    out.write("gatewright setup: sign in to a model provider.\n")
    kind = choice(
        "Which provider?",
        options=[
            ("openai", "OpenAI"),
            ("anthropic", "Anthropic"),
            ("compatible", "An OpenAI-compatible server by URL (Ollama, llama.cpp, LM Studio, vLLM, OpenRouter…)"),
        ],
    )
    provider = _provider(kind, env)
    while True:
        models, key = _verify(provider, out)
        if models is not None:
            break
    model = _pick_model(models, out)
    if key:
        where = credentials.store(provider.key_var, key, env)
        out.write(f"Key saved in {where} (only you can read it).\n")
        if env.get(provider.key_var):
            out.write(f"Note: {provider.key_var} is set in this environment, and wins over the saved key.\n")
    _write_config(cfg, doc, provider, model, bool(key))
    out.write(f"Signed in: gatewright will use {provider.name}:{model} (default_model in {cfg}).\n")
    return EXIT_OK


def _provider(kind: str, env: Mapping[str, str]) -> Provider:
    if kind == "openai":
        return Provider(
            "openai", "openai", env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1", "OPENAI_API_KEY", True
        )
    if kind == "anthropic":
        url = env.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
        return Provider("anthropic", "anthropic", url, "ANTHROPIC_API_KEY", True)
    while True:
        url = prompt("Server URL (the base of its /models and /chat/completions): ", default=LOCAL_URL).strip()
        parsed = urlparse(url)
        if parsed.scheme in ("http", "https") and parsed.hostname:
            break
    name = _name_for(parsed.hostname or "")
    return Provider(name, "openai", url.rstrip("/"), f"{name.upper()}_API_KEY", False)


def _name_for(host: str) -> str:
    """A provider name for a server: `local` on this machine, else its domain's name (`openrouter`)."""
    if host in ("localhost", "127.0.0.1", "::1") or host.endswith(".localhost"):
        return "local"
    parts = [p for p in host.split(".") if p and not p.isdigit()]
    name = re.sub(r"[^a-z0-9]+", "_", (parts[-2] if len(parts) >= 2 else parts[0] if parts else "server").lower())
    return name if name not in ("openai", "anthropic") else f"{name}_compatible"


def _verify(provider: Provider, out: Any) -> tuple[list[str] | None, str]:
    """One real request (the model list): the models and the key that worked, or (None, "") to ask again."""
    key = ""
    if not provider.builtin:
        status, models, detail = _list_models(provider, "")
        if status == 200:
            out.write(f"{provider.base_url} answers without a key.\n")
            return models, ""
        if status is None:
            out.write(f"Could not reach {provider.base_url}: {detail}\n")
            if prompt("Try again? [Y/n] ").strip().lower() in ("n", "no"):
                raise Stopped()
            return None, ""
    label = {"openai": "OpenAI", "anthropic": "Anthropic"}.get(provider.name) if provider.builtin else None
    question = f"{label} API key (hidden): " if label else f"API key for {provider.base_url} (hidden): "
    key = str(prompt(question, is_password=True)).strip()
    if not key:
        out.write("No key typed.\n")
        return None, ""
    status, models, detail = _list_models(provider, key)
    if status == 200:
        out.write(f"The key works: {provider.base_url} listed {len(models)} model(s).\n")
        return models, key
    if status in (401, 403):
        out.write(f"{provider.base_url} refused the key (HTTP {status}: {detail}). Type it again.\n")
        return None, ""
    if status == 404:  # a server without a model list: the key could not be checked here
        out.write(f"{provider.base_url} has no model list (HTTP 404); the key will be tried with the first prompt.\n")
        return [], key
    what = f"HTTP {status}: {detail}" if status is not None else detail
    out.write(f"Could not verify the key at {provider.base_url} ({what}).\n")
    if prompt("Try again? [Y/n] ").strip().lower() in ("n", "no"):
        raise Stopped()
    return None, ""


def _list_models(provider: Provider, key: str) -> tuple[int | None, list[str], str]:
    """GET the provider's model list: (status, model ids, the server's message); status None: not reached."""
    base = provider.base_url.rstrip("/")
    headers = {"user-agent": "gatewright-setup"}
    if provider.kind == "anthropic":
        url = (base if base.endswith("/v1") else base + "/v1") + "/models?limit=1000"
        headers["anthropic-version"] = "2023-06-01"
        if key:
            headers["x-api-key"] = key
    else:
        url = base + "/models"
        if key:
            headers["authorization"] = f"Bearer {key}"
    try:
        with httpx2.Client(timeout=VERIFY_TIMEOUT_S) as client:
            resp = client.get(url, headers=headers)
    except httpx2.HTTPError as exc:
        return None, [], f"{type(exc).__name__}: {exc}"
    try:
        body = resp.json()
    except ValueError:
        body = None
    if resp.status_code != 200:
        message = ""
        if isinstance(body, dict):
            err = body.get("error")
            message = str(err.get("message") if isinstance(err, dict) else err or body.get("message") or "")
        return resp.status_code, [], message[:300] or resp.reason_phrase
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        data = body.get("models") if isinstance(body, dict) else None  # some servers answer {"models": [...]}
    ids = sorted(
        {
            str(m.get("id") or m.get("name"))
            for m in data or []
            if isinstance(m, dict) and (m.get("id") or m.get("name"))
        }
    )
    return 200, ids, ""


def _pick_model(models: list[str], out: Any) -> str:
    if not models:
        while True:
            name = prompt("Default model (its name on the server): ").strip()
            if name:
                return name
    default = next((m for p in PREFERRED for m in models if m == p), None) or next(
        (m for p in PREFERRED for m in models if m.startswith(p)), models[0]
    )
    shown = ", ".join(models[:8]) + (f", … ({len(models)} in all)" if len(models) > 8 else "")
    out.write(f"Models: {shown}\n")
    known = set(models)
    valid = Validator.from_callable(lambda t: t.strip() in known, error_message="not one of the provider's models")
    return str(
        prompt(
            "Default model (Tab completes): ", default=default, completer=FuzzyWordCompleter(models), validator=valid
        )
    ).strip()


# ---- the config file -----------------------------------------------------------------------------------------------
def _read_config(cfg: Path) -> Any:
    try:
        text = cfg.read_text(encoding="utf-8")
    except FileNotFoundError:
        return tomlkit.document()
    except OSError as exc:
        raise ConfigError(f"config file {cfg}: cannot be read ({exc.strerror})") from None
    try:
        return tomlkit.parse(text)
    except Exception as exc:  # tomlkit's parse errors have no common public base
        raise ConfigError(f"config file {cfg}: is not valid TOML ({exc}); fix it, then run setup again") from None


def _write_config(cfg: Path, doc: Any, provider: Provider, model: str, keyed: bool) -> None:
    doc["default_model"] = f"{provider.name}:{model}"
    if not provider.builtin:
        providers = doc.get("providers")
        if providers is None:
            providers = doc["providers"] = tomlkit.table(is_super_table=True)
        table = providers.get(provider.name)
        if table is None:
            table = providers[provider.name] = tomlkit.table()
        table["kind"] = provider.kind
        table["base_url"] = provider.base_url
        if keyed:
            table["api_key_env"] = provider.key_var
        elif "api_key_env" in table:
            del table["api_key_env"]
    text = tomlkit.dumps(doc)
    parse_config(tomlkit.parse(text).unwrap(), str(cfg))  # the file as written must be one gatewright reads
    cfg.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = cfg.with_name(f".{cfg.name}.setup.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    if cfg.exists():
        os.chmod(tmp, cfg.stat().st_mode & 0o777)
    os.replace(tmp, cfg)
