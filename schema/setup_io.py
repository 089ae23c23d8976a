"""Reading setup files: text-format protobuf with errors that name the file and line:col."""

from __future__ import annotations

import re
from pathlib import Path

from google.protobuf import message as _message
from google.protobuf import text_format

from schema import setup_pb2, text_in
from schema.dfmodel_wire import dse_setup
from schema.errors import SetupError
from schema.fields import suggest_field

SETUP_NAME = "setup.txt"


def setup_path(scenario: str | Path) -> Path:
    """A scenario folder (holding setup.txt) or a setup file itself."""
    path = Path(scenario)
    if path.is_dir():
        candidate = path / SETUP_NAME
        if not candidate.is_file():
            raise SetupError(
                f"{path}: no {SETUP_NAME} in this folder; a scenario folder holds a "
                f"{SETUP_NAME} (see scenarios/ for examples)"
            )
        return candidate
    if not path.exists():
        raise SetupError(f"{path}: no such file or folder; give a scenario folder or a setup.txt")
    return path


MAX_SETUP_BYTES = 64 << 20  # far above any real setup; a device or a huge file is refused


def read_bytes(path: Path) -> bytes:
    """The file's bytes. Only regular files are read, and only up to MAX_SETUP_BYTES: a FIFO
    would block for ever and /dev/zero would fill the memory."""
    try:
        if not path.is_file():
            raise SetupError(f"{path}: not a regular file; give a scenario folder or a setup.txt")
        if path.stat().st_size > MAX_SETUP_BYTES:
            raise SetupError(
                f"{path}: {path.stat().st_size:,} bytes is too large for a setup file "
                f"(limit {MAX_SETUP_BYTES >> 20} MiB)"
            )
        return path.read_bytes()
    except OSError as exc:
        raise SetupError(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_text(path: Path) -> str:
    """The file's UTF-8 text (read_bytes' limits)."""
    data = read_bytes(path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SetupError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); save the file as UTF-8"
        ) from None


_LINE_COL = re.compile(r"^(\d+):(\d+) : (.*)$", re.S)


def parse_text(text: str, message: _message.Message, path: Path) -> None:
    """Parse text-format `text` into `message`; errors become `path:LINE:COL: message`."""
    try:
        text_in.parse(text, message)
    except text_format.ParseError as exc:
        raw = str(exc)
        match = _LINE_COL.match(raw)
        if match:
            line, col, msg = match.groups()
            raise SetupError(f"{path}:{line}:{col}: {_explain(msg)}") from None
        raise SetupError(f"{path}: {_explain(raw)}") from None
    except ValueError as exc:  # a number the field's type cannot hold (an enum of 2^31)
        raise SetupError(f"{path}:{_where(text, str(exc))}{_range_problem(str(exc))}") from None


def _where(text: str, problem: str) -> str:
    """LINE:COL: of the value a protobuf ValueError names (its message has no position)."""
    value = problem.rpartition(":")[2].strip()
    match = re.search(rf"(?<![\w.]){re.escape(value)}(?![\w.])", text) if value else None
    if match is None:
        return " "
    line = text.count("\n", 0, match.start()) + 1
    col = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
    return f"{line}:{col}: "


def _range_problem(problem: str) -> str:
    return (
        f"{problem.lower()}: an enum takes one of its value names (or a number of the enum), "
        "an integer field a number that fits its type"
    )


def _explain(msg: str) -> str:
    """Add what would be valid to protobuf's terse messages."""
    msg = " ".join(msg.split())
    m = re.search(r'Message type "mapshard\.(\w+)" has no field named "(\w+)"', msg)
    if m:
        return f'unknown field "{m.group(2)}" in {m.group(1)}' + suggest_field(
            m.group(1), m.group(2)
        )
    m = re.search(r'Enum type "mapshard\.(\w+)" has no value named (\w+)', msg)
    if m:
        enum = setup_pb2.DESCRIPTOR.enum_types_by_name.get(m.group(1))
        valid = ", ".join(v.name for v in enum.values) if enum else ""
        return f"unknown {m.group(1)} value {m.group(2)}; valid: {valid}"
    m = re.search(
        r'Field "(\w+)" is specified along with field "(\w+)", another member of oneof '
        r'"(\w+)" for message type "mapshard\.(\w+)"',
        msg,
    )
    if m:
        first, second, oneof, owner = m.groups()
        return (
            f'"{first}" is given along with "{second}", but {owner}.{oneof} takes one of '
            "them; keep one"
        )
    m = re.search(r'Message type "mapshard\.(\w+)" should not have multiple "(\w+)" fields', msg)
    if m:
        return (
            f'"{m.group(2)}" is given more than once in {m.group(1)}, which takes one; keep '
            "one (or merge them)"
        )
    m = re.search(r"Couldn't parse (float|integer): (.*)$", msg)
    if m:
        valid = "a number such as 1.5e9" if m.group(1) == "float" else "a whole number"
        return f"{msg}; give {valid} (unquoted, no unit)"
    m = re.search(r"Expected string but found: '(.*)'", msg)
    if m:
        return f'{msg}; a string field takes a quoted value, e.g. "{m.group(1)}"'
    return msg


def load_setup(scenario: str | Path) -> tuple[setup_pb2.Setup, Path]:
    """Parse a scenario's setup.txt. Returns the message and the file's path."""
    path = setup_path(scenario)
    if path.suffix == ".pb":
        return dfmodel_binary_setup(path), path
    text = read_text(path)
    if not text.strip():
        raise SetupError(
            f"{path}: the file is empty; a setup needs at least `system` and a `workload` "
            "or `dataflow_graph`"
        )
    setup = setup_pb2.Setup()
    parse_text(text, setup, path)
    return setup, path


def dfmodel_binary_setup(path: Path) -> setup_pb2.Setup:
    """A binary .pb is DFModel's (dse.pb, dse_sharded.pb, setup.pb: its `DSE` message, whose
    wire layout is not MapShard's own; schema.dfmodel_wire), read as the setup it holds."""
    try:
        return dse_setup(read_bytes(path))
    except ValueError as exc:
        raise SetupError(
            f"{path}: not DFModel's binary DSE message: {exc}; give DFModel's dse.pb / "
            "dse_sharded.pb / setup.pb, or the setup as protobuf text"
        ) from None


def load_message(path: Path, message: _message.Message) -> _message.Message:
    text = read_text(path)
    parse_text(text, message, path)
    return message
