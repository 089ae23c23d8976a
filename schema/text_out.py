"""Protobuf text of a message, byte for byte as `text_format.MessageToString(message)` writes
it with its default options, at a fraction of its CPU.

Why: protobuf's text printer is pure Python with several method calls and writes per field;
a 20,000-kernel graph's result folder prints its setup four times (plan.txt and DFModel's
three files), 5 of a whole run's 19 CPU-s (benchmarks/large_graphs.py). Here each field's
formatting is chosen once per field descriptor and a message's text is a list of strings
joined once. A message with map fields or extensions (none in setup.proto) is printed by
text_format itself, so the output is always its output.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from google.protobuf import descriptor, text_encoding, text_format
from google.protobuf.internal import type_checkers
from google.protobuf.message import Message

_FD = descriptor.FieldDescriptor
# field descriptor -> (name, is_message, is_repeated, scalar formatter or None)
_FIELDS: dict[Any, tuple[str, bool, bool, Callable[[Any], str] | None]] = {}
_PLAIN: dict[Any, bool] = {}  # message descriptor -> printable here (no maps, no extensions)


def message_text(message: Message) -> str:
    """`text_format.MessageToString(message)` (default options), faster."""
    if not plain_type(message.DESCRIPTOR):
        return text_format.MessageToString(message)
    out: list[str] = []
    _append(message, "", out)
    return "".join(out)


def _append(message: Message, indent: str, out: list[str]) -> None:
    inner = indent + "  "
    for field, value in message.ListFields():
        info = _FIELDS.get(field)
        if info is None:
            info = _FIELDS[field] = _field_info(field)
        name, is_message, repeated, fmt = info
        values = value if repeated else (value,)
        if is_message:
            opening = f"{indent}{name} {{\n"
            closing = f"{indent}}}\n"
            for v in values:
                out.append(opening)
                _append(v, inner, out)
                out.append(closing)
        else:
            assert fmt is not None
            head = f"{indent}{name}: "
            for v in values:
                out.append(f"{head}{fmt(v)}\n")


def plain_type(message_type: Any) -> bool:
    """No map field and no extension range in the message type or any message type it
    holds (what the fast text printer and parser read; schema/text_in.py): decided over
    every type reachable from it at once (a recursive type is not taken as plain on a
    guess), kept per root type."""
    known = _PLAIN.get(message_type)
    if known is not None:
        return known
    seen: set[Any] = set()
    stack, plain = [message_type], True
    while stack and plain:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        plain = not current.extension_ranges
        for f in current.fields:
            if f.message_type is not None:
                plain = plain and not f.message_type.GetOptions().map_entry
                stack.append(f.message_type)
    _PLAIN[message_type] = plain
    return plain


def _field_info(field: Any) -> tuple[str, bool, bool, Callable[[Any], str] | None]:
    repeated = field.is_repeated
    if field.cpp_type == _FD.CPPTYPE_MESSAGE:
        return field.name, True, repeated, None
    return field.name, False, repeated, _formatter(field)


def _formatter(field: Any) -> Callable[[Any], str]:
    """How text_format's PrintFieldValue writes one value of the field (as_utf8 default)."""
    cpp = field.cpp_type
    if cpp == _FD.CPPTYPE_ENUM:
        by_number = field.enum_type.values_by_number  # .get: the name text_format picks
        names = {v.number: by_number.get(v.number).name for v in field.enum_type.values}
        return lambda v: names.get(v, str(v))
    if cpp == _FD.CPPTYPE_STRING:
        if field.type == _FD.TYPE_BYTES:
            return lambda v: '"' + text_encoding.CEscape(v, False) + '"'
        return lambda v: '"' + text_encoding.CEscape(v, True) + '"'
    if cpp == _FD.CPPTYPE_BOOL:
        return lambda v: "true" if v else "false"
    if cpp == _FD.CPPTYPE_FLOAT:
        return lambda v: str(v) if math.isnan(v) else str(type_checkers.ToShortestFloat(v))
    return str
