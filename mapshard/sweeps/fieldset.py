"""Field paths of a sweep axis: check them against the schema, convert value strings to the
field's type, and set them on a Setup.

A path is dotted from `Setup`, e.g. `system.memory.dram_bw` or
`workload.llm_inference.batch`. A part may carry an index, `system.topology[1].degree`.
Semantics of setting a value:
- Sub-messages are created as needed (setting a field inside a oneof member selects it, as
  protobuf does).
- A repeated message field without an index applies the rest of the path to every element
  (`system.topology.link_bw_GBps` sets the bandwidth of every level); when the list is
  empty, one element is created first.
- A repeated scalar leaf (e.g. `system.topology.parallelism`) takes a comma-separated list
  (`"TP,PP"`) and replaces the whole list; with an index, it replaces one element.
- A message-typed leaf takes fields in text format and sets them together, keeping the
  fields it does not name: `workload.llm_inference` with `"input_len: 1024 output_len: 256"`
  is an axis over (input, output) pairs; a field it names is set even to its zero
  (`"phase: PREFILL input_len: 128"` over a DECODE base gives PREFILL). A repeated message
  leaf takes `{...}` items separated by commas and replaces
  the list (`system.topology` with `"{kind: SWITCH degree: 8 link_bw_GBps: 450}"`).
- Scalars: ints and floats by Python's parsing (`"1e3"` is accepted for an int when it is
  whole), bools `true/false/1/0`, enums by value name (case-insensitive), strings as given.
  A proto3 zero means "unset" to the rest of MapShard (e.g. a library value is kept).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from google.protobuf import message as _message
from google.protobuf import text_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message_factory import GetMessageClass

from schema import setup_pb2
from schema.fields import resolve_field_path

_PART = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)\])?$")
_INTS = (
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_FIXED32,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_SFIXED64,
)
_FLOATS = (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)


@dataclass(frozen=True)
class FieldPath:
    """A checked field path: its parts (name, index or None) and the leaf field."""

    text: str
    parts: tuple[tuple[str, int | None], ...]
    leaf: FieldDescriptor

    @property
    def is_numeric(self) -> bool:
        return self.leaf.type in _INTS or self.leaf.type in _FLOATS

    @property
    def is_int(self) -> bool:
        return self.leaf.type in _INTS


def parse_field_path(path: str, root: Descriptor | None = None) -> FieldPath:
    """Check `path` against the schema. Raises KeyError (unknown part, with the nearest valid
    path) or ValueError (malformed part, index on a non-repeated field)."""
    root = root or setup_pb2.Setup.DESCRIPTOR
    raw_parts = path.strip().split(".")
    parts: list[tuple[str, int | None]] = []
    for raw in raw_parts:
        m = _PART.match(raw.strip())
        if not m:
            raise ValueError(
                f"field path {json.dumps(path)}: {json.dumps(raw)} is not a field name (or "
                'name[index]); give dotted names such as "system.topology[0].degree"'
            )
        parts.append((m.group(1), int(m.group(2)) if m.group(2) is not None else None))
    plain = ".".join(name for name, _ in parts)
    leaf = resolve_field_path(plain, root)  # KeyError with the nearest valid path
    desc: Descriptor | None = root
    for name, index in parts:
        assert desc is not None
        fd = desc.fields_by_name[name]
        if index is not None and not fd.is_repeated:
            raise ValueError(
                f'field path {json.dumps(path)}: "{name}" is not repeated; drop "[{index}]"'
            )
        desc = fd.message_type
    return FieldPath(text=path.strip(), parts=tuple(parts), leaf=leaf)


def convert_value(fp: FieldPath, text: str) -> Any:
    """A value string as the leaf field's type. Raises ValueError saying what is valid."""
    fd = fp.leaf
    if fd.message_type is not None:
        return _parse_message(fd, text, whole_list=fd.is_repeated and fp.parts[-1][1] is None)
    if fd.is_repeated and fp.parts[-1][1] is None:
        return [_scalar(fd, item.strip()) for item in text.split(",") if item.strip()]
    return _scalar(fd, text)


def convert_number(fp: FieldPath, value: float) -> Any:
    """A number from a range as the leaf field's type (ints must be whole)."""
    if fp.leaf.type in _INTS:
        rounded = round(value)
        if abs(value - rounded) > 1e-9 * max(1.0, abs(value)):
            raise ValueError(
                f"{fp.text} is an integer field; the range gives {value:g}; give a whole "
                "start and step (or factor)"
            )
        return int(rounded)
    if fp.leaf.type in _FLOATS:
        return float(f"{value:.12g}")  # 0.1 + 0.2 -> 0.3, not 0.30000000000000004
    raise ValueError(f"{fp.text} is not numeric; give `values` instead of a `range`")


def label_of(value: Any, fp: FieldPath | None = None) -> str:
    """The value as written in the results table (enums by name)."""
    if fp is not None and fp.leaf.type == FieldDescriptor.TYPE_ENUM:
        items = value if isinstance(value, list) else [value]
        names = [fp.leaf.enum_type.values_by_number[v].name for v in items]
        return ",".join(names)
    if isinstance(value, MessageValue):
        if _gives_a_zero(value.message, value.named):
            return " ".join(value.text.split())
        return label_of(value.message)
    if isinstance(value, _message.Message):
        return text_format.MessageToString(value, as_one_line=True).strip()
    if isinstance(value, list):
        if value and isinstance(value[0], _message.Message):
            return ", ".join("{" + label_of(v) + "}" for v in value)
        return ",".join(label_of(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.12g}"
    return str(value)


def set_field(setup: _message.Message, fp: FieldPath, value: Any) -> None:
    """Set `value` (from convert_value / convert_number) at `fp` in `setup`, in place."""
    _set(setup, list(fp.parts), value, fp.text)


def _set(msg: _message.Message, parts: list[tuple[str, int | None]], value: Any, path: str) -> None:
    (name, index), rest = parts[0], parts[1:]
    fd = msg.DESCRIPTOR.fields_by_name[name]
    if fd.is_repeated:
        container = getattr(msg, name)
        if index is not None and index >= len(container):
            valid = f"0..{len(container) - 1}" if len(container) else "none"
            raise ValueError(
                f'{path}: "{name}" has {len(container)} element(s) in this setup; index '
                f"{index} is out of range (valid: {valid}; add elements to the base, or "
                "drop the index to set every element)"
            )
        if rest:
            if index is not None:
                _set(container[index], rest, value, path)
                return
            if len(container) == 0:
                container.add()
            for element in container:
                _set(element, rest, value, path)
            return
        if index is not None:
            if fd.message_type is not None:
                _merge(container[index], *_parts(value))
            else:
                container[index] = value
            return
        del container[:]
        if fd.message_type is not None:
            for item in value:
                container.add().CopyFrom(item)
        else:
            container.extend(value)
        return
    if fd.message_type is not None:
        sub = getattr(msg, name)
        sub.SetInParent()
        if rest:
            _set(sub, rest, value, path)
        else:
            _merge(sub, *_parts(value))
        return
    setattr(msg, name, value)


@dataclass(frozen=True)
class MessageValue:
    """A message-typed axis value and the fields its text names (`Named`: field name ->
    the fields named inside it): a proto3 field set to its zero reads as unset in the
    parsed message, so the names say which zeros were given."""

    message: _message.Message
    named: dict[str, Any]
    text: str  # as written (the label, where it gives a zero the message cannot show)


def _named_fields(text: str) -> dict[str, Any]:
    """The field names a text-format message body gives, nested like the message: a name
    followed by ':' or an opening brace, inside the braces (and lists of them) it opens."""
    tokens = []
    tok = text_format.Tokenizer(text.splitlines())
    while not tok.AtEnd():
        tokens.append(tok.token)
        tok.NextToken()
    stack: list[dict[str, Any]] = [{}]  # the message being read, outermost first
    lists: list[tuple[int, dict[str, Any]]] = []  # open `[`: (its depth, its field's names)
    field: dict[str, Any] = {}  # the names of the field whose value comes next
    for i, token in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if token in ("{", "<"):  # a message: the field's, or the list's at this depth
            inside = bool(lists) and lists[-1][0] == len(stack)
            stack.append(lists[-1][1] if inside else field)
        elif token in ("}", ">"):
            stack.pop()
        elif token == "[":
            lists.append((len(stack), field))
        elif token == "]":
            lists.pop()
        elif nxt in (":", "{", "<") and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token):
            field = stack[-1].setdefault(token, {})
    return stack[0]


def _merge(
    target: _message.Message, value: _message.Message, named: dict[str, Any] | None = None
) -> None:
    """Set every field given in `value` on `target`; a given repeated field replaces the
    list, a given sub-message is merged the same way, fields not given are kept. `named`
    (MessageValue.named): fields the text gave, also those at their zero."""
    named = named or {}
    listed = {fd.name for fd, _ in value.ListFields()}
    for name in named.keys() - listed:  # given, at their zero: cleared to it
        fd = target.DESCRIPTOR.fields_by_name.get(name)
        if fd is None:
            continue
        if fd.message_type is not None and not fd.is_repeated:
            getattr(target, name).SetInParent()  # `name { }`: present, fields kept
        else:
            target.ClearField(name)
    for fd, v in value.ListFields():
        if fd.is_repeated:
            container = getattr(target, fd.name)
            del container[:]
            if fd.message_type is not None:
                for item in v:
                    container.add().CopyFrom(item)
            else:
                container.extend(v)
        elif fd.message_type is not None:
            sub = getattr(target, fd.name)
            sub.SetInParent()
            _merge(sub, v, named.get(fd.name))
        else:
            setattr(target, fd.name, v)


def _gives_a_zero(msg: _message.Message, named: dict[str, Any]) -> bool:
    """Whether the text names a field the parsed message does not list (set to its zero)."""
    listed = {fd.name: v for fd, v in msg.ListFields()}
    for name, inner in named.items():
        if name not in listed:
            return True
        fd = msg.DESCRIPTOR.fields_by_name[name]
        if fd.message_type is not None and not fd.is_repeated and inner:
            if _gives_a_zero(listed[name], inner):
                return True
    return False


def _parts(value: Any) -> tuple[_message.Message, dict[str, Any] | None]:
    if isinstance(value, MessageValue):
        return value.message, value.named
    return value, None


def _scalar(fd: FieldDescriptor, text: str) -> Any:
    t = fd.type
    if t == FieldDescriptor.TYPE_STRING:
        return text
    if t == FieldDescriptor.TYPE_BOOL:
        low = text.strip().lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise ValueError(f'"{text}" is not a bool; give true or false')
    if t == FieldDescriptor.TYPE_ENUM:
        names = [v.name for v in fd.enum_type.values]
        for v in fd.enum_type.values:
            if v.name.lower() == text.strip().lower():
                return v.number
        raise ValueError(f'"{text}" is not a {fd.enum_type.name} value; valid: {", ".join(names)}')
    if t in _INTS:
        try:
            return int(text.strip())
        except ValueError:
            pass
        try:
            f = float(text.strip())
        except ValueError:
            raise ValueError(f'"{text}" is not an integer; give a whole number') from None
        if not math.isfinite(f) or f != int(f):
            raise ValueError(f'"{text}" is not a whole number; give an integer')
        return int(f)
    if t in _FLOATS:
        try:
            f = float(text.strip())
        except ValueError:
            raise ValueError(
                f'"{text}" is not a number; give a plain number in the unit of '
                f"{fd.name} (no unit suffix), e.g. 1.5e3"
            ) from None
        if not math.isfinite(f):
            raise ValueError(f'"{text}" is not a finite number; give a finite number')
        return f
    raise ValueError(f"fields of type {t} cannot be swept")


def _parse_message(fd: FieldDescriptor, text: str, whole_list: bool) -> Any:
    """A message leaf: one message body, or (a whole repeated field) `{...}, {...}` items."""
    try:
        if whole_list:
            holder = GetMessageClass(fd.containing_type)()
            text_format.Parse(f"{fd.name}: [{text}]", holder)
            return list(getattr(holder, fd.name))
        msg = GetMessageClass(fd.message_type)()
        text_format.Parse(text, msg)
        return MessageValue(msg, _named_fields(text), text)
    except text_format.ParseError as exc:
        what = "items {...}, {...}" if whole_list else "a message in text format"
        raise ValueError(f'"{text}" is not {what} of {fd.message_type.name}: {exc}') from None
