"""The fast protobuf text printer and parser (schema/text_out.py, schema/text_in.py) against
protobuf's own text_format, the independent reference: every setup, chip and system file
in the repository, random messages over every field type, and thousands of random edits of
real setups (where text_format refuses, the same error, line and column)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
from google.protobuf import descriptor, text_format
from google.protobuf.message import Message

from schema import setup_pb2, text_in
from schema.text_out import message_text

ROOT = Path(__file__).resolve().parents[2]
TYPES = (setup_pb2.Setup, setup_pb2.ChipSpec, setup_pb2.SystemPreset, setup_pb2.Sweep)
_FD = descriptor.FieldDescriptor


def _texts() -> list[Path]:
    found = []
    for folder in ("scenarios", "hardware", "tests/data", "tests/malformed", "tests/corpus"):
        found += [p for p in sorted((ROOT / folder).rglob("*.txt")) if p.is_file()]
    return found


def _parsed(
    parse: Callable[[str, Message], object], text: str, cls: type[Message]
) -> tuple[bytes | None, str | None]:
    """The message `parse` makes of `text` (serialized), or its error."""
    message = cls()
    try:
        parse(text, message)
    except Exception as exc:  # noqa: BLE001 - the error itself is compared
        return None, f"{type(exc).__name__}: {exc}"
    return message.SerializeToString(deterministic=True), None


def _reference(text: str, cls: type[Message]) -> tuple[bytes | None, str | None]:
    return _parsed(text_format.Parse, text, cls)


def _fast(text: str, cls: type[Message]) -> tuple[bytes | None, str | None]:
    return _parsed(text_in.parse, text, cls)


def test_every_repository_text_parses_and_prints_as_text_format_does() -> None:
    files = _texts()
    assert len(files) > 100
    parsed = 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for cls in TYPES:
            want = _reference(text, cls)
            assert _fast(text, cls) == want, (path, cls.__name__)
            if want[0] is not None:
                parsed += 1
                message = cls.FromString(want[0])
                assert message_text(message) == text_format.MessageToString(message), path
    assert parsed > 100  # most files are some message type's text


def _random_value(field: descriptor.FieldDescriptor, rng: random.Random) -> object:
    t = field.type
    if t == _FD.TYPE_STRING:
        alphabet = 'abc XYZ_09"\\\n\t#{}:é\u4e2d\U0001f600'
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 8)))
    if t == _FD.TYPE_BOOL:
        return rng.random() < 0.5
    if t == _FD.TYPE_ENUM:
        return rng.choice(field.enum_type.values).number
    if t in (_FD.TYPE_DOUBLE, _FD.TYPE_FLOAT):
        return rng.choice(
            [0.0, -0.0, 1.0, -2.5, 1e-300, 3.0e38, 123456789.125, float("inf"), float("nan")]
            + [rng.uniform(-1e6, 1e6), 10 ** rng.uniform(-20, 20)]
        )
    if t in (_FD.TYPE_UINT32, _FD.TYPE_FIXED32):
        return rng.randrange(0, 2**32)
    if t in (_FD.TYPE_UINT64, _FD.TYPE_FIXED64):
        return rng.randrange(0, 2**64)
    if t in (_FD.TYPE_INT32, _FD.TYPE_SINT32, _FD.TYPE_SFIXED32):
        return rng.randrange(-(2**31), 2**31)
    return rng.randrange(-(2**63), 2**63)


def _fill(message: Message, rng: random.Random, depth: int) -> None:
    """Random fields of every kind (repeated ones several times, nested messages)."""
    for field in message.DESCRIPTOR.fields:
        if rng.random() > 0.35:
            continue
        if field.containing_oneof is not None and message.WhichOneof(field.containing_oneof.name):
            continue
        count = rng.randrange(1, 4) if field.is_repeated else 1
        for _ in range(count):
            if field.cpp_type == _FD.CPPTYPE_MESSAGE:
                if depth >= 3:
                    break
                sub = getattr(message, field.name)
                sub = sub.add() if field.is_repeated else sub
                sub.SetInParent()
                _fill(sub, rng, depth + 1)
            elif field.is_repeated:
                getattr(message, field.name).append(_random_value(field, rng))
            else:
                setattr(message, field.name, _random_value(field, rng))


@pytest.mark.parametrize("seed", range(40))
def test_random_messages_print_and_parse_back_as_text_format_does(seed: int) -> None:
    rng = random.Random(seed)
    for cls in TYPES:
        message = cls()
        _fill(message, rng, 0)
        text = text_format.MessageToString(message)
        assert message_text(message) == text
        assert _fast(text, cls) == _reference(text, cls)


EDITS = ("delete", "insert", "duplicate", "swap", "replace")
TOKENS = (
    "{", "}", ":", ",", ";", "#", '"', "[", "]", "<", ">", "-", ".", "e", "0x1F", "007",
    "1e400", "inf", "-nan", "nan", "2147483648", "-1", "true", "t", "1.5f", "4294967296",
    '"a" "b"', "'q'", "\\n", "\u00a0", "\u0663", "KV_SHARED", "name", "chip", "batch",
)  # fmt: skip


def _edited(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    at = rng.randrange(len(lines))
    kind = rng.choice(EDITS)
    if kind == "duplicate":
        lines.insert(at, lines[at])
    elif kind == "swap" and len(lines) > 1:
        other = rng.randrange(len(lines))
        lines[at], lines[other] = lines[other], lines[at]
    else:
        line = lines[at]
        col = rng.randrange(len(line) + 1)
        if kind == "delete" and line:
            line = line[:col] + line[col + 1 :]
        elif kind == "insert":
            line = line[:col] + rng.choice(TOKENS) + line[col:]
        elif kind == "replace":
            words = line.split()
            if words:
                words[rng.randrange(len(words))] = rng.choice(TOKENS)
                line = " ".join(words)
        lines[at] = line
    return "\n".join(lines)


def test_random_edits_of_real_setups_parse_or_fail_as_text_format_does() -> None:
    """Both sides of the fast path: texts it reads and texts it hands to text_format."""
    rng = random.Random(11)
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in _texts()]
    setups = [t for t in texts if _reference(t, setup_pb2.Setup)[0]]
    assert len(setups) > 30
    outcomes = {"parsed": 0, "refused": 0}
    for _ in range(1500):
        text = rng.choice(setups)
        for _ in range(rng.choice((1, 1, 2))):
            text = _edited(text, rng)
        want = _reference(text, setup_pb2.Setup)
        assert _fast(text, setup_pb2.Setup) == want, text
        outcomes["parsed" if want[0] is not None else "refused"] += 1
    assert outcomes["parsed"] > 150 and outcomes["refused"] > 500, outcomes


def test_a_prefilled_message_merges_as_text_format_does() -> None:
    """The fast path reads into empty messages only; a filled one gets text_format's merge
    (here: its duplicate-field error)."""
    filled = setup_pb2.Setup(name="a")
    with pytest.raises(text_format.ParseError, match="multiple"):
        text_in.parse('name: "b"', filled)


@pytest.mark.parametrize(
    "text",
    [
        "gurobi {\n  time: 2\n# }\n",  # a commented-out brace does not close the message
        "gurobi {\n  time: 2\n}\nname: # 5\n",  # nor does a commented-out value end a field
        'name: "a" # set to 5',  # a comment at the very end, no newline
        'name: "a#b"\n# trailing\n\n',
        "gurobi { time: 2 }  # done\n",
    ],
)
def test_comments_end_at_their_line_and_never_become_tokens(text: str) -> None:
    assert _fast(text, setup_pb2.Setup) == _reference(text, setup_pb2.Setup)
