"""Parsing protobuf text into a message with exactly `text_format.Parse`'s result, at a
fraction of its CPU.

Why: protobuf's text parser is pure Python with a tokenizer object and several method calls
per token; a 20,000-kernel setup takes it 3 of a whole run's 19 CPU-s
(benchmarks/large_graphs.py). The fast path here reads the plain subset setup files are
written in (identifiers, decimal numbers, double-quoted strings without escapes, `#`
comments, `{ }`, `:` and the optional `,` / `;` after a field) with one regular expression
and the message descriptors. Anything else, and anything text_format would refuse or read
differently (an unknown name, a second value of a singular field, a second member of a
oneof, a number its field cannot hold, an adjacent string to concatenate, `[ ]` lists, `< >`,
hex or octal numbers, `inf`), sends the whole text to text_format.Parse on a cleared
message, so the result, and any error with its line and column, is always text_format's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from google.protobuf import descriptor, text_format
from google.protobuf.internal import decoder
from google.protobuf.message import Message

from schema.text_out import plain_type

_FD = descriptor.FieldDescriptor
# One token per match (after whitespace and comments), captured; a character no plain token
# starts with matches the last alternative uncaptured, so findall gives "" for it.
_TOKEN = re.compile(
    r"""(?:\s|\#[^\n]*(?![^\n]))*(?:(
        [A-Za-z_][A-Za-z0-9_]*(?![\w+\-.])
      | -?(?:0|[1-9][0-9]*)(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?(?![\w+\-.])
      | -?\.[0-9]+(?:[eE][-+]?[0-9]+)?(?![\w+\-.])
      | "[^"\\\n]*"
      | [{}:;,]
    )|\S)""",
    re.X,
)
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)\Z")
_NUMBER_START = frozenset("-.0123456789")
_INT_TYPES = frozenset(
    (
        _FD.TYPE_INT32,
        _FD.TYPE_SINT32,
        _FD.TYPE_SFIXED32,
        _FD.TYPE_INT64,
        _FD.TYPE_SINT64,
        _FD.TYPE_SFIXED64,
        _FD.TYPE_UINT32,
        _FD.TYPE_FIXED32,
        _FD.TYPE_UINT64,
        _FD.TYPE_FIXED64,
    )
)
FAST_DEPTH = 64  # deeper nesting goes to text_format (its own limit: 100)
# message descriptor -> field name -> (name, is_message, is_repeated, has_presence,
# oneof name or "", scalar reader or None)
_FIELDS: dict[Any, dict[str, tuple[str, bool, bool, bool, str, Callable[[str], Any] | None]]]
_FIELDS = {}


class _Unplain(Exception):
    """The text leaves the plain subset: text_format reads it."""


def parse(text: str, message: Message) -> None:
    """`text_format.Parse(text, message)` into an empty message, faster on plain text."""
    if message.ByteSize() == 0 and plain_type(message.DESCRIPTOR):
        try:
            tokens = _TOKEN.findall(text)
            if "" in tokens:
                raise _Unplain
            _merge(tokens, message)
            return
        except (_Unplain, TypeError, ValueError, AttributeError):
            message.Clear()
    text_format.Parse(text, message)


def _merge(tokens: list[str], root: Message) -> None:
    """The fields of `tokens` into `root`, as text_format's _MergeField would."""
    stack = [root]
    fields = _fields(root.DESCRIPTOR)
    tables = [fields]
    i, n = 0, len(tokens)
    while i < n:
        word = tokens[i]
        if word == "}":
            if len(stack) == 1:
                raise _Unplain
            stack.pop()
            tables.pop()
            fields = tables[-1]
            i += 1
            if i < n and (tokens[i] == "," or tokens[i] == ";"):
                i += 1
            continue
        info = fields.get(word)
        if info is None:
            raise _Unplain  # unknown, or not a name at all
        name, is_message, repeated, presence, oneof, read = info
        message = stack[-1]
        if oneof:
            chosen = message.WhichOneof(oneof)
            if chosen is not None and chosen != name:
                raise _Unplain
        i += 1
        if is_message:
            if i < n and tokens[i] == ":":
                i += 1
            if i >= n or tokens[i] != "{" or len(stack) >= FAST_DEPTH:
                raise _Unplain
            if repeated:
                sub = getattr(message, name).add()
            else:
                if message.HasField(name):
                    raise _Unplain
                sub = getattr(message, name)
                sub.SetInParent()
            stack.append(sub)
            fields = _fields(sub.DESCRIPTOR)
            tables.append(fields)
            i += 1
            continue
        if i + 1 >= n or tokens[i] != ":":
            raise _Unplain
        assert read is not None
        value = read(tokens[i + 1])
        i += 2
        if repeated:
            getattr(message, name).append(value)
        else:
            if presence:
                duplicate = message.HasField(name)
            else:
                duplicate = not decoder.IsDefaultScalarValue(getattr(message, name))
            if duplicate:
                raise _Unplain
            setattr(message, name, value)
        if i < n:
            after = tokens[i]
            if after[0] == '"' and tokens[i - 1][0] == '"':
                raise _Unplain  # adjacent strings: text_format joins them
            if after == "," or after == ";":
                i += 1
    if len(stack) != 1:
        raise _Unplain  # an unclosed message


def _fields(message_type: Any) -> dict[str, Any]:
    table = _FIELDS.get(message_type)
    if table is None:
        table = _FIELDS[message_type] = {
            f.name: (
                f.name,
                f.cpp_type == _FD.CPPTYPE_MESSAGE,
                f.is_repeated,
                f.has_presence,
                f.containing_oneof.name if f.containing_oneof is not None else "",
                None if f.cpp_type == _FD.CPPTYPE_MESSAGE else _reader(f),
            )
            for f in message_type.fields
        }
    return table


def _reader(field: Any) -> Callable[[str], Any]:
    """How one plain token becomes the field's value (_Unplain where it is not plain)."""
    ftype = field.type
    if ftype in _INT_TYPES:

        def integer(word: str) -> int:
            if not _INTEGER.match(word):
                raise _Unplain
            return int(word)

        return integer
    if ftype in (_FD.TYPE_DOUBLE, _FD.TYPE_FLOAT):

        def number(word: str) -> float:
            if word[0] not in _NUMBER_START:
                raise _Unplain
            return float(word)

        return number
    if ftype == _FD.TYPE_BOOL:

        def boolean(word: str) -> bool:
            if word != "true" and word != "false":
                raise _Unplain
            return word == "true"

        return boolean
    if ftype == _FD.TYPE_STRING:

        def string(word: str) -> str:
            if word[0] != '"':
                raise _Unplain
            return word[1:-1]

        return string
    if ftype == _FD.TYPE_ENUM:
        numbers = {v.name: v.number for v in field.enum_type.values}

        def enum(word: str) -> int:
            number = numbers.get(word)
            if number is None:
                raise _Unplain
            return number

        return enum

    def refused(word: str) -> Any:
        raise _Unplain  # bytes, groups

    return refused
