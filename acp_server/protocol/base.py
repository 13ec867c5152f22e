"""What the generated wire models (`acp_server.protocol.schema`) are made of: the `WireModel` base, `WireError`, and
the small decoders the generated `from_wire` methods call.

A decoder takes a JSON value (as `orjson` parsed it) and the path of that value in the message, and returns the
typed value or raises `WireError`. The path is built only from the schema's own field names and array indices,
never from a value or an object key the peer chose, and the problem is one of a few fixed phrases: a `WireError`
is safe to show to the peer as it is (the connection turns one raised by a params decoder into `-32602`).

This module imports nothing beyond the standard library's typing: the models are loaded on the first request after
`initialize`, and what they cost to import is a start-up figure of the first session (see ARCHITECTURE.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeVar

from acp_server.errors import WireError

__all__ = ["MISSING", "WireError", "WireModel"]

T = TypeVar("T")
Decoder = Callable[[object, str], T]


class _Missing:
    """The value of a field the message does not have (as opposed to `null`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


class WireModel:
    """A message or a part of one: snake_case attributes, the wire's camelCase names in `from_wire`/`to_wire`.

    Models tolerate unknown fields: whatever the peer sent beyond the schema is kept in `extra` (None when there was
    nothing) and written back by `to_wire`, so a block the client sent can be stored and replayed as it was.
    """

    __slots__ = ("extra",)
    extra: dict[str, Any] | None

    def to_wire(self) -> dict[str, Any]:
        raise NotImplementedError

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in type(self).__slots__) + (self.extra,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WireModel) and type(other) is type(self) and self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dicts they stand for

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in type(self).__slots__)
        extra = f", extra={self.extra!r}" if self.extra else ""
        return f"{type(self).__name__}({fields}{extra})"


# ---- decoders (called by the generated code; each takes the value and its path) ------------------------------------
def key(at: str, name: str) -> str:
    return f"{at}.{name}" if at else name


def obj(v: object, at: str) -> dict[str, Any]:
    if type(v) is dict:
        return v
    if v is MISSING:
        raise WireError(at, "is required")
    raise WireError(at, "must be an object")


def extras(o: dict[str, Any], known: frozenset[str]) -> dict[str, Any] | None:
    if o.keys() <= known:
        return None
    return {k: v for k, v in o.items() if k not in known}


def string(v: object, at: str) -> str:
    if type(v) is str:
        return v
    raise WireError(at, "is required" if v is MISSING else "must be a string")


def boolean(v: object, at: str) -> bool:
    if type(v) is bool:
        return v
    raise WireError(at, "is required" if v is MISSING else "must be true or false")


def integer(v: object, at: str, lo: int | None = None, hi: int | None = None) -> int:
    # bool is a subclass of int: `true` is no number here.
    if type(v) is not int:
        raise WireError(at, "is required" if v is MISSING else "must be an integer")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise WireError(at, "is out of range")
    return v


def uint16(v: object, at: str) -> int:
    return integer(v, at, 0, 0xFFFF)


def uint32(v: object, at: str) -> int:
    return integer(v, at, 0, 0xFFFF_FFFF)


def uint64(v: object, at: str) -> int:
    return integer(v, at, 0, 0xFFFF_FFFF_FFFF_FFFF)


def int32(v: object, at: str) -> int:
    return integer(v, at, -(2**31), 2**31 - 1)


def int64(v: object, at: str) -> int:
    return integer(v, at, -(2**63), 2**63 - 1)


def number(v: object, at: str) -> float:
    if type(v) is float or type(v) is int:
        return v
    raise WireError(at, "is required" if v is MISSING else "must be a number")


def null(v: object, at: str) -> None:
    if v is None:
        return None
    raise WireError(at, "is required" if v is MISSING else "must be null")


def anything(v: object, at: str) -> Any:
    if v is MISSING:
        raise WireError(at, "is required")
    return v


def json_object(v: object, at: str) -> dict[str, Any]:
    """An object whose contents the schema leaves open (`_meta`, `rawInput` objects)."""
    return obj(v, at)


def meta(v: object) -> dict[str, Any] | None:
    """`_meta`: an object, or nothing; anything else is dropped (the schema's `x-deserialize-default-on-error`)."""
    return v if type(v) is dict else None


def literal(v: object, at: str, allowed: frozenset[Any]) -> Any:
    # Literals are strings or integers; `type(v)` keeps `true` from matching a literal 1.
    if (type(v) is str or type(v) is int) and v in allowed:
        return v
    raise WireError(at, "is required" if v is MISSING else f"must be one of {_listed(allowed)}")


def _listed(values: Iterable[Any]) -> str:
    return ", ".join(sorted(str(v) for v in values))


def optional(v: object, at: str, decode: Decoder[T]) -> T | None:
    """An optional field: absent or null is None."""
    if v is None or v is MISSING:
        return None
    return decode(v, at)


def defaulted(v: object, at: str, decode: Decoder[T], default: object) -> T:
    """A field with a default: absent is the default (a JSON value, decoded like the field's)."""
    return decode(default if v is MISSING else v, at)


def lenient(v: object, at: str, decode: Decoder[T], default: object) -> T:
    """`x-deserialize-default-on-error`: absent, or a value that does not fit, is the field's default."""
    if v is not MISSING:
        try:
            return decode(v, at)
        except WireError:
            pass
    return decode(default, at)


def lenient_optional(v: object, at: str, decode: Decoder[T]) -> T | None:
    """An optional field with `x-deserialize-default-on-error`: absent, null or a value that does not fit is None."""
    if v is None or v is MISSING:
        return None
    try:
        return decode(v, at)
    except WireError:
        return None


def array(v: object, at: str, item: Decoder[T]) -> list[T]:
    if type(v) is not list:
        raise WireError(at, "is required" if v is MISSING else "must be an array")
    return [item(x, f"{at}[{i}]") for i, x in enumerate(v)]


def array_skipping(v: object, at: str, item: Decoder[T]) -> list[T]:
    """`x-deserialize-skip-invalid-items`: items that do not fit are left out."""
    if type(v) is not list:
        raise WireError(at, "is required" if v is MISSING else "must be an array")
    out: list[T] = []
    for i, x in enumerate(v):
        try:
            out.append(item(x, f"{at}[{i}]"))
        except WireError:
            pass
    return out


def mapping(v: object, at: str, item: Decoder[T]) -> dict[str, T]:
    o = obj(v, at)
    # The keys are the peer's: a path never shows one.
    return {k: item(x, f"{at}[*]") for k, x in o.items()}


def first_of(v: object, at: str, decoders: tuple[Decoder[Any], ...]) -> Any:
    """An untagged union: the first form the value fits (the order is the schema's)."""
    if v is MISSING:
        raise WireError(at, "is required")
    for decode in decoders:
        try:
            return decode(v, at)
        except WireError:
            continue
    raise WireError(at, "fits none of its forms")


def tagged(
    v: object, at: str, tag: str, forms: Mapping[Any, tuple[Decoder[Any], ...]], fallback: tuple[Decoder[Any], ...]
) -> Any:
    """A union told apart by the value of `tag`; a value with no known tag goes to the untagged forms, if any."""
    o = obj(v, at)
    value = o.get(tag, MISSING)
    candidates = forms.get(value) if type(value) is str else None
    if candidates is None:
        candidates = fallback
    if not candidates:
        raise WireError(key(at, tag), "is required" if value is MISSING else f"must be one of {_listed(forms)}")
    first: WireError | None = None
    for decode in candidates:
        try:
            return decode(o, at)
        except WireError as exc:
            first = first or exc
    assert first is not None
    raise first


def dump(value: Any) -> Any:
    """A model, or a list or dict of models, in its wire form (for fields whose type is a union)."""
    if isinstance(value, WireModel):
        return value.to_wire()
    if type(value) is list:
        return [dump(x) for x in value]
    if type(value) is dict:
        return {k: dump(x) for k, x in value.items()}
    return value
