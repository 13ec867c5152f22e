"""`Frozen`: immutable values compared, hashed and shown by their slots, what `dataclass(frozen=True, slots=True)`
gives, without importing `dataclasses`. The sandbox helper runs this package under `python -S`, where `dataclasses`
would load `inspect`, `ast` and `tokenize`: ~1.5 MiB of a ~11 MiB process, in every agent."""

from __future__ import annotations


class Frozen:
    __slots__: tuple[str, ...] = ()

    def _init(self, **values: object) -> None:
        for name in self.__slots__:
            object.__setattr__(self, name, values[name])

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot delete {name}")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and isinstance(other, Frozen) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"
