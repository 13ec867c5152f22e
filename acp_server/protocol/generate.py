"""Generates the wire models, `acp_server/protocol/schema.py`, from the vendored official ACP schema.

    python -m acp_server.protocol.generate           # write schema.py
    python -m acp_server.protocol.generate --check   # exit 1 when schema.py is not what the schema gives

`tests/acp_server/test_protocol_models.py` regenerates in memory and compares with the committed file, so the models
cannot drift from `schemas/acp/schema.json` (as lsprotocol does with the LSP meta-model).

How the schema maps to Python:

- an object definition is a `WireModel` subclass with `__slots__`, snake_case attributes, a `from_wire` classmethod
  that checks a JSON value and a `to_wire` method that writes it back (camelCase, unknown fields kept);
- a union told apart by a property (`type`, `sessionUpdate`, `outcome`, `mode`...) is a type alias of one class per
  form plus a `<name>_from_wire` function that reads the tag; a form that wraps another definition becomes a class
  with that definition's fields and the tag (`ContentBlock` = `TextContentBlock | ImageContentBlock | ...`); an
  object with shared fields and forms (`SessionConfigOption`) gives one class per form with all of them; the
  "other" and untagged forms take the values no tag names, as the schema says;
- a union without tag (`EmbeddedResourceResource`, `RequestId`) is decoded by its first form that fits;
- a closed set of strings is a `Literal`; an open one (a set plus "any other string") is `str`;
- `x-deserialize-default-on-error` (a value that does not fit becomes the default) and
  `x-deserialize-skip-invalid-items` (items that do not fit are left out) are honoured, so the agent reads what
  the reference implementation reads.

The stable schema is taken whole but for the JSON-RPC envelopes (`acp_server.wire` owns those); from the unstable
schema only the definitions in `UNSTABLE` (what gatewright serves of it), with what they refer to from the stable one.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import py_compile
import re
import sys
import textwrap
import tokenize
from pathlib import Path
from typing import Any

from acp_server.protocol._reading import (
    ENVELOPES,
    INT_NAMES,
    NO_DEFAULT,
    UNSTABLE,
    AliasDef,
    Arr,
    ClassDef,
    Field,
    Lit,
    Map,
    Opt,
    Prim,
    Ref,
    Schema,
    Type,
    Union,
    UnionDef,
    snake,
)

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas" / "acp"
OUT = Path(__file__).with_name("schema.py")

WIDTH = 120


# ---- writing Python ------------------------------------------------------------------------------------------------
class Writer:
    def __init__(self, schema: Schema) -> None:
        self.s = schema
        self.classes: dict[str, ClassDef] = {}
        for d in schema.defs.values():
            if isinstance(d, ClassDef):
                self.classes[d.name] = d
        self.classes.update(schema.variant_classes)
        self.literals: dict[tuple[Any, ...], str] = {}
        self.constants: dict[str, tuple[Any, str]] = {}  # the schema's defaults: source -> (value, name)

    # -- types --
    def annotation(self, t: Type) -> str:
        if isinstance(t, Prim):
            return {"str": "str", "bool": "bool", "int": "int", "float": "float", "null": "None", "any": "Any"}[t.kind]
        if isinstance(t, Lit):
            return "Literal[" + ", ".join(json.dumps(v) for v in t.values) + "]"
        if isinstance(t, Ref):
            return t.name
        if isinstance(t, Arr):
            return f"list[{self.annotation(t.item)}]"
        if isinstance(t, Map):
            return f"dict[str, {self.annotation(t.value)}]"
        if isinstance(t, Opt):
            inner = self.annotation(t.inner)
            return inner if inner.endswith("| None") or inner == "Any" else f"{inner} | None"
        return " | ".join(self.annotation(m) for m in t.members)

    def _alias_target(self, name: str) -> Type | None:
        d = self.s.defs.get(name)
        return d.type if isinstance(d, AliasDef) else None

    def decode(self, t: Type, v: str, at: str) -> str:
        if isinstance(t, Prim):
            named = _int_decoder(t)
            if named:
                return f"{named}({v}, {at})"
            if t.kind == "int" and (t.lo is not None or t.hi is not None):
                return f"integer({v}, {at}, {t.lo}, {t.hi})"
            return f"{_PRIM_DECODERS[t.kind]}({v}, {at})"
        if isinstance(t, Lit):
            return f"literal({v}, {at}, {self._literal(t.values)})"
        if isinstance(t, Ref):
            if t.name in self.classes:
                return f"{t.name}.from_wire({v}, {at})"
            target = self._alias_target(t.name)
            if isinstance(target, Prim | Lit):
                return self.decode(target, v, at)
            return f"{decoder_name(t.name)}({v}, {at})"
        if isinstance(t, Arr):
            fn = "array_skipping" if t.skip_invalid else "array"
            return f"{fn}({v}, {at}, {self.callable(t.item)})"
        if isinstance(t, Map):
            if t.value == Prim("any"):
                return f"json_object({v}, {at})"
            return f"mapping({v}, {at}, {self.callable(t.value)})"
        if isinstance(t, Opt):
            return f"optional({v}, {at}, {self.callable(t.inner)})"
        forms = ", ".join(self.callable(m) for m in t.members)
        return f"first_of({v}, {at}, ({forms},))"

    def callable(self, t: Type) -> str:
        if isinstance(t, Prim) and _int_decoder(t):
            return _int_decoder(t)
        if isinstance(t, Prim) and (t.kind != "int" or (t.lo is None and t.hi is None)):
            return _PRIM_DECODERS[t.kind]
        if isinstance(t, Ref):
            if t.name in self.classes:
                return f"{t.name}.from_wire"
            target = self._alias_target(t.name)
            if isinstance(target, Prim):
                return self.callable(target)
            return decoder_name(t.name)
        return f"lambda v, at: {self.decode(t, 'v', 'at')}"

    def encode(self, t: Type, expr: str) -> str:
        if isinstance(t, Prim | Lit):
            return expr
        if isinstance(t, Ref):
            if t.name in self.classes:
                return f"{expr}.to_wire()"
            target = self._alias_target(t.name)
            if isinstance(target, Prim | Lit):
                return expr
            return f"dump({expr})"
        if isinstance(t, Opt):
            return self.encode(t.inner, expr)
        if isinstance(t, Arr):
            item = self.encode(t.item, "x")
            return expr if item == "x" else f"[{item} for x in {expr}]"
        if isinstance(t, Map) and t.value == Prim("any"):
            return expr
        return f"dump({expr})"

    def _returns_any(self, t: Type) -> bool:
        """The decode expression of `t` is typed Any (a literal, or an alias of one)."""
        if isinstance(t, Ref) and t.name not in self.classes:
            target = self._alias_target(t.name)
            return isinstance(target, Lit | Union)
        return False

    def _json_constant(self, value: Any) -> str:
        text = _py(value)
        if text not in self.constants:
            self.constants[text] = (value, f"_D{len(self.constants)}")
        return self.constants[text][1]

    def _literal(self, values: tuple[Any, ...]) -> str:
        name = self.literals.get(values)
        if name is None:
            name = self.literals[values] = f"_L{len(self.literals)}"
        return name

    # -- the module --
    def module(self, header: str) -> str:
        out: list[str] = [header]
        written: set[str] = set()
        for d in self.s.defs.values():
            names = [d.name] if isinstance(d, ClassDef) else d.members if isinstance(d, UnionDef) else []
            for name in names:
                if name not in written and (name == d.name or name in self.s.variant_classes):
                    written.add(name)
                    out.append(self.class_source(self.classes[name]))
        out.append(self.aliases())
        out.append(self.decoders())
        out.append(self.tables())
        consts = ["# The closed sets of values, checked by `literal`, and the schema's defaults."]
        for vals, name in self.literals.items():
            consts += _wrap_call(f"{name}: Final = frozenset({{", [json.dumps(v) for v in vals], "})")
        for value, name in self.constants.values():
            consts += _py_lines(f"{name}: Final[Any] = ", value, "")
        out.insert(1, "\n".join(consts) + "\n")
        body = "\n".join(out)
        tokens = tokenize.generate_tokens(io.StringIO(body).readline)
        used = sorted(
            {t.string for t in tokens if t.type == tokenize.NAME} & set(_BASE_NAMES), key=lambda n: (n != "MISSING", n)
        )
        imports = "from acp_server.protocol.base import (\n" + "".join(f"    {n},\n" for n in used) + ")\n"
        out[0] = out[0].replace("{BASE_IMPORTS}", imports)
        return "\n".join(out).rstrip() + "\n"

    def class_source(self, c: ClassDef) -> str:
        lines = ["", "", f"class {c.name}(WireModel):"]
        lines += _docstring(c.doc or f"`{c.name}`.", "    ")
        lines.append("")
        lines += _wrap_call(
            "    __slots__ = (", [json.dumps(f.attr) for f in c.fields], ")", trailing_comma=len(c.fields) == 1
        )
        lines += _wrap_call(
            "    KEYS: ClassVar[frozenset[str]] = frozenset({", [json.dumps(f.wire) for f in c.fields], "})"
        )
        lines.append("")
        for f in c.fields:
            lines.append(f"    {f.attr}: {self.field_annotation(f)}")
            if f.doc and f.wire != "_meta":  # `_meta` means the same everywhere (see WireModel)
                lines += _docstring(f.doc, "    ")
        lines.append("")
        lines += self.init_source(c)
        lines.append("")
        lines += self.from_wire_source(c)
        lines.append("")
        lines += self.to_wire_source(c)
        return "\n".join(lines)

    def field_annotation(self, f: Field) -> str:
        return self.annotation(f.type)

    def _default_json(self, f: Field) -> str:
        """The field's schema default as Python source: a literal, or a module constant for objects and arrays
        (decoded again at each use: the constant is never handed out)."""
        d = f.default
        assert not (isinstance(f.type, Map) and f.type.value == Prim("any")), f  # json_object would hand it out
        return self._json_constant(d) if isinstance(d, dict | list) else _py(d)

    def init_source(self, c: ClassDef) -> list[str]:
        params: list[str] = []
        body: list[str] = []
        for f in sorted(c.fields, key=lambda f: not (f.required and not _is_tag_const(f))):
            ann = self.field_annotation(f)
            if f.required and not _is_tag_const(f):
                params.append(f"{f.attr}: {ann}")
                body.append(f"        self.{f.attr} = {f.attr}")
            elif _is_tag_const(f):
                params.append(f"{f.attr}: {ann} = {json.dumps(f.type.values[0])}")  # type: ignore[union-attr]
                body.append(f"        self.{f.attr} = {f.attr}")
            elif f.default is not NO_DEFAULT and not _immutable(f.default):
                params.append(f"{f.attr}: {ann} | None = None")
                body += [f"        if {f.attr} is None:"]
                default = self.decode(f.type, self._default_json(f), '""')
                body += _fit(f"            {f.attr} = {default}")
                body += [f"        self.{f.attr} = {f.attr}"]
            elif f.default is not NO_DEFAULT:
                params.append(f"{f.attr}: {ann} = {_py(f.default)}")
                body.append(f"        self.{f.attr} = {f.attr}")
            else:
                params.append(f"{f.attr}: {ann} = None")
                body.append(f"        self.{f.attr} = {f.attr}")
        params.append("extra: dict[str, Any] | None = None")
        body.append("        self.extra = extra")
        return _wrap_call("    def __init__(", ["self", "*", *params], ") -> None:", indent=8) + body

    def from_wire_source(self, c: ClassDef) -> list[str]:
        lines = [
            "    @classmethod",
            f'    def from_wire(cls, v: object, at: str = "") -> {c.name}:',
            "        o = obj(v, at)",
            "        self = cls.__new__(cls)",
        ]
        for f in c.fields:
            lines += self.field_decode(f)
        lines += ["        self.extra = extras(o, cls.KEYS)", "        return self"]
        return lines

    def field_decode(self, f: Field) -> list[str]:
        target = f"        self.{f.attr} = "
        at = f'key(at, "{f.wire}")'
        if f.wire == "_meta":
            return [f'{target}meta(o.get("_meta"))']
        if f.default is not NO_DEFAULT:
            default = self._default_json(f)
            fn = "lenient" if f.lenient else "defaulted"
            return _fit_value(
                target,
                f'o.get("{f.wire}", MISSING)',
                at,
                lambda v, a: f"{fn}({v}, {a}, {self.callable(f.type)}, {default})",
            )
        if not f.required:
            inner = f.type.inner if isinstance(f.type, Opt) else f.type
            if f.lenient:
                return _fit_value(
                    target, f'o.get("{f.wire}")', at, lambda v, a: f"lenient_optional({v}, {a}, {self.callable(inner)})"
                )
            return _fit_value(
                target, f'o.get("{f.wire}")', at, lambda v, a: f"optional({v}, {a}, {self.callable(inner)})"
            )
        return _fit_value(target, f'o.get("{f.wire}", MISSING)', at, lambda v, a: self.decode(f.type, v, a))

    def to_wire_source(self, c: ClassDef) -> list[str]:
        always = [f for f in c.fields if f.required or f.default is not NO_DEFAULT]
        sometimes = [f for f in c.fields if f not in always]
        items = [f"{json.dumps(f.wire)}: {self.encode(f.type, 'self.' + f.attr)}" for f in always]
        lines = ["    def to_wire(self) -> dict[str, Any]:"]
        lines += _wrap_call("        out: dict[str, Any] = {", items, "}", indent=12)
        for f in sorted(sometimes, key=lambda f: f.wire == "_meta"):
            lines.append(f"        if self.{f.attr} is not None:")
            lines += _fit(f"            out[{json.dumps(f.wire)}] = {self.encode(f.type, 'self.' + f.attr)}")
        lines += ["        if self.extra:", "            out.update(self.extra)", "        return out"]
        return lines

    def aliases(self) -> str:
        lines = ["", "", "# ---- unions and named types " + "-" * 90]
        done: set[str] = set()
        pending = [d for d in self.s.defs.values() if isinstance(d, AliasDef | UnionDef)]
        while pending:  # an alias may name another alias: define that one first
            progressed = False
            for d in list(pending):
                deps = _refs_of(d, self.s)
                if all(x in done or x in self.classes for x in deps):
                    lines.append("")
                    ann = self.annotation(d.type) if isinstance(d, AliasDef) else " | ".join(d.members)
                    lines += _wrap_union(f"{d.name}: TypeAlias = ", ann)
                    if d.doc:
                        lines += _docstring(d.doc, "")
                    done.add(d.name)
                    pending.remove(d)
                    progressed = True
            assert progressed, [d.name for d in pending]
        return "\n".join(lines)

    def decoders(self) -> str:
        lines = ["", "", "# ---- decoders of the unions and named types " + "-" * 74]
        for d in self.s.defs.values():
            if isinstance(d, ClassDef):
                continue
            lines += ["", "", f'def {decoder_name(d.name)}(v: object, at: str = "") -> {d.name}:']
            if isinstance(d, AliasDef) and isinstance(d.type, Union):
                forms = [self.callable(m) for m in d.type.members]
                lines += _wrap_call(
                    f"    return cast({json.dumps(d.name)}, first_of(v, at, (",
                    forms,
                    ")))",
                    indent=8,
                    trailing_comma=len(forms) == 1,
                )
                continue
            if isinstance(d, AliasDef):
                expr = self.decode(d.type, "v", "at")
                # `literal` and `first_of` return Any: say what they return here.
                if isinstance(d.type, Lit | Union) or self._returns_any(d.type):
                    expr = f"cast({json.dumps(d.name)}, {expr})"
                lines += _fit(f"    return {expr}")
                continue
            if d.tag is None:
                forms = [f"{m}.from_wire" for m in d.members]
                lines += _wrap_call(
                    f"    return cast({json.dumps(d.name)}, first_of(v, at, (",
                    forms,
                    ")))",
                    indent=8,
                    trailing_comma=len(forms) == 1,
                )
                continue
            table = f"_FORMS_{d.name}"
            comma = "," if len(d.fallback) == 1 else ""
            fallback = "(" + ", ".join(f"{m}.from_wire" for m in d.fallback) + comma + ")"
            lines += _wrap_call(
                f"    return cast({json.dumps(d.name)}, tagged(",
                ["v", "at", json.dumps(d.tag), table, fallback],
                "))",
                indent=8,
            )
            forms = [
                f"{json.dumps(value)}: ({', '.join(m + '.from_wire' for m in ms)},)" for value, ms in d.forms.items()
            ]
            lines += [""] + _wrap_call(
                f"{table}: Final[dict[str, tuple[Decoder[{d.name}], ...]]] = {{", forms, "}", indent=4
            )
        return "\n".join(lines)

    def tables(self) -> str:
        methods: dict[str, dict[str, str]] = {}
        for name, raw in self.s.raw.items():
            if "x-method" in raw and name not in ENVELOPES:
                kind = "result" if name.endswith("Response") else "params"
                methods.setdefault(raw["x-method"], {"side": raw["x-side"]})[kind] = name
        lines = [
            "",
            "",
            "# ---- methods " + "-" * 105,
            "",
            "",
            "class MethodSpec(NamedTuple):",
            '    """A method of the protocol: who serves it, the definitions of its params and its result '
            '(None: a\n    notification)."""',
            "",
            '    side: Literal["agent", "client", "protocol"]',
            "    params: str",
            "    result: str | None",
            "    unstable: bool",
            "",
        ]
        lines.append("METHODS: Final[Mapping[str, MethodSpec]] = MappingProxyType({")
        for method in sorted(methods):
            e = methods[method]
            answer = json.dumps(e["result"]) if "result" in e else "None"
            side, params = json.dumps(e["side"]), json.dumps(e["params"])
            spec = f"MethodSpec({side}, {params}, {answer}, {e['params'] in UNSTABLE})"
            entry = f"    {json.dumps(method)}: {spec},"
            lines += [entry] if len(entry) <= WIDTH else [f"    {json.dumps(method)}:", f"        {spec},"]
        lines.append("})")
        lines += ['"""Every method of the schema (and of `UNSTABLE` in the generator), by name."""', ""]
        decoders = []
        for name, d in self.s.defs.items():
            decoders.append(
                f"{json.dumps(name)}: {name}.from_wire"
                if isinstance(d, ClassDef)
                else f"{json.dumps(name)}: {decoder_name(name)}"
            )
        lines += _wrap_call(
            "DECODERS: Final[Mapping[str, Decoder[Any]]] = MappingProxyType({", decoders, "})", indent=4
        )
        lines.append('"""The decoder of every definition, by its name in the schema."""')
        return "\n".join(lines)


_BASE_NAMES = (
    "MISSING",
    "Decoder",
    "WireModel",
    "anything",
    "array",
    "array_skipping",
    "boolean",
    "defaulted",
    "dump",
    "extras",
    "first_of",
    "int32",
    "int64",
    "integer",
    "json_object",
    "key",
    "lenient",
    "lenient_optional",
    "literal",
    "mapping",
    "meta",
    "null",
    "number",
    "obj",
    "optional",
    "string",
    "tagged",
    "uint16",
    "uint32",
    "uint64",
)
_PRIM_DECODERS = {
    "str": "string",
    "bool": "boolean",
    "int": "integer",
    "float": "number",
    "null": "null",
    "any": "anything",
}


def _int_decoder(t: Prim) -> str:
    """`uint16`, `int64`...: the base decoder of an integer format, or "" for none."""
    if t.kind != "int" or t.lo is None or t.hi is None:
        return ""
    return INT_NAMES.get((t.lo, t.hi), "")


def decoder_name(def_name: str) -> str:
    return snake(def_name) + "_from_wire"


def _is_tag_const(f: Field) -> bool:
    return isinstance(f.type, Lit) and len(f.type.values) == 1 and f.required


def _immutable(v: Any) -> bool:
    return v is None or isinstance(v, bool | int | float | str)


def _refs_of(d: AliasDef | UnionDef, schema: Schema) -> set[str]:
    if isinstance(d, UnionDef):
        return set(d.members)
    out: set[str] = set()

    def walk(t: Type) -> None:
        if isinstance(t, Ref):
            out.add(t.name)
        elif isinstance(t, Arr):
            walk(t.item)
        elif isinstance(t, Map):
            walk(t.value)
        elif isinstance(t, Opt):
            walk(t.inner)
        elif isinstance(t, Union):
            for m in t.members:
                walk(m)

    walk(d.type)
    return out


def _py(v: Any) -> str:
    """A JSON value as a Python literal."""
    if v is None or isinstance(v, bool):
        return repr(v)
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_py(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)}: {_py(x)}" for k, x in v.items()) + "}"


def _py_lines(head: str, v: Any, indent: str) -> list[str]:
    """`head` + the JSON value `v` as a Python literal, an object broken one entry a line if it is too long."""
    one = head + _py(v)
    if len(one) <= WIDTH or not isinstance(v, dict) or not v:
        return [one]
    lines = [head + "{"]
    inner = indent + "    "
    for k, x in v.items():
        sub = _py_lines(f"{inner}{json.dumps(k)}: ", x, inner)
        sub[-1] += ","
        lines += sub
    lines.append(indent + "}")
    return lines


def _docstring(text: str, indent: str) -> list[str]:
    text = text.strip().replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    width = WIDTH - len(indent)
    lines: list[str] = []
    for raw in text.splitlines():
        if len(raw) <= width - 3:
            lines.append(raw.rstrip())
            continue
        lead = re.match(r"\s*(?:[-*] |\d+\. )?", raw)
        hang = " " * len(lead.group()) if lead else ""
        lines += textwrap.wrap(
            raw, width - 3, subsequent_indent=hang, break_on_hyphens=False, break_long_words=False
        ) or [""]
    if len(lines) == 1 and len(indent) + len(lines[0]) + 6 <= WIDTH:
        return [f'{indent}"""{lines[0]}"""']
    out = [f'{indent}"""{lines[0]}']
    out += [f"{indent}{ln}" if ln else "" for ln in lines[1:]]
    out.append(f'{indent}"""')
    return out


def _wrap_call(head: str, items: list[str], tail: str, *, indent: int = 4, trailing_comma: bool = False) -> list[str]:
    """`head` + the comma-separated items + `tail`, on one line if it fits, else broken after commas."""
    joined = ", ".join(items) + ("," if trailing_comma else "")
    if len(head) + len(joined) + len(tail) <= WIDTH:
        return [head + joined + tail]
    pad = " " * indent
    lines: list[str] = [head.rstrip()]
    current = pad
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 or trailing_comma else "")
        if current.strip() and len(current) + 1 + len(piece) > WIDTH:
            lines.append(current.rstrip())
            current = pad
        current += (" " if current.strip() else "") + piece
    lines.append(current.rstrip() + tail.lstrip() if len(current) + len(tail) <= WIDTH else current.rstrip())
    if len(lines[-1]) + len(tail) > WIDTH and not lines[-1].endswith(tail.lstrip()):
        lines.append(" " * (len(head) - len(head.lstrip())) + tail.lstrip())
    return lines


def _wrap_union(head: str, union: str) -> list[str]:
    if len(head) + len(union) <= WIDTH:
        return [head + union]
    if union.startswith("Literal["):
        return _wrap_call(head + "Literal[", [x.strip() for x in union[8:-1].split(",")], "]")
    parts = union.split(" | ")
    lines = [head + "("]
    current = "    "
    for i, p in enumerate(parts):
        piece = p + ("" if i == len(parts) - 1 else " |")
        if current.strip() and len(current) + 1 + len(piece) > WIDTH:
            lines.append(current.rstrip())
            current = "    "
        current += (" " if current.strip() else "") + piece
    lines += [current.rstrip(), ")"]
    return lines


def _fit(line: str) -> list[str]:
    """The line as it is if it fits; else broken after the opening parenthesis of its outermost call."""
    if len(line) <= WIDTH:
        return [line]
    indent = len(line) - len(line.lstrip())
    m = re.match(r"(\s*(?:[\w.\[\]\"]+ = |return )?[\w.]+\()(.*\))$", line)
    if m and len(" " * (indent + 4) + m.group(2)) <= WIDTH + 1:
        return [m.group(1), " " * (indent + 4) + m.group(2)]
    return [line + "  # noqa: E501"]


def _fit_value(target: str, value: str, at: str, expr: Any, needs_name: bool = False) -> list[str]:
    """`self.x = <expr of the value>`, the value read into a local first when the line would be too long (or when
    the expression names it twice)."""
    if not needs_name:
        line = target + expr(value, at)
        if len(line) <= WIDTH:
            return [line]
    indent = target[: len(target) - len(target.lstrip())]
    first = f"{indent}x = {value}"
    line = target + expr("x", at)
    if len(line) <= WIDTH:
        return [first, line]
    return [first, f"{indent}p = {at}"] + _fit(target + expr("x", "p"))


# ---- the module ------------------------------------------------------------------------------------------------------
_IMPORTS = """
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Final, Literal, NamedTuple, TypeAlias, cast

{BASE_IMPORTS}"""


def render() -> str:
    stable_bytes = (SCHEMA_DIR / "schema.json").read_bytes()
    unstable_bytes = (SCHEMA_DIR / "schema.unstable.json").read_bytes()
    schema = Schema(json.loads(stable_bytes), json.loads(unstable_bytes))
    header = (
        '"""The ACP wire models: generated by `python -m acp_server.protocol.generate` from the vendored official\n'
        "schema. Do not edit by hand; change the generator (or the schema) and regenerate.\n\n"
        f"    schemas/acp/schema.json           sha256 {hashlib.sha256(stable_bytes).hexdigest()}\n"
        f"    schemas/acp/schema.unstable.json  sha256 {hashlib.sha256(unstable_bytes).hexdigest()}\n"
        f"        (only {', '.join(UNSTABLE)})\n\n"
        "Each object definition is a `WireModel` (`from_wire` checks a JSON value and reads it, `to_wire` writes\n"
        "it); each union and named type has a `<name>_from_wire` function. `METHODS` lists the methods, `DECODERS`\n"
        "the decoder of every definition by its schema name. How the schema maps to Python:\n"
        "`acp_server.protocol.generate`.\n"
        '"""\n' + _IMPORTS
    )
    w = Writer(schema)
    return w.module(header)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m acp_server.protocol.generate", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 if the committed file is stale")
    opts = ap.parse_args(argv)
    text = render()
    if opts.check:
        if OUT.read_text(encoding="utf-8") != text:
            sys.stderr.write(f"{OUT} is stale: run python -m acp_server.protocol.generate\n")
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    # Its bytecode too, even where PYTHONDONTWRITEBYTECODE is set: compiling ~9,000 lines costs ~70 ms, which a
    # process without the .pyc would pay on its first session (an installed wheel is compiled by pip anyway).
    py_compile.compile(str(OUT), doraise=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
