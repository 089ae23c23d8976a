"""Field names of the schema, for "did you mean" suggestions and field-path checks."""

from __future__ import annotations

import difflib

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from schema import setup_pb2


def message_descriptor(name: str) -> Descriptor | None:
    return setup_pb2.DESCRIPTOR.message_types_by_name.get(name)


def suggest_field(message_name: str, field_name: str) -> str:
    """'; did you mean "x"?' plus the valid names, or '' when the message is unknown."""
    desc = message_descriptor(message_name)
    if desc is None:
        return ""
    names = [f.name for f in desc.fields]
    close = difflib.get_close_matches(field_name, names, n=1, cutoff=0.6)
    hint = f'; did you mean "{close[0]}"?' if close else ""
    return f"{hint}; valid fields: {', '.join(names)}"


def resolve_field_path(path: str, root: Descriptor | None = None) -> FieldDescriptor:
    """The field at a dotted path from Setup (e.g. "system.memory.dram_bw").

    Raises KeyError with the nearest valid path when a part is unknown.
    """
    desc = root or setup_pb2.Setup.DESCRIPTOR
    field: FieldDescriptor | None = None
    walked: list[str] = []
    for part in path.split("."):
        if desc is None:
            scalar = ".".join(walked)
            raise KeyError(
                f'"{scalar}" is a scalar and has no field "{part}"; end the path at "{scalar}"'
            )
        field = desc.fields_by_name.get(part)
        if field is None:
            names = [f.name for f in desc.fields]
            close = difflib.get_close_matches(part, names, n=1, cutoff=0.5)
            prefix = ".".join(walked)
            near = f"{prefix}.{close[0]}" if prefix and close else (close[0] if close else "")
            hint = f'; did you mean "{near}"?' if near else ""
            owner = prefix or desc.name
            raise KeyError(
                f'unknown field path "{path}"{hint}; fields of {owner}: {", ".join(names)}'
            )
        walked.append(part)
        desc = field.message_type
    assert field is not None
    return field
