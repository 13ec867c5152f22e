"""The pydantic models of what a user writes: the `GATEWRIGHT_*` variables (built from `runtime.settings.VARIABLES`)
and the config file, every key of every table, typed. `check` validates both and answers with the values as checked,
or raises `ConfigError` with one line: where (the variable, or the file and the key), what it got, what it accepts.

Loaded only when `runtime.settings.check` has something it has not checked before (`runtime.lazy`): importing
pydantic and building these models costs ~75 ms, which an unchanged configuration never pays at start-up.

The models hold no defaults: a key that is not written stays unset, and the runtime's records
(`runtime.models.config`, `runtime.config`) fill in their own defaults, so each default is written once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model

from runtime import lazy
from runtime.models.config import ConfigError
from runtime.settings import VARIABLES, Variable

Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]


class _Table(BaseModel):
    """A table of the config file: unknown keys refused, values of the exact TOML type (no "10" for 10)."""

    model_config = ConfigDict(extra="forbid", strict=True)


def _config_path(raw: str) -> str:
    path = os.path.expanduser(raw) if raw == "~" or raw.startswith("~/") else raw
    if not raw or "\x00" in raw or not os.path.isabs(path):
        raise ValueError(
            "an absolute path or one that starts with ~/ (a relative path would mean another place in every project)"
        )
    return raw


ConfigPath = Annotated[str, AfterValidator(_config_path)]


def _host_entry(raw: str) -> str:
    try:
        return str(lazy.netnames.parse_pattern(raw))
    except ValueError as exc:
        raise ValueError(
            f'a host name ("pypi.org"), "*.example.org" for every name below it, or an address, each optionally with '
            f'":PORT" ({exc})'
        ) from None


HostEntry = Annotated[str, AfterValidator(_host_entry)]


class ProviderTable(_Table):
    """`[providers.NAME]`: a model provider (the built-in `openai` and `anthropic`, or any server of a kind)."""

    kind: Literal["openai", "anthropic"] | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    headers: dict[str, str] | None = None
    connect_timeout: Seconds | None = None
    first_token_timeout: Seconds | None = None
    idle_timeout: Seconds | None = None
    max_retries: Count | None = None
    retry_base_delay: Seconds | None = None
    retry_max_delay: Seconds | None = None
    send_reasoning: bool | None = None


class PricesTable(_Table):
    """`prices = {...}` of a model: per million tokens."""

    input: Annotated[float, Field(ge=0)]
    output: Annotated[float, Field(ge=0)]
    cache_read: Annotated[float, Field(ge=0)] | None = None
    cache_write: Annotated[float, Field(ge=0)] | None = None
    currency: str | None = None


class ModelTable(_Table):
    """`[models.NAME]`: a model in the editor's picker."""

    model: Annotated[str, Field(pattern=r"^[^:]+:.+$")]
    name: str | None = None
    description: str | None = None
    context_window: Count | None = None
    max_tokens: Count | None = None
    thinking_budget: Count | None = None
    reasoning_effort: str | None = None
    images: bool | None = None
    prices: PricesTable | None = None


class PermissionsTable(_Table):
    """`[permissions]`: the default mode and the exact rules (`bash:COMMAND`)."""

    mode: Literal["safe", "manual", "auto", "read-only"] | None = None
    allow: list[str] | None = None
    deny: list[str] | None = None


class SandboxTable(_Table):
    """`[sandbox]`: what every command may reach beyond the default sandbox."""

    read: list[ConfigPath] | None = None
    write: list[ConfigPath] | None = None
    network: list[HostEntry] | None = None


class ConfigFile(_Table):
    """The whole file."""

    default_model: str | None = None
    providers: dict[str, ProviderTable] | None = None
    models: dict[str, ModelTable] | None = None
    permissions: PermissionsTable | None = None
    sandbox: SandboxTable | None = None


TABLES: dict[str, type[_Table]] = {
    "": ConfigFile,
    "providers.NAME": ProviderTable,
    "models.NAME": ModelTable,
    "models.NAME.prices": PricesTable,
    "permissions": PermissionsTable,
    "sandbox": SandboxTable,
}
BUILTIN_PROVIDERS = ("openai", "anthropic")


def _environment_field(v: Variable) -> tuple[Any, Any]:
    kind: Any = str
    if v.kind == "choice":
        kind = Literal.__getitem__(v.choices)
        if v.case_insensitive:  # the choices' own case, whatever the case written
            fold = {c.lower(): c for c in v.choices}
            kind = Annotated[
                kind, BeforeValidator(lambda s: fold.get(s.strip().lower(), s) if isinstance(s, str) else s)
            ]
    elif v.kind == "integer":
        kind = Annotated[int, Field(ge=v.minimum)] if not v.exclusive else Annotated[int, Field(gt=v.minimum)]
    elif v.kind == "seconds":
        bound = (
            Field(allow_inf_nan=False, ge=v.minimum) if not v.exclusive else Field(allow_inf_nan=False, gt=v.minimum)
        )
        kind = Annotated[float, bound]
    return (kind | None, Field(default=None, alias=v.name))


_FIELDS: dict[str, Any] = {v.name.lower(): _environment_field(v) for v in VARIABLES}
Environment: type[BaseModel] = create_model("Environment", __config__=ConfigDict(extra="ignore"), **_FIELDS)


def check(
    variables: Mapping[str, str], data: bytes | None, source: str | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Validate `variables` (name → the value set) and the config file's bytes. Returns the variables' checked
    values (name → value) and the file's document as checked (only the keys it has). Raises `ConfigError`."""
    try:
        env = Environment.model_validate(dict(variables))
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0])
        got = variables.get(name, "")
        raise ConfigError(f"{name}={_shown(got)}: expected {_variable(name).accepts()}") from None
    values = {v.name: getattr(env, v.name.lower()) for v in VARIABLES if v.name in variables}
    if data is None:
        return values, None
    try:
        doc = lazy.tomllib.loads(data.decode("utf-8"))
    except (lazy.tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {source}: not valid TOML ({exc})") from None
    return values, check_document(doc, source)


def check_document(doc: Mapping[str, Any], source: str | None) -> dict[str, Any]:
    """A config file's TOML document, checked: the keys it has, as checked. Raises `ConfigError`."""
    where = f"config file {source}"
    try:
        checked = ConfigFile.model_validate(doc)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {_problem(exc.errors()[0])}") from None
    _check_references(checked, where)
    return checked.model_dump(exclude_unset=True)


def check_table(name: str, table: Any, where: str) -> dict[str, Any]:
    """One top-level table of the file (`permissions`, `sandbox`), checked: its keys as checked."""
    try:
        checked = ConfigFile.model_validate({name: table})
    except ValidationError as exc:
        raise ConfigError(f"{where}: {_problem(exc.errors()[0])}") from None
    return dict(checked.model_dump(exclude_unset=True).get(name) or {})


def _variable(name: str) -> Variable:
    return next(v for v in VARIABLES if v.name == name)


def _shown(value: Any) -> str:
    text = str(value)
    return text if text.isprintable() and " " not in text and text else repr(text)


def _check_references(config: ConfigFile, where: str) -> None:
    """What one table says of another: a model names a provider that is built in or configured; a configured
    provider that is not built in says its kind."""
    providers = config.providers or {}
    for name, table in providers.items():
        if table.kind is None and name not in BUILTIN_PROVIDERS:
            raise ConfigError(
                f'{where}: providers.{name}.kind is missing: expected "openai" (any OpenAI-compatible server) or '
                '"anthropic"'
            )
    for mid, model in (config.models or {}).items():
        provider = model.model.partition(":")[0]
        if provider not in providers and provider not in BUILTIN_PROVIDERS:
            raise ConfigError(
                f"{where}: models.{mid}.model = {model.model!r} names provider {provider!r}, which is neither built "
                "in nor configured"
            )


_ACCEPTS = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}


def _problem(err: Mapping[str, Any]) -> str:
    loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
    key = _dotted(loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        allowed = ", ".join(_allowed(loc[:-1]))
        hint = (
            " (keys are never read from the config: name the variable with api_key_env)"
            if loc and loc[-1] == "api_key"
            else ""
        )
        return f"{key}: unknown key (expected one of: {allowed}){hint}"
    if kind == "missing":
        return f"{key} is missing (required)"
    got = f" = {_toml(err.get('input'))}"
    ctx = err.get("ctx") or {}
    if kind == "literal_error":
        return f"{key}{got}: expected one of {ctx.get('expected', '')}"
    if kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        return f"{key}{got}: expected a number {'of at least' if kind == 'greater_than_equal' else 'above'} {bound}"
    if kind == "string_pattern_mismatch" and loc[-1:] == ["model"]:
        return f'{key}{got}: expected PROVIDER:MODEL, e.g. "openai:gpt-4.1"'
    if kind == "value_error":
        return f"{key}{got}: expected {str(ctx.get('error', err['msg']))}"
    if kind == "finite_number":
        return f"{key}{got}: expected a finite number"
    return f"{key}{got}: expected {_ACCEPTS.get(kind, err['msg'])}"


def _dotted(loc: list[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the whole file)"


def _allowed(loc: list[Any]) -> list[str]:
    """The keys the table at `loc` takes."""
    shape = [p for i, p in enumerate(loc) if not (i == 1 and loc[0] in ("providers", "models"))]
    name = ".".join(str(p) for p in shape)
    name = {"providers": "providers.NAME", "models": "models.NAME", "models.prices": "models.NAME.prices"}.get(
        name, name
    )
    model = TABLES.get(name, ConfigFile)
    return sorted(model.model_fields)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value) if len(value) <= 80 else repr(value[:77] + "...")
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return str(value)
