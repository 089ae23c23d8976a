"""Checks of the pinned mapping (setup.proto Execution.placement and Execution.pin): the
syntax of every field, one message each naming the field and what is valid. Whether a pin
names a real phase, kernel or loop dim needs the generated graphs (generator.pins); whether
a placement fits the machine needs the resolved system (mapshard.compat)."""

from __future__ import annotations

from schema import setup_pb2
from schema.pins import PLACEMENT_SYNTAX, is_sharding, parse_placement
from schema.problems import Problems
from schema.tiles import TILE_SYNTAX, parse_tile

SHARDING_SYNTAX = (
    'give "none" (replicated), a loop dim of the kernel (kernels.csv `dims`), '
    '"<dim>+rs" (a reduction dim, reduce-scattered) or empty (searched)'
)


def check_pins(setup: setup_pb2.Setup, p: Problems) -> None:
    """execution.placement parses; each execution.pin names a phase and a kernel once, with
    a configuration >= 0 and a sharding and a tile in the words plan.txt writes; a request
    stream (one plan per step shape) takes no kernel pin."""
    e = setup.execution
    if e.placement and parse_placement(e.placement) is None:
        p.add("execution.placement", "is not a placement", e.placement, f"give {PLACEMENT_SYNTAX}")
    inference = setup.workload.llm_inference
    if len(e.pin) and setup.workload.HasField("llm_inference") and inference.HasField("stream"):
        wrong = "pins kernels of a request stream, which solves one plan per step shape"
        valid = "drop the pins (execution.placement pins the stream's layout)"
        p.add("execution.pin", wrong, e.pin[0].kernel, valid)
    seen: dict[tuple[str, str], int] = {}
    for i, pin in enumerate(e.pin):
        where = f"execution.pin[{i}]"
        for name in ("phase", "kernel"):
            if not getattr(pin, name).strip():
                valid = "name it as kernels.csv does (columns phase and kernel)"
                p.add(f"{where}.{name}", "is empty", getattr(pin, name), valid)
        key = (pin.phase.strip(), pin.kernel.strip())
        if all(key) and key in seen:
            valid = "pin each kernel once (one pin holds its config, sharding and tile)"
            p.add(where, f"pins the kernel of execution.pin[{seen[key]}] again", key[1], valid)
        seen.setdefault(key, i)
        if pin.HasField("config") and pin.config < 0:
            valid = "give a configuration index >= 0, or leave config out (searched)"
            p.add(f"{where}.config", "is not a configuration", pin.config, valid)
        elif pin.HasField("config") and e.execution_style != setup_pb2.DATAFLOW:
            wrong = "pins a configuration, but kernel by kernel each kernel is its own"
            valid = "leave config out, or set execution.execution_style: DATAFLOW"
            p.add(f"{where}.config", wrong, pin.config, valid)
        elif pin.HasField("config") and 0 < e.num_config <= pin.config:
            wrong = f"is beyond execution.num_config ({e.num_config})"
            p.add(f"{where}.config", wrong, pin.config, f"give 0..{e.num_config - 1}")
        if pin.sharding and not is_sharding(pin.sharding.strip()):
            p.add(f"{where}.sharding", "is not a sharding", pin.sharding, SHARDING_SYNTAX)
        if pin.tile and parse_tile(pin.tile) is None:
            p.add(f"{where}.tile", "is not a tile", pin.tile, f"give {TILE_SYNTAX}")
