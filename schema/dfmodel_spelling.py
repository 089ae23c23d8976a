"""DFModel's other spellings of native fields, renamed once, right after parsing.

DFModel's committed inputs span several versions of its schema. Each older or newer
spelling is turned here into the one MapShard reads, so nothing below sees two names for
one thing (`schema.dfmodel` then does the same for the hardware fields):

* `miscellany { ... }` (DFModel's older name of the block) becomes `execution`;
* `execution.overlap` needs no renaming: DFModel's newer names (PERFECT_OVERLAP,
  NO_OVERLAP, OVERLAP_COMPUTE_MEMORY) are aliases of MapShard's OverlapMode values
  (setup.proto); only a contradiction with the legacy `perfect_overlap: true` is refused;
* a kernel variant's `sharding` (OUTER/M/K/N_SHARDING, NO_SHARDING: the across-chip split
  DFModel's inter-chip pass wrote into dse_sharded.txt) becomes the kernel's sharding pin
  (`outer`, `M`, `K`, `N`, `none`). Its `tiling` is DFModel's on-chip tiling dimension and
  is left alone: MapShard searches its own tiles.

Problems name the field the user wrote: `user_field` maps a native path back.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from schema import setup_pb2
from schema.errors import SetupError

SHARDING_PIN: Mapping[int, str] = {
    setup_pb2.OUTER_SHARDING: "outer",
    setup_pb2.M_SHARDING: "M",
    setup_pb2.K_SHARDING: "K",
    setup_pb2.N_SHARDING: "N",
    setup_pb2.NO_SHARDING: "none",
}
DFMODEL_VARIANTS = (
    "gemm_input1_weight",
    "gemm_input1_input2",
    "elementwise_input1",
    "elementwise_input1_input2",
)


def respell(setup: setup_pb2.Setup, path: Path) -> tuple[setup_pb2.Setup, dict[str, str]]:
    """A copy of `setup` in MapShard's spelling, and native path prefix -> the user's.
    Raises SetupError (one line per problem, naming the file and the user's field) when
    two spellings of one field disagree."""
    native = setup_pb2.Setup()
    native.CopyFrom(setup)
    origins: dict[str, str] = {}
    problems: list[str] = []
    if native.HasField("miscellany"):
        if native.HasField("execution"):
            problems.append(
                f"{path}: miscellany and execution are the same block (miscellany is "
                "DFModel's older name); give one of them"
            )
        else:
            native.execution.CopyFrom(native.miscellany)
            origins["execution"] = "miscellany"
        native.ClearField("miscellany")
    _overlap(native.execution, path, origins.get("execution", "execution"), problems)
    if native.HasField("dataflow_graph"):
        _sharding(native.dataflow_graph, path, problems)
    if problems:
        raise SetupError(problems)
    return native, origins


def user_field(message: str, origins: Mapping[str, str]) -> str:
    """`message` with native field paths renamed to the user's (`execution.word` ->
    `miscellany.word` when the file said `miscellany`)."""
    for native, user in origins.items():
        message = message.replace(f": {native}.", f": {user}.").replace(
            f": {native} ", f": {user} "
        )
    return message


def _overlap(ex: setup_pb2.Execution, path: Path, block: str, problems: list[str]) -> None:
    """`perfect_overlap: true` beside `overlap: NO_OVERLAP` says two different things."""
    if ex.perfect_overlap and ex.overlap == setup_pb2.NO_OVERLAP:
        problems.append(
            f"{path}: {block}.perfect_overlap true contradicts {block}.overlap NO_OVERLAP; "
            "give one of them (overlap is DFModel's newer spelling)"
        )


def _sharding(graph: setup_pb2.DataflowGraph, path: Path, problems: list[str]) -> None:
    """A variant's DFModel `sharding` enum becomes the kernel's sharding pin."""
    for i, kernel in enumerate(graph.kernels):
        variant = kernel.WhichOneof("kernel_variant")
        if variant not in DFMODEL_VARIANTS:
            continue
        body = getattr(kernel, variant)
        pin = SHARDING_PIN.get(body.sharding, "")
        if not pin:
            continue
        if kernel.sharding and kernel.sharding != pin:
            problems.append(
                f"{path}: dataflow_graph.kernels[{i}] ({kernel.name}) sharding "
                f"{kernel.sharding!r} contradicts {variant}.sharding "
                f"{setup_pb2.Sharding.Name(body.sharding)}; give one of them"
            )
            continue
        kernel.sharding = pin
        body.sharding = setup_pb2.SHARDING_Placeholder
