"""DFModel's binary inputs (dse.pb, dse_sharded.pb, setup.pb): its `DSE` wire layout, read
and copied into MapShard's setup by field name.

MapShard's own messages (proto/setup.proto) are a superset of DFModel's by *name* (its text
files parse unchanged) but not by *wire layout*: the field numbers and types differ (DFModel
numbers Kernel.config 4 where MapShard's 3 is `config`'s neighbour, its sizes are float32
where MapShard's are doubles, its enums count from other values), so DFModel's binary does
not parse as a MapShard `Setup`. This module declares DFModel's layout as DFModel's
src/setup.proto gives it (the union of its versions at commits 04f93d5 and 5ba2040:
Memory.second_dram_bw/cap 3/4, Accelerator.link_latency 1111, Connection.zero_out 9999,
Execution field 16 as the `overlap` enum, whose PERFECT_OVERLAP = 1 is also the older
`perfect_overlap: true`), decodes the bytes with it and copies the message into MapShard's
`Setup` by name: every field and enum value name of DFModel's is MapShard's too.

A file that is not such a message is refused in one line, and so is one that carries a
field or an enum value this layout does not declare (another DFModel schema version): it
would otherwise be dropped or renumbered silently.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf import message as _message
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.unknown_fields import UnknownFieldSet

from schema import setup_pb2

PACKAGE = "dfmodel_wire"
_F = descriptor_pb2.FieldDescriptorProto
# enum -> its value names, numbered 0, 1, 2, ... as in DFModel's setup.proto
ENUMS: dict[str, tuple[str, ...]] = {
    "FwdBwd": ("FWD_BWD_Placeholder", "FWD", "BWD"),
    "KernelType": ("KernelType_Placeholder", "SYSTOLIC", "SIMD"),
    "CommunicationType": (
        "Communication_Type_Placeholder",
        "ALL_REDUCE",
        "ALL_TO_ALL",
        "ALL_GATHER",
        "ALL_REDUCE_PERIODIC",
        "POINT_TO_POINT",
        "BROADCAST",
    ),
    "Sharding": (
        "SHARDING_Placeholder",
        "OUTER_SHARDING",
        "M_SHARDING",
        "K_SHARDING",
        "N_SHARDING",
        "NO_SHARDING",
    ),
    "Tiling": (
        "TILING_Placeholder",
        "OUTER_TILING",
        "M_TILING",
        "K_TILING",
        "N_TILING",
        "NO_TILING",
    ),
    "LaneStageType": ("Lane_Stage_Type_Placeholder", "LANE", "STAGE"),
    "ExecutionStyle": ("Execution_Style_Placeholder", "DATAFLOW", "KERNEL_BY_KERNEL"),
    "OverlapStyle": (
        "Overlap_Style_Placeholder",
        "PERFECT_OVERLAP",
        "NO_OVERLAP",
        "OVERLAP_COMPUTE_MEMORY",
    ),
}
# a field: (name, number, kind); kind "i" int64, "f" float, "b" bool, "s" string,
# "e:Enum", "m:Message", "r:Message" (repeated message)
_COMMON = (
    ("sharding", 12, "e:Sharding"),
    ("tiling", 20, "e:Tiling"),
    ("communication_type", 13, "e:CommunicationType"),
    ("communication_size", 14, "f"),
    ("communication_type_2", 200, "e:CommunicationType"),
    ("communication_size_2", 300, "f"),
    ("shard_outer_M", 16, "i"),
    ("shard_N", 18, "i"),
    ("memory_size", 100, "f"),
    ("num_input", 2000, "i"),
)
_GEMM = (("outer", 1, "i"), ("M", 2, "i"), ("K", 3, "i"), ("N", 4, "i"), ("shard_K", 17, "i"))
_ELEMENTWISE = (("outer", 1, "i"), ("M", 2, "i"), ("N", 4, "i"))
_OUT = (("output_tensor_size", 9, "f"),)
_ONE_DIM = (("x", 100, "i"), ("link_bw_x", 101, "f"), ("par_x", 102, "s"))
_TWO_DIM = (
    ("x", 100, "i"),
    ("y", 101, "i"),
    ("link_bw_x", 102, "f"),
    ("link_bw_y", 103, "f"),
    ("par_x", 104, "s"),
    ("par_y", 105, "s"),
)
_THREE_DIM = (
    ("x", 100, "i"),
    ("y", 101, "i"),
    ("z", 102, "i"),
    ("link_bw_x", 103, "f"),
    ("link_bw_y", 104, "f"),
    ("link_bw_z", 105, "f"),
    ("par_x", 106, "s"),
    ("par_y", 107, "s"),
    ("par_z", 108, "s"),
)
MESSAGES: dict[str, tuple[tuple[str, int, str], ...]] = {
    "DSE": (
        ("dataflow_graph", 1, "m:Dataflow_Graph"),
        ("system", 2, "m:System"),
        ("cost", 3, "m:Cost"),
        ("execution", 4, "m:Execution"),
        ("gurobi", 5, "m:Gurobi"),
    ),
    "Dataflow_Graph": (("kernels", 1, "r:Kernel"), ("connections", 2, "r:Connection")),
    "Kernel": (
        ("name", 1, "s"),
        ("id", 2, "i"),
        ("topological_number", 3, "i"),
        ("config", 4, "i"),
        ("fwd_bwd", 5, "e:FwdBwd"),
        ("type", 6, "e:KernelType"),
        ("gemm_input1_weight", 7, "m:GEMM_Input1_Weight"),
        ("gemm_input1_input2", 8, "m:GEMM_Input1_Input2"),
        ("elementwise_input1", 9, "m:ElementWise_Input1"),
        ("elementwise_input1_input2", 10, "m:ElementWise_Input1_Input2"),
    ),
    "GEMM_Input1_Weight": _GEMM
    + _COMMON
    + _OUT
    + (
        ("input_tensor_size", 6, "f"),
        ("weight_tensor_size", 8, "f"),
        ("skip_weight", 1000, "b"),
        ("use_effective_stage", 1001, "b"),
    ),
    "GEMM_Input1_Input2": _GEMM
    + _COMMON
    + _OUT
    + (("input_tensor_1_size", 6, "f"), ("input_tensor_2_size", 8, "f")),
    "ElementWise_Input1": _ELEMENTWISE + _COMMON + _OUT + (("input_tensor_size", 6, "f"),),
    "ElementWise_Input1_Input2": _ELEMENTWISE
    + _COMMON
    + _OUT
    + (("input_tensor_1_size", 6, "f"), ("input_tensor_2_size", 30, "f")),
    "Connection": (
        ("id", 10, "i"),
        ("startIdx", 1, "i"),
        ("endIdx", 2, "i"),
        ("communication_type", 4, "e:CommunicationType"),
        ("communication_size", 5, "f"),
        ("buffer_depth", 6, "i"),
        ("tensor_size", 7, "f"),
        ("shard_tensor_size", 8, "f"),
        ("startName", 11, "s"),
        ("endName", 12, "s"),
        ("lane_stage_type", 20, "e:LaneStageType"),
        ("zero_out", 9999, "b"),
    ),
    "Accelerator": (
        ("core", 2, "i"),
        ("systolic_width", 3, "i"),
        ("systolic_height", 4, "i"),
        ("sram_cap", 5, "f"),
        ("freq", 10, "f"),
        ("link_latency", 1111, "f"),
        ("pmu", 6, "i"),
        ("pmu_cap", 7, "f"),
        ("x", 8, "i"),
        ("y", 9, "i"),
        ("placement", 12, "s"),
    ),
    "Memory": (
        ("dram_bw", 1, "f"),
        ("dram_cap", 2, "f"),
        ("second_dram_bw", 3, "f"),
        ("second_dram_cap", 4, "f"),
    ),
    "System": (
        ("num_chip", 1, "i"),
        ("accelerator", 2, "m:Accelerator"),
        ("memory", 100, "m:Memory"),
        ("r", 4, "m:OneDim"),
        ("sw", 5, "m:OneDim"),
        ("fc", 6, "m:OneDim"),
        ("r_r", 7, "m:TwoDim"),
        ("r_fc", 8, "m:TwoDim"),
        ("r_sw", 9, "m:TwoDim"),
        ("sw_sw", 10, "m:TwoDim"),
        ("fc_fc", 11, "m:TwoDim"),
        ("r_r_r", 12, "m:ThreeDim"),
        ("r_sw_sw", 13, "m:ThreeDim"),
        ("sw_sw_sw", 14, "m:ThreeDim"),
        ("HBD", 110, "i"),
    ),
    "OneDim": _ONE_DIM,
    "TwoDim": _TWO_DIM,
    "ThreeDim": _THREE_DIM,
    "Cost": tuple(
        (name, number, "f")
        for number, name in enumerate(
            (
                "link_unit_price",
                "switch_unit_price",
                "dram_unit_price",
                "accelerator_price",
                "link_unit_power_x",
                "link_unit_power_y",
                "link_unit_power_z",
                "switch_unit_power",
                "dram_unit_power",
                "accelerator_power",
            ),
            start=1,
        )
    ),
    "Execution": (
        ("llm", 7, "m:LLM"),
        ("dlrm", 8, "m:DLRM"),
        ("hpl", 9, "m:HPL"),
        ("fft", 10, "m:FFT"),
        ("gemm_fft_llm", 11, "m:FFT_LLM"),
        ("vector_fft_llm", 12, "m:FFT_LLM"),
        ("regular_fft_llm", 13, "m:FFT_LLM"),
        ("mamba", 21, "m:MAMBA"),
        ("execution_style", 14, "e:ExecutionStyle"),
        ("num_config", 15, "i"),
        ("overlap", 16, "e:OverlapStyle"),
        ("separate_rs_ag_for_ar", 100, "b"),
        ("compute_util", 17, "f"),
        ("word", 18, "i"),
    ),
    "LLM": (
        ("hidden_dim", 1, "i"),
        ("head_dim", 2, "i"),
        ("num_head", 3, "i"),
        ("seq_len", 4, "i"),
        ("num_layer", 5, "i"),
        ("global_batch_size", 11, "i"),
        ("micro_batch_size", 12, "i"),
        ("tile_size", 13, "i"),
        ("num_layer_in_graph", 15, "i"),
    ),
    "DLRM": (
        ("num_table", 6, "i"),
        ("emb_dim", 7, "i"),
        ("row", 8, "i"),
        ("global_batch_size", 11, "i"),
        ("num_copy", 12, "i"),
    ),
    "HPL": (("n", 1, "i"), ("b", 2, "i"), ("num_copy", 3, "i")),
    "FFT": (("length", 1, "i"), ("num_copy", 2, "i")),
    "FFT_LLM": (("hidden", 1, "i"), ("seq_len", 2, "i"), ("effective_stage", 3, "i")),
    "MAMBA": (
        ("hidden", 1, "i"),
        ("seq_len", 2, "i"),
        ("tile_size", 3, "i"),
        ("effective_stage", 4, "i"),
    ),
    "Gurobi": (("thread", 1, "i"), ("gap", 2, "f"), ("time", 3, "i")),
}
_SCALARS = {"i": _F.TYPE_INT64, "f": _F.TYPE_FLOAT, "b": _F.TYPE_BOOL, "s": _F.TYPE_STRING}


def _file() -> descriptor_pb2.FileDescriptorProto:
    """The layout above as a proto3 file descriptor."""
    fd = descriptor_pb2.FileDescriptorProto(name="dfmodel_wire.proto", package=PACKAGE)
    fd.syntax = "proto3"
    for enum, names in ENUMS.items():
        e = fd.enum_type.add(name=enum)
        for number, value in enumerate(names):
            e.value.add(name=value, number=number)
    for message, fields in MESSAGES.items():
        m = fd.message_type.add(name=message)
        for name, number, kind in fields:
            f = m.field.add(name=name, number=number, label=_F.LABEL_OPTIONAL)
            code, _, ref = kind.partition(":")
            if code in _SCALARS:
                f.type = _SCALARS[code]
            elif code == "e":
                f.type, f.type_name = _F.TYPE_ENUM, f".{PACKAGE}.{ref}"
            else:
                f.type, f.type_name = _F.TYPE_MESSAGE, f".{PACKAGE}.{ref}"
                if code == "r":
                    f.label = _F.LABEL_REPEATED
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())
DSE = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.DSE"))


def dse_setup(data: bytes) -> setup_pb2.Setup:
    """MapShard's setup holding DFModel's binary `DSE` message `data`, field by field by
    name (each float32 the exact number it holds: DFModel computes with these). Raises
    ValueError with one sentence when the bytes are not such a message or carry what this
    layout does not declare."""
    msg = DSE()
    try:
        msg.ParseFromString(data)
    except _message.DecodeError as exc:
        raise ValueError(f"not a protobuf message ({exc})") from None
    problems = _undeclared(msg, "")
    if problems:
        raise ValueError(
            f"{', '.join(problems[:5])} {'are' if len(problems) > 1 else 'is'} not in DFModel's "
            "schema as MapShard reads it (src/setup.proto at 04f93d5 / 5ba2040), or has "
            "another type there: the file comes from another DFModel version or program"
        )
    setup = setup_pb2.Setup()
    _copy(msg, setup, "")
    return setup


def _copy(src: _message.Message, dst: _message.Message, path: str) -> None:
    """Copy every set field of `src` to the field of the same name in `dst` (an enum by its
    value's name); two members of one of `dst`'s oneofs are refused, not overwritten."""
    for fd, value in src.ListFields():
        where = f"{path}.{fd.name}" if path else fd.name
        target = dst.DESCRIPTOR.fields_by_name.get(fd.name)
        if target is None:  # every name above is MapShard's too: a broken invariant
            raise AssertionError(f"DFModel field {where} has no MapShard field")
        oneof = target.containing_oneof
        if oneof is not None and dst.WhichOneof(oneof.name) not in (None, fd.name):
            raise ValueError(
                f"{where} is given along with {dst.WhichOneof(oneof.name)}, but "
                f"{oneof.name} takes one of them"
            )
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            if fd.is_repeated:
                for i, item in enumerate(value):
                    _copy(item, getattr(dst, fd.name).add(), f"{where}[{i}]")
            else:
                getattr(dst, fd.name).SetInParent()
                _copy(value, getattr(dst, fd.name), where)
        elif fd.type == FieldDescriptor.TYPE_ENUM:
            name = fd.enum_type.values_by_number[value].name
            setattr(dst, fd.name, target.enum_type.values_by_name[name].number)
        else:
            setattr(dst, fd.name, value)


def _undeclared(msg: _message.Message, path: str) -> list[str]:
    """Field numbers this layout does not know and enum numbers it does not name, with the
    path where they sit (e.g. "field 17 of system.memory")."""
    out = [f"field {f.field_number} of {path or 'the top level'}" for f in UnknownFieldSet(msg)]
    for fd, value in msg.ListFields():
        where = f"{path}.{fd.name}" if path else fd.name
        if (
            fd.type == FieldDescriptor.TYPE_ENUM
            and fd.enum_type.values_by_number.get(value) is None
        ):
            out.append(f"value {value} of {where} ({fd.enum_type.name})")
        elif fd.type == FieldDescriptor.TYPE_MESSAGE:
            items = value if fd.is_repeated else (value,)
            for i, item in enumerate(items):
                out += _undeclared(item, f"{where}[{i}]" if fd.is_repeated else where)
    return out
