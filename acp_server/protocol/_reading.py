"""How `acp_server.protocol.generate` reads the ACP schema: its definitions as classes, unions and named types.

`Schema(stable, unstable).defs` maps every definition of the stable schema (but the JSON-RPC envelopes) and the
`UNSTABLE` ones to a `ClassDef` (an object), a `UnionDef` (forms told apart by a tag, or tried in order) or an
`AliasDef` (a named type: a string, a closed set, a union of plain values). The forms of unions that add fields to
another definition are `Schema.variant_classes`. The rules: `acp_server.protocol.generate`.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field
from typing import Any

UNSTABLE = ("ForkSessionRequest", "ForkSessionResponse", "SessionForkCapabilities")
ENVELOPES = frozenset(
    {"AgentRequest", "AgentResponse", "AgentNotification", "ClientRequest", "ClientResponse", "ClientNotification"}
)
# Fields kept as the JSON values they are, where gatewright reads them itself on purpose (not a schema rule):
# `mcpServers` entries go to `runtime.mcp.config.parse_servers`, which tells the user about an entry it cannot start
# (and still starts the others) instead of leaving it out silently, as `x-deserialize-skip-invalid-items` would.
RAW_FIELDS = frozenset(
    {
        ("NewSessionRequest", "mcpServers"),
        ("LoadSessionRequest", "mcpServers"),
        ("ResumeSessionRequest", "mcpServers"),
        ("ForkSessionRequest", "mcpServers"),
    }
)
_RESERVED_ATTRS = frozenset({"extra", "to_wire", "from_wire", "KEYS"})
_INT_FORMATS = {
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
INT_NAMES = {bounds: name for name, bounds in _INT_FORMATS.items()}


# ---- the model -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Prim:
    kind: str  # str bool int float null any
    lo: int | None = None
    hi: int | None = None


@dataclass(frozen=True)
class Lit:
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Arr:
    item: Type
    skip_invalid: bool = False


@dataclass(frozen=True)
class Map:
    value: Type


@dataclass(frozen=True)
class Opt:
    inner: Type


@dataclass(frozen=True)
class Union:
    members: tuple[Type, ...]


Type = Prim | Lit | Ref | Arr | Map | Opt | Union

NO_DEFAULT: Any = object()


@dataclass
class Field:
    wire: str
    attr: str
    type: Type
    required: bool
    default: Any
    lenient: bool
    doc: str


@dataclass
class ClassDef:
    name: str
    doc: str
    fields: list[Field]
    tag: str | None = None  # the wire name of the field that tells this form from its siblings


@dataclass
class UnionDef:
    name: str
    doc: str
    members: list[str]  # class names, in the schema's order
    tag: str | None
    forms: dict[str, list[str]]  # tag value -> classes
    fallback: list[str]  # classes for values without a known tag (untagged, "other")


@dataclass
class AliasDef:
    name: str
    doc: str
    type: Type


Def = ClassDef | UnionDef | AliasDef


@dataclass
class _Variant:
    parts: tuple[str, ...] = ()
    props: dict[str, dict[str, Any]] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)
    open_tag: str | None = None
    base: str | None = None  # the definition this form is, when it adds nothing to it


class Schema:
    def __init__(self, stable: dict[str, Any], unstable: dict[str, Any]) -> None:
        self.raw: dict[str, dict[str, Any]] = dict(stable["$defs"])
        for name in UNSTABLE:
            self.raw[name] = unstable["$defs"][name]
        # What the unstable definitions refer to and the stable schema lacks, and what that refers to in turn.
        todo = list(UNSTABLE)
        while todo:
            for ref in _refs(self.raw[todo.pop()]):
                if ref not in self.raw:
                    self.raw[ref] = unstable["$defs"][ref]
                    todo.append(ref)
        self.defs: dict[str, Def] = {}
        self.variant_classes: dict[str, ClassDef] = {}
        for name, schema in self.raw.items():
            if name not in ENVELOPES:
                self._define(name, schema)

    # -- definitions --
    def _define(self, name: str, s: dict[str, Any]) -> None:
        doc = s.get("description", "")
        if not self._object_like(s):
            self.defs[name] = AliasDef(name, doc, self.conv(s))
            return
        variants = self._flatten(s)
        if len(variants) == 1 and variants[0].base is None:
            self.defs[name] = self._class(name, doc, variants[0])
            return
        members: list[str] = []
        for v in variants:
            if v.base is not None:
                target = self._resolved(v.base)
                members.extend(target.members if isinstance(target, UnionDef) else [v.base])
            else:
                cls_name = self._variant_name(name, v.parts)
                self.variant_classes[cls_name] = self._class(cls_name, doc, v)
                members.append(cls_name)
        if len(members) == 1:
            self.defs[name] = AliasDef(name, doc, Ref(members[0]))
            return
        tag = self._tag_of(members)
        forms: dict[str, list[str]] = {}
        fallback: list[str] = []
        for m in members:
            value = self._const_tag(m, tag) if tag else None
            if value is None:
                fallback.append(m)
            else:
                forms.setdefault(value, []).append(m)
        self.defs[name] = UnionDef(name, doc, members, tag, forms, fallback)

    def _resolved(self, name: str) -> Def:
        if name not in self.defs:
            self._define(name, self.raw[name])
        return self.defs[name]

    def _variant_name(self, union: str, parts: tuple[str, ...]) -> str:
        words = "".join(_pascal(p) for p in parts)
        name = words + union
        if name in self.raw or name in self.variant_classes:
            name = union + words
        assert name not in self.raw and name not in self.variant_classes, name
        return name

    def _class(self, name: str, doc: str, v: _Variant) -> ClassDef:
        fields: list[Field] = []
        tag = None
        for wire, ps in v.props.items():
            attr = snake(wire)
            assert attr not in _RESERVED_ATTRS, (name, wire)
            if "const" in ps and isinstance(ps["const"], str):
                tag = wire
            if v.open_tag == wire:
                tag = wire
            t = Arr(Prim("any")) if (name, wire) in RAW_FIELDS else self.conv(ps)
            required = wire in v.required
            default = ps.get("default", NO_DEFAULT)
            if not required and default is NO_DEFAULT and not isinstance(t, Opt):
                t = Opt(t)
            fields.append(
                Field(
                    wire,
                    attr,
                    t,
                    required,
                    default,
                    bool(ps.get("x-deserialize-default-on-error")),
                    ps.get("description", ""),
                )
            )
        if tag is not None:  # the tag first: `{"type": "text", ...}`, `{"sessionUpdate": ..., ...}`
            fields.sort(key=lambda f: f.wire != tag)
        assert len({f.attr for f in fields}) == len(fields), name
        return ClassDef(name, doc, fields, tag)

    def _tag_of(self, members: list[str]) -> str | None:
        tags = {c.tag for m in members if (c := self._class_def(m)) is not None and c.tag is not None}
        assert len(tags) <= 1, (members, tags)
        return tags.pop() if tags else None

    def _class_def(self, name: str) -> ClassDef | None:
        d = self.variant_classes.get(name) or self.defs.get(name) or self._resolved(name)
        return d if isinstance(d, ClassDef) else None

    def _const_tag(self, cls_name: str, tag: str) -> str | None:
        c = self._class_def(cls_name)
        f = next((f for f in c.fields if f.wire == tag), None) if c else None
        if f is not None and isinstance(f.type, Lit) and len(f.type.values) == 1:
            return str(f.type.values[0])
        return None

    # -- object forms --
    def _object_like(self, s: dict[str, Any]) -> bool:
        if "$ref" in s:
            return self._object_like(self.raw[_ref_name(s["$ref"])])
        if "properties" in s or s.get("type") == "object" and "additionalProperties" not in s:
            return True
        if any(self._object_like(x) for x in s.get("allOf", [])):
            return True
        alts = s.get("oneOf") or s.get("anyOf") or []
        return bool(alts) and all(self._object_like(a) for a in alts)

    def _flatten(self, s: dict[str, Any]) -> list[_Variant]:
        """The forms of an object schema: its properties, merged with each form of its allOf and oneOf/anyOf."""
        if "$ref" in s:
            name = _ref_name(s["$ref"])
            inner = self._flatten(self.raw[name])
            if len(inner) == 1 and inner[0].base is None:
                inner[0].base = name
            return inner
        own = _Variant(props=dict(s.get("properties", {})), required=set(s.get("required", [])))
        if "not" in s:  # the "other" form: its string-typed property takes every value but the named ones
            own.open_tag = next(
                (k for k, p in own.props.items() if p.get("type") == "string" and "const" not in p), None
            )
        out = [own]
        for part in s.get("allOf", []):
            out = [_merge(a, b) for a in out for b in self._flatten(part)]
        alts = s.get("oneOf") or s.get("anyOf")
        if alts and all(self._object_like(a) for a in alts):
            expanded: list[_Variant] = []
            for a in out:
                for alt in alts:
                    for b in self._flatten(alt):
                        merged = _merge(a, b)
                        merged.parts = a.parts + (_alt_name(alt),) + b.parts
                        expanded.append(merged)
            out = expanded
        return out

    # -- types of properties --
    def conv(self, s: dict[str, Any]) -> Type:
        if "$ref" in s:
            return Ref(_ref_name(s["$ref"]))
        all_of = s.get("allOf")
        if all_of and len(all_of) == 1 and "properties" not in s:
            return self.conv(all_of[0])
        alts = s.get("anyOf") or s.get("oneOf")
        if alts:
            solid = [a for a in alts if a.get("type") != "null"]
            inner = self._conv_union(solid)
            return Opt(inner) if len(solid) < len(alts) else inner
        t = s.get("type")
        if isinstance(t, list):
            solid_types = [x for x in t if x != "null"]
            assert len(solid_types) == 1, s
            inner = self.conv({**s, "type": solid_types[0]})
            return Opt(inner) if "null" in t else inner
        if "const" in s:
            return Lit((s["const"],))
        if "enum" in s:
            return Lit(tuple(s["enum"]))
        if t == "string":
            return Prim("str")
        if t == "boolean":
            return Prim("bool")
        if t == "number":
            return Prim("float")
        if t == "null":
            return Prim("null")
        if t == "integer":
            lo, hi = _INT_FORMATS.get(s.get("format", ""), (None, None))
            lo = s.get("minimum", lo)
            hi = s.get("maximum", hi)
            return Prim("int", lo, hi)
        if t == "array":
            return Arr(self.conv(s.get("items", {})), bool(s.get("x-deserialize-skip-invalid-items")))
        if t == "object":
            ap = s.get("additionalProperties")
            return Map(self.conv(ap) if isinstance(ap, dict) else Prim("any"))
        return Prim("any")

    def _conv_union(self, alts: list[dict[str, Any]]) -> Type:
        consts = [a["const"] for a in alts if "const" in a]
        if consts and len(consts) == len(alts):
            return Lit(tuple(consts))
        if consts and len(consts) == len(alts) - 1:  # a named set plus "any other": the open set is its base type
            other = next(a for a in alts if "const" not in a)
            return self.conv(other)
        members = tuple(self.conv(a) for a in alts)
        return members[0] if len(members) == 1 else Union(members)


def _merge(a: _Variant, b: _Variant) -> _Variant:
    props = dict(a.props)
    for k, v in b.props.items():
        # A tag property seen twice (the form's `{type: const}` and the base's plain string) keeps the const.
        if k in props and "const" in props[k] and "const" not in v:
            continue
        props[k] = v
    base = b.base if not a.props and a.base is None and not a.parts else None
    return _Variant(a.parts + b.parts, props, a.required | b.required, b.open_tag or a.open_tag, base)


def _alt_name(alt: dict[str, Any]) -> str:
    for p in alt.get("properties", {}).values():
        if isinstance(p.get("const"), str):
            return str(p["const"])
    if "title" in alt:
        return str(alt["title"])
    refs = [_ref_name(x["$ref"]) for x in alt.get("allOf", []) if "$ref" in x]
    return refs[0] if refs else "form"


def _refs(s: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(s, dict):
        if "$ref" in s:
            out.add(_ref_name(s["$ref"]))
        for v in s.values():
            out |= _refs(v)
    elif isinstance(s, list):
        for v in s:
            out |= _refs(v)
    return out


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _pascal(part: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in re.split(r"[_\-\s]+", part) if w)


def snake(wire: str) -> str:
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", wire.lstrip("_")).lower()
    return name + "_" if keyword.iskeyword(name) else name
