from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FwdBwd(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FWD: _ClassVar[FwdBwd]
    BWD: _ClassVar[FwdBwd]
    FWD_BWD_Placeholder: _ClassVar[FwdBwd]

class KernelType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SYSTOLIC: _ClassVar[KernelType]
    SIMD: _ClassVar[KernelType]
    KernelType_Placeholder: _ClassVar[KernelType]

class Tiling(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NO_TILING: _ClassVar[Tiling]
    M_TILING: _ClassVar[Tiling]
    K_TILING: _ClassVar[Tiling]
    N_TILING: _ClassVar[Tiling]
    OUTER_TILING: _ClassVar[Tiling]
    TILING_Placeholder: _ClassVar[Tiling]

class Sharding(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SHARDING_Placeholder: _ClassVar[Sharding]
    OUTER_SHARDING: _ClassVar[Sharding]
    M_SHARDING: _ClassVar[Sharding]
    K_SHARDING: _ClassVar[Sharding]
    N_SHARDING: _ClassVar[Sharding]
    NO_SHARDING: _ClassVar[Sharding]

class CommunicationType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NO_COMMUNICATION: _ClassVar[CommunicationType]
    Communication_Type_Placeholder: _ClassVar[CommunicationType]
    ALL_REDUCE: _ClassVar[CommunicationType]
    ALL_REDUCE_PERIODIC: _ClassVar[CommunicationType]
    ALL_TO_ALL: _ClassVar[CommunicationType]
    ALL_GATHER: _ClassVar[CommunicationType]
    REDUCE_SCATTER: _ClassVar[CommunicationType]
    POINT_TO_POINT: _ClassVar[CommunicationType]
    BROADCAST: _ClassVar[CommunicationType]

class OperandRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INPUT: _ClassVar[OperandRole]
    WEIGHT: _ClassVar[OperandRole]
    OUTPUT: _ClassVar[OperandRole]
    KV_CACHE: _ClassVar[OperandRole]

class LaneStageType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    Lane_Stage_Type_Placeholder: _ClassVar[LaneStageType]
    LANE: _ClassVar[LaneStageType]
    STAGE: _ClassVar[LaneStageType]

class DType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DTYPE_UNSET: _ClassVar[DType]
    FP32: _ClassVar[DType]
    TF32: _ClassVar[DType]
    BF16: _ClassVar[DType]
    FP16: _ClassVar[DType]
    FP8: _ClassVar[DType]
    INT8: _ClassVar[DType]
    INT4: _ClassVar[DType]
    FP64: _ClassVar[DType]

class FfnKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FFN_UNSET: _ClassVar[FfnKind]
    GELU: _ClassVar[FfnKind]
    SWIGLU: _ClassVar[FfnKind]
    SQUARED_RELU: _ClassVar[FfnKind]

class NormKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NORM_UNSET: _ClassVar[NormKind]
    LAYERNORM: _ClassVar[NormKind]
    RMSNORM: _ClassVar[NormKind]

class AttentionImpl(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FUSED_ATTENTION: _ClassVar[AttentionImpl]
    UNFUSED_ATTENTION: _ClassVar[AttentionImpl]

class Recompute(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RECOMPUTE_NONE: _ClassVar[Recompute]
    RECOMPUTE_SELECTIVE: _ClassVar[Recompute]
    RECOMPUTE_FULL: _ClassVar[Recompute]

class MoeDispatcher(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MOE_DISPATCHER_ALLTOALL: _ClassVar[MoeDispatcher]
    MOE_DISPATCHER_DEEPEP: _ClassVar[MoeDispatcher]

class MoePermute(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MOE_PERMUTE_DEFAULT: _ClassVar[MoePermute]
    MOE_PERMUTE_FUSED: _ClassVar[MoePermute]
    MOE_PERMUTE_SCATTER_ADD: _ClassVar[MoePermute]

class MoeGemm(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MOE_GEMM_DEFAULT: _ClassVar[MoeGemm]
    MOE_GEMM_PER_EXPERT: _ClassVar[MoeGemm]
    MOE_GEMM_GROUPED: _ClassVar[MoeGemm]
    MOE_GEMM_TORCH_GROUPED: _ClassVar[MoeGemm]

class DpOverlap(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DP_OVERLAP_ALL: _ClassVar[DpOverlap]
    DP_OVERLAP_GRAD_REDUCE: _ClassVar[DpOverlap]
    DP_OVERLAP_NONE: _ClassVar[DpOverlap]

class LossImpl(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOSS_FP32_PASSES: _ClassVar[LossImpl]
    LOSS_FUSED: _ClassVar[LossImpl]
    LOSS_TORCH_EAGER: _ClassVar[LossImpl]

class InferencePhase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REQUEST: _ClassVar[InferencePhase]
    PREFILL: _ClassVar[InferencePhase]
    DECODE: _ClassVar[InferencePhase]
    CHUNKED_PREFILL: _ClassVar[InferencePhase]

class Arrival(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OFFLINE: _ClassVar[Arrival]
    POISSON: _ClassVar[Arrival]

class TensorParallelSplit(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCHED_SPLIT: _ClassVar[TensorParallelSplit]
    MODEL_DIMS_SPLIT: _ClassVar[TensorParallelSplit]

class DecodeAttention(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KV_SHARED: _ClassVar[DecodeAttention]
    KV_PER_QUERY_HEAD: _ClassVar[DecodeAttention]
    KV_SHARED_UNSPLIT: _ClassVar[DecodeAttention]

class ServingObjective(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MIN_LATENCY: _ClassVar[ServingObjective]
    MAX_THROUGHPUT: _ClassVar[ServingObjective]

class TopologyKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOPOLOGY_UNSET: _ClassVar[TopologyKind]
    RING: _ClassVar[TopologyKind]
    SWITCH: _ClassVar[TopologyKind]
    FULLY_CONNECTED: _ClassVar[TopologyKind]
    TORUS: _ClassVar[TopologyKind]

class ExecutionStyle(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KERNEL_BY_KERNEL: _ClassVar[ExecutionStyle]
    DATAFLOW: _ClassVar[ExecutionStyle]
    Optimization_Placeholder: _ClassVar[ExecutionStyle]
    Execution_Style_Placeholder: _ClassVar[ExecutionStyle]

class OverlapMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OVERLAP_UNSET: _ClassVar[OverlapMode]
    Overlap_Style_Placeholder: _ClassVar[OverlapMode]
    PERFECT: _ClassVar[OverlapMode]
    PERFECT_OVERLAP: _ClassVar[OverlapMode]
    SERIAL_NETWORK: _ClassVar[OverlapMode]
    OVERLAP_COMPUTE_MEMORY: _ClassVar[OverlapMode]
    NO_OVERLAP: _ClassVar[OverlapMode]

class CostModel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NATIVE: _ClassVar[CostModel]
    DFMODEL: _ClassVar[CostModel]

class Combine(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRODUCT: _ClassVar[Combine]
    ZIP: _ClassVar[Combine]
FWD: FwdBwd
BWD: FwdBwd
FWD_BWD_Placeholder: FwdBwd
SYSTOLIC: KernelType
SIMD: KernelType
KernelType_Placeholder: KernelType
NO_TILING: Tiling
M_TILING: Tiling
K_TILING: Tiling
N_TILING: Tiling
OUTER_TILING: Tiling
TILING_Placeholder: Tiling
SHARDING_Placeholder: Sharding
OUTER_SHARDING: Sharding
M_SHARDING: Sharding
K_SHARDING: Sharding
N_SHARDING: Sharding
NO_SHARDING: Sharding
NO_COMMUNICATION: CommunicationType
Communication_Type_Placeholder: CommunicationType
ALL_REDUCE: CommunicationType
ALL_REDUCE_PERIODIC: CommunicationType
ALL_TO_ALL: CommunicationType
ALL_GATHER: CommunicationType
REDUCE_SCATTER: CommunicationType
POINT_TO_POINT: CommunicationType
BROADCAST: CommunicationType
INPUT: OperandRole
WEIGHT: OperandRole
OUTPUT: OperandRole
KV_CACHE: OperandRole
Lane_Stage_Type_Placeholder: LaneStageType
LANE: LaneStageType
STAGE: LaneStageType
DTYPE_UNSET: DType
FP32: DType
TF32: DType
BF16: DType
FP16: DType
FP8: DType
INT8: DType
INT4: DType
FP64: DType
FFN_UNSET: FfnKind
GELU: FfnKind
SWIGLU: FfnKind
SQUARED_RELU: FfnKind
NORM_UNSET: NormKind
LAYERNORM: NormKind
RMSNORM: NormKind
FUSED_ATTENTION: AttentionImpl
UNFUSED_ATTENTION: AttentionImpl
RECOMPUTE_NONE: Recompute
RECOMPUTE_SELECTIVE: Recompute
RECOMPUTE_FULL: Recompute
MOE_DISPATCHER_ALLTOALL: MoeDispatcher
MOE_DISPATCHER_DEEPEP: MoeDispatcher
MOE_PERMUTE_DEFAULT: MoePermute
MOE_PERMUTE_FUSED: MoePermute
MOE_PERMUTE_SCATTER_ADD: MoePermute
MOE_GEMM_DEFAULT: MoeGemm
MOE_GEMM_PER_EXPERT: MoeGemm
MOE_GEMM_GROUPED: MoeGemm
MOE_GEMM_TORCH_GROUPED: MoeGemm
DP_OVERLAP_ALL: DpOverlap
DP_OVERLAP_GRAD_REDUCE: DpOverlap
DP_OVERLAP_NONE: DpOverlap
LOSS_FP32_PASSES: LossImpl
LOSS_FUSED: LossImpl
LOSS_TORCH_EAGER: LossImpl
REQUEST: InferencePhase
PREFILL: InferencePhase
DECODE: InferencePhase
CHUNKED_PREFILL: InferencePhase
OFFLINE: Arrival
POISSON: Arrival
SEARCHED_SPLIT: TensorParallelSplit
MODEL_DIMS_SPLIT: TensorParallelSplit
KV_SHARED: DecodeAttention
KV_PER_QUERY_HEAD: DecodeAttention
KV_SHARED_UNSPLIT: DecodeAttention
MIN_LATENCY: ServingObjective
MAX_THROUGHPUT: ServingObjective
TOPOLOGY_UNSET: TopologyKind
RING: TopologyKind
SWITCH: TopologyKind
FULLY_CONNECTED: TopologyKind
TORUS: TopologyKind
KERNEL_BY_KERNEL: ExecutionStyle
DATAFLOW: ExecutionStyle
Optimization_Placeholder: ExecutionStyle
Execution_Style_Placeholder: ExecutionStyle
OVERLAP_UNSET: OverlapMode
Overlap_Style_Placeholder: OverlapMode
PERFECT: OverlapMode
PERFECT_OVERLAP: OverlapMode
SERIAL_NETWORK: OverlapMode
OVERLAP_COMPUTE_MEMORY: OverlapMode
NO_OVERLAP: OverlapMode
NATIVE: CostModel
DFMODEL: CostModel
PRODUCT: Combine
ZIP: Combine

class Setup(_message.Message):
    __slots__ = ("dataflow_graph", "system", "cost", "execution", "gurobi", "workload", "solver", "name", "miscellany")
    DATAFLOW_GRAPH_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_FIELD_NUMBER: _ClassVar[int]
    GUROBI_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    SOLVER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MISCELLANY_FIELD_NUMBER: _ClassVar[int]
    dataflow_graph: DataflowGraph
    system: System
    cost: Cost
    execution: Execution
    gurobi: Gurobi
    workload: Workload
    solver: Solver
    name: str
    miscellany: Execution
    def __init__(self, dataflow_graph: _Optional[_Union[DataflowGraph, _Mapping]] = ..., system: _Optional[_Union[System, _Mapping]] = ..., cost: _Optional[_Union[Cost, _Mapping]] = ..., execution: _Optional[_Union[Execution, _Mapping]] = ..., gurobi: _Optional[_Union[Gurobi, _Mapping]] = ..., workload: _Optional[_Union[Workload, _Mapping]] = ..., solver: _Optional[_Union[Solver, _Mapping]] = ..., name: _Optional[str] = ..., miscellany: _Optional[_Union[Execution, _Mapping]] = ...) -> None: ...

class DataflowGraph(_message.Message):
    __slots__ = ("kernels", "connections", "repeat")
    KERNELS_FIELD_NUMBER: _ClassVar[int]
    CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    REPEAT_FIELD_NUMBER: _ClassVar[int]
    kernels: _containers.RepeatedCompositeFieldContainer[Kernel]
    connections: _containers.RepeatedCompositeFieldContainer[Connection]
    repeat: int
    def __init__(self, kernels: _Optional[_Iterable[_Union[Kernel, _Mapping]]] = ..., connections: _Optional[_Iterable[_Union[Connection, _Mapping]]] = ..., repeat: _Optional[int] = ...) -> None: ...

class Kernel(_message.Message):
    __slots__ = ("name", "id", "config", "fwd_bwd", "type", "gemm_input1_weight", "gemm_input1_input2", "elementwise_input1", "elementwise_input1_input2", "einsum", "sharding", "tile", "topological_number")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    FWD_BWD_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    GEMM_INPUT1_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    GEMM_INPUT1_INPUT2_FIELD_NUMBER: _ClassVar[int]
    ELEMENTWISE_INPUT1_FIELD_NUMBER: _ClassVar[int]
    ELEMENTWISE_INPUT1_INPUT2_FIELD_NUMBER: _ClassVar[int]
    EINSUM_FIELD_NUMBER: _ClassVar[int]
    SHARDING_FIELD_NUMBER: _ClassVar[int]
    TILE_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGICAL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: int
    config: int
    fwd_bwd: FwdBwd
    type: KernelType
    gemm_input1_weight: GemmInput1Weight
    gemm_input1_input2: GemmInput1Input2
    elementwise_input1: ElementwiseInput1
    elementwise_input1_input2: ElementwiseInput1Input2
    einsum: EinsumKernel
    sharding: str
    tile: str
    topological_number: int
    def __init__(self, name: _Optional[str] = ..., id: _Optional[int] = ..., config: _Optional[int] = ..., fwd_bwd: _Optional[_Union[FwdBwd, str]] = ..., type: _Optional[_Union[KernelType, str]] = ..., gemm_input1_weight: _Optional[_Union[GemmInput1Weight, _Mapping]] = ..., gemm_input1_input2: _Optional[_Union[GemmInput1Input2, _Mapping]] = ..., elementwise_input1: _Optional[_Union[ElementwiseInput1, _Mapping]] = ..., elementwise_input1_input2: _Optional[_Union[ElementwiseInput1Input2, _Mapping]] = ..., einsum: _Optional[_Union[EinsumKernel, _Mapping]] = ..., sharding: _Optional[str] = ..., tile: _Optional[str] = ..., topological_number: _Optional[int] = ...) -> None: ...

class GemmInput1Weight(_message.Message):
    __slots__ = ("outer", "M", "K", "N", "input_tensor_size", "weight_tensor_size", "output_tensor_size", "tiling", "communication_type", "communication_size", "sharding", "communication_type_2", "communication_size_2", "shard_outer_M", "shard_K", "shard_N", "memory_size", "skip_weight", "use_effective_stage", "num_input", "sram_extra", "dram_extra")
    OUTER_FIELD_NUMBER: _ClassVar[int]
    M_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    INPUT_TENSOR_SIZE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_TENSOR_SIZE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TENSOR_SIZE_FIELD_NUMBER: _ClassVar[int]
    TILING_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_SIZE_FIELD_NUMBER: _ClassVar[int]
    SHARDING_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_TYPE_2_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_SIZE_2_FIELD_NUMBER: _ClassVar[int]
    SHARD_OUTER_M_FIELD_NUMBER: _ClassVar[int]
    SHARD_K_FIELD_NUMBER: _ClassVar[int]
    SHARD_N_FIELD_NUMBER: _ClassVar[int]
    MEMORY_SIZE_FIELD_NUMBER: _ClassVar[int]
    SKIP_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    USE_EFFECTIVE_STAGE_FIELD_NUMBER: _ClassVar[int]
    NUM_INPUT_FIELD_NUMBER: _ClassVar[int]
    SRAM_EXTRA_FIELD_NUMBER: _ClassVar[int]
    DRAM_EXTRA_FIELD_NUMBER: _ClassVar[int]
    outer: int
    M: int
    K: int
    N: int
    input_tensor_size: float
    weight_tensor_size: float
    output_tensor_size: float
    tiling: Tiling
    communication_type: CommunicationType
    communication_size: float
    sharding: Sharding
    communication_type_2: CommunicationType
    communication_size_2: float
    shard_outer_M: int
    shard_K: int
    shard_N: int
    memory_size: float
    skip_weight: bool
    use_effective_stage: bool
    num_input: int
    sram_extra: float
    dram_extra: float
    def __init__(self, outer: _Optional[int] = ..., M: _Optional[int] = ..., K: _Optional[int] = ..., N: _Optional[int] = ..., input_tensor_size: _Optional[float] = ..., weight_tensor_size: _Optional[float] = ..., output_tensor_size: _Optional[float] = ..., tiling: _Optional[_Union[Tiling, str]] = ..., communication_type: _Optional[_Union[CommunicationType, str]] = ..., communication_size: _Optional[float] = ..., sharding: _Optional[_Union[Sharding, str]] = ..., communication_type_2: _Optional[_Union[CommunicationType, str]] = ..., communication_size_2: _Optional[float] = ..., shard_outer_M: _Optional[int] = ..., shard_K: _Optional[int] = ..., shard_N: _Optional[int] = ..., memory_size: _Optional[float] = ..., skip_weight: _Optional[bool] = ..., use_effective_stage: _Optional[bool] = ..., num_input: _Optional[int] = ..., sram_extra: _Optional[float] = ..., dram_extra: _Optional[float] = ...) -> None: ...

class GemmInput1Input2(_message.Message):
    __slots__ = ("outer", "M", "K", "N", "input_tensor_1_size", "input_tensor_2_size", "output_tensor_size", "tiling", "communication_type", "communication_size", "sharding", "communication_type_2", "communication_size_2", "shard_outer_M", "shard_K", "shard_N", "memory_size", "skip_weight", "use_effective_stage", "num_input", "sram_extra", "dram_extra")
    OUTER_FIELD_NUMBER: _ClassVar[int]
    M_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    INPUT_TENSOR_1_SIZE_FIELD_NUMBER: _ClassVar[int]
    INPUT_TENSOR_2_SIZE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TENSOR_SIZE_FIELD_NUMBER: _ClassVar[int]
    TILING_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_SIZE_FIELD_NUMBER: _ClassVar[int]
    SHARDING_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_TYPE_2_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_SIZE_2_FIELD_NUMBER: _ClassVar[int]
    SHARD_OUTER_M_FIELD_NUMBER: _ClassVar[int]
    SHARD_K_FIELD_NUMBER: _ClassVar[int]
    SHARD_N_FIELD_NUMBER: _ClassVar[int]
    MEMORY_SIZE_FIELD_NUMBER: _ClassVar[int]
    SKIP_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    USE_EFFECTIVE_STAGE_FIELD_NUMBER: _ClassVar[int]
    NUM_INPUT_FIELD_NUMBER: _ClassVar[int]
    SRAM_EXTRA_FIELD_NUMBER: _ClassVar[int]
    DRAM_EXTRA_FIELD_NUMBER: _ClassVar[int]
    outer: int
    M: int
    K: int
    N: int
    input_tensor_1_size: float
    input_tensor_2_size: float
    output_tensor_size: float
    tiling: Tiling
    communication_type: CommunicationType
    communication_size: float
    sharding: Sharding
    communication_type_2: CommunicationType
    communication_size_2: float
    shard_outer_M: int
    shard_K: int
    shard_N: int
    memory_size: float
    skip_weight: bool
    use_effective_stage: bool
    num_input: int
    sram_extra: float
    dram_extra: float
    def __init__(self, outer: _Optional[int] = ..., M: _Optional[int] = ..., K: _Optional[int] = ..., N: _Optional[int] = ..., input_tensor_1_size: _Optional[float] = ..., input_tensor_2_size: _Optional[float] = ..., output_tensor_size: _Optional[float] = ..., tiling: _Optional[_Union[Tiling, str]] = ..., communication_type: _Optional[_Union[CommunicationType, str]] = ..., communication_size: _Optional[float] = ..., sharding: _Optional[_Union[Sharding, str]] = ..., communication_type_2: _Optional[_Union[CommunicationType, str]] = ..., communication_size_2: _Optional[float] = ..., shard_outer_M: _Optional[int] = ..., shard_K: _Optional[int] = ..., shard_N: _Optional[int] = ..., memory_size: _Optional[float] = ..., skip_weight: _Optional[bool] = ..., use_effective_stage: _Optional[bool] = ..., num_input: _Optional[int] = ..., sram_extra: _Optional[float] = ..., dram_extra: _Optional[float] = ...) -> None: ...

class ElementwiseInput1(_message.Message):
    __slots__ = ("outer", "M", "N", "input_tensor_size", "output_tensor_size", "tiling", "communication_type", "communication_size", "sharding", "communication_type_2", "communication_size_2", "shard_outer_M", "shard_N", "memory_size", "num_input", "sram_extra", "dram_extra")
    OUTER_FIELD_NUMBER: _ClassVar[int]
    M_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    INPUT_TENSOR_SIZE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TENSOR_SIZE_FIELD_NUMBER: _ClassVar[int]
    TILING_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_SIZE_FIELD_NUMBER: _ClassVar[int]
    SHARDING_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_TYPE_2_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_SIZE_2_FIELD_NUMBER: _ClassVar[int]
    SHARD_OUTER_M_FIELD_NUMBER: _ClassVar[int]
    SHARD_N_FIELD_NUMBER: _ClassVar[int]
    MEMORY_SIZE_FIELD_NUMBER: _ClassVar[int]
    NUM_INPUT_FIELD_NUMBER: _ClassVar[int]
    SRAM_EXTRA_FIELD_NUMBER: _ClassVar[int]
    DRAM_EXTRA_FIELD_NUMBER: _ClassVar[int]
    outer: int
    M: int
    N: int
    input_tensor_size: float
    output_tensor_size: float
    tiling: Tiling
    communication_type: CommunicationType
    communication_size: float
    sharding: Sharding
    communication_type_2: CommunicationType
    communication_size_2: float
    shard_outer_M: int
    shard_N: int
    memory_size: float
    num_input: int
    sram_extra: float
    dram_extra: float
    def __init__(self, outer: _Optional[int] = ..., M: _Optional[int] = ..., N: _Optional[int] = ..., input_tensor_size: _Optional[float] = ..., output_tensor_size: _Optional[float] = ..., tiling: _Optional[_Union[Tiling, str]] = ..., communication_type: _Optional[_Union[CommunicationType, str]] = ..., communication_size: _Optional[float] = ..., sharding: _Optional[_Union[Sharding, str]] = ..., communication_type_2: _Optional[_Union[CommunicationType, str]] = ..., communication_size_2: _Optional[float] = ..., shard_outer_M: _Optional[int] = ..., shard_N: _Optional[int] = ..., memory_size: _Optional[float] = ..., num_input: _Optional[int] = ..., sram_extra: _Optional[float] = ..., dram_extra: _Optional[float] = ...) -> None: ...

class ElementwiseInput1Input2(_message.Message):
    __slots__ = ("outer", "M", "N", "input_tensor_1_size", "input_tensor_2_size", "output_tensor_size", "tiling", "communication_type", "communication_size", "sharding", "communication_type_2", "communication_size_2", "shard_outer_M", "shard_N", "memory_size", "num_input", "sram_extra", "dram_extra")
    OUTER_FIELD_NUMBER: _ClassVar[int]
    M_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    INPUT_TENSOR_1_SIZE_FIELD_NUMBER: _ClassVar[int]
    INPUT_TENSOR_2_SIZE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TENSOR_SIZE_FIELD_NUMBER: _ClassVar[int]
    TILING_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_SIZE_FIELD_NUMBER: _ClassVar[int]
    SHARDING_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_TYPE_2_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_SIZE_2_FIELD_NUMBER: _ClassVar[int]
    SHARD_OUTER_M_FIELD_NUMBER: _ClassVar[int]
    SHARD_N_FIELD_NUMBER: _ClassVar[int]
    MEMORY_SIZE_FIELD_NUMBER: _ClassVar[int]
    NUM_INPUT_FIELD_NUMBER: _ClassVar[int]
    SRAM_EXTRA_FIELD_NUMBER: _ClassVar[int]
    DRAM_EXTRA_FIELD_NUMBER: _ClassVar[int]
    outer: int
    M: int
    N: int
    input_tensor_1_size: float
    input_tensor_2_size: float
    output_tensor_size: float
    tiling: Tiling
    communication_type: CommunicationType
    communication_size: float
    sharding: Sharding
    communication_type_2: CommunicationType
    communication_size_2: float
    shard_outer_M: int
    shard_N: int
    memory_size: float
    num_input: int
    sram_extra: float
    dram_extra: float
    def __init__(self, outer: _Optional[int] = ..., M: _Optional[int] = ..., N: _Optional[int] = ..., input_tensor_1_size: _Optional[float] = ..., input_tensor_2_size: _Optional[float] = ..., output_tensor_size: _Optional[float] = ..., tiling: _Optional[_Union[Tiling, str]] = ..., communication_type: _Optional[_Union[CommunicationType, str]] = ..., communication_size: _Optional[float] = ..., sharding: _Optional[_Union[Sharding, str]] = ..., communication_type_2: _Optional[_Union[CommunicationType, str]] = ..., communication_size_2: _Optional[float] = ..., shard_outer_M: _Optional[int] = ..., shard_N: _Optional[int] = ..., memory_size: _Optional[float] = ..., num_input: _Optional[int] = ..., sram_extra: _Optional[float] = ..., dram_extra: _Optional[float] = ...) -> None: ...

class EinsumKernel(_message.Message):
    __slots__ = ("kind", "dims", "operands", "flop", "kernel_class", "shardable_dims", "communication_type", "communication_size", "math_precision", "communication_group", "thread_blocks", "strided", "attention_window", "unsplit_kv", "fused_experts", "expert_share", "atomic_adds", "torch_grouped", "launches", "host_loop_ops", "per_expert_launches", "dedup_experts", "dedup_top_k")
    KIND_FIELD_NUMBER: _ClassVar[int]
    DIMS_FIELD_NUMBER: _ClassVar[int]
    OPERANDS_FIELD_NUMBER: _ClassVar[int]
    FLOP_FIELD_NUMBER: _ClassVar[int]
    KERNEL_CLASS_FIELD_NUMBER: _ClassVar[int]
    SHARDABLE_DIMS_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_SIZE_FIELD_NUMBER: _ClassVar[int]
    MATH_PRECISION_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_GROUP_FIELD_NUMBER: _ClassVar[int]
    THREAD_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    STRIDED_FIELD_NUMBER: _ClassVar[int]
    ATTENTION_WINDOW_FIELD_NUMBER: _ClassVar[int]
    UNSPLIT_KV_FIELD_NUMBER: _ClassVar[int]
    FUSED_EXPERTS_FIELD_NUMBER: _ClassVar[int]
    EXPERT_SHARE_FIELD_NUMBER: _ClassVar[int]
    ATOMIC_ADDS_FIELD_NUMBER: _ClassVar[int]
    TORCH_GROUPED_FIELD_NUMBER: _ClassVar[int]
    LAUNCHES_FIELD_NUMBER: _ClassVar[int]
    HOST_LOOP_OPS_FIELD_NUMBER: _ClassVar[int]
    PER_EXPERT_LAUNCHES_FIELD_NUMBER: _ClassVar[int]
    DEDUP_EXPERTS_FIELD_NUMBER: _ClassVar[int]
    DEDUP_TOP_K_FIELD_NUMBER: _ClassVar[int]
    kind: str
    dims: _containers.RepeatedCompositeFieldContainer[LoopDim]
    operands: _containers.RepeatedCompositeFieldContainer[OperandSpec]
    flop: float
    kernel_class: str
    shardable_dims: _containers.RepeatedScalarFieldContainer[str]
    communication_type: CommunicationType
    communication_size: float
    math_precision: str
    communication_group: str
    thread_blocks: int
    strided: bool
    attention_window: int
    unsplit_kv: bool
    fused_experts: bool
    expert_share: float
    atomic_adds: float
    torch_grouped: bool
    launches: int
    host_loop_ops: int
    per_expert_launches: bool
    dedup_experts: int
    dedup_top_k: int
    def __init__(self, kind: _Optional[str] = ..., dims: _Optional[_Iterable[_Union[LoopDim, _Mapping]]] = ..., operands: _Optional[_Iterable[_Union[OperandSpec, _Mapping]]] = ..., flop: _Optional[float] = ..., kernel_class: _Optional[str] = ..., shardable_dims: _Optional[_Iterable[str]] = ..., communication_type: _Optional[_Union[CommunicationType, str]] = ..., communication_size: _Optional[float] = ..., math_precision: _Optional[str] = ..., communication_group: _Optional[str] = ..., thread_blocks: _Optional[int] = ..., strided: _Optional[bool] = ..., attention_window: _Optional[int] = ..., unsplit_kv: _Optional[bool] = ..., fused_experts: _Optional[bool] = ..., expert_share: _Optional[float] = ..., atomic_adds: _Optional[float] = ..., torch_grouped: _Optional[bool] = ..., launches: _Optional[int] = ..., host_loop_ops: _Optional[int] = ..., per_expert_launches: _Optional[bool] = ..., dedup_experts: _Optional[int] = ..., dedup_top_k: _Optional[int] = ...) -> None: ...

class LoopDim(_message.Message):
    __slots__ = ("name", "size")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    name: str
    size: int
    def __init__(self, name: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...

class OperandSpec(_message.Message):
    __slots__ = ("name", "role", "dims", "bytes_per_element")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    DIMS_FIELD_NUMBER: _ClassVar[int]
    BYTES_PER_ELEMENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    role: OperandRole
    dims: _containers.RepeatedScalarFieldContainer[str]
    bytes_per_element: float
    def __init__(self, name: _Optional[str] = ..., role: _Optional[_Union[OperandRole, str]] = ..., dims: _Optional[_Iterable[str]] = ..., bytes_per_element: _Optional[float] = ...) -> None: ...

class Connection(_message.Message):
    __slots__ = ("startIdx", "endIdx", "id", "end_operand", "next_instance", "communication_type", "communication_size", "buffer_depth", "tensor_size", "shard_tensor_size", "startName", "endName", "lane_stage_type", "zero_out")
    STARTIDX_FIELD_NUMBER: _ClassVar[int]
    ENDIDX_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    END_OPERAND_FIELD_NUMBER: _ClassVar[int]
    NEXT_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    COMMUNICATION_SIZE_FIELD_NUMBER: _ClassVar[int]
    BUFFER_DEPTH_FIELD_NUMBER: _ClassVar[int]
    TENSOR_SIZE_FIELD_NUMBER: _ClassVar[int]
    SHARD_TENSOR_SIZE_FIELD_NUMBER: _ClassVar[int]
    STARTNAME_FIELD_NUMBER: _ClassVar[int]
    ENDNAME_FIELD_NUMBER: _ClassVar[int]
    LANE_STAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    ZERO_OUT_FIELD_NUMBER: _ClassVar[int]
    startIdx: int
    endIdx: int
    id: int
    end_operand: str
    next_instance: bool
    communication_type: CommunicationType
    communication_size: float
    buffer_depth: int
    tensor_size: float
    shard_tensor_size: float
    startName: str
    endName: str
    lane_stage_type: LaneStageType
    zero_out: bool
    def __init__(self, startIdx: _Optional[int] = ..., endIdx: _Optional[int] = ..., id: _Optional[int] = ..., end_operand: _Optional[str] = ..., next_instance: _Optional[bool] = ..., communication_type: _Optional[_Union[CommunicationType, str]] = ..., communication_size: _Optional[float] = ..., buffer_depth: _Optional[int] = ..., tensor_size: _Optional[float] = ..., shard_tensor_size: _Optional[float] = ..., startName: _Optional[str] = ..., endName: _Optional[str] = ..., lane_stage_type: _Optional[_Union[LaneStageType, str]] = ..., zero_out: _Optional[bool] = ...) -> None: ...

class Workload(_message.Message):
    __slots__ = ("llm_training", "llm_inference", "dlrm", "hpl", "fft", "gemm", "attention", "precision")
    LLM_TRAINING_FIELD_NUMBER: _ClassVar[int]
    LLM_INFERENCE_FIELD_NUMBER: _ClassVar[int]
    DLRM_FIELD_NUMBER: _ClassVar[int]
    HPL_FIELD_NUMBER: _ClassVar[int]
    FFT_FIELD_NUMBER: _ClassVar[int]
    GEMM_FIELD_NUMBER: _ClassVar[int]
    ATTENTION_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    llm_training: LlmTraining
    llm_inference: LlmInference
    dlrm: Dlrm
    hpl: Hpl
    fft: Fft
    gemm: Gemm
    attention: Attention
    precision: Precision
    def __init__(self, llm_training: _Optional[_Union[LlmTraining, _Mapping]] = ..., llm_inference: _Optional[_Union[LlmInference, _Mapping]] = ..., dlrm: _Optional[_Union[Dlrm, _Mapping]] = ..., hpl: _Optional[_Union[Hpl, _Mapping]] = ..., fft: _Optional[_Union[Fft, _Mapping]] = ..., gemm: _Optional[_Union[Gemm, _Mapping]] = ..., attention: _Optional[_Union[Attention, _Mapping]] = ..., precision: _Optional[_Union[Precision, _Mapping]] = ...) -> None: ...

class Precision(_message.Message):
    __slots__ = ("weight", "activation", "kv_cache", "math", "optimizer_bytes_per_param")
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    ACTIVATION_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_FIELD_NUMBER: _ClassVar[int]
    MATH_FIELD_NUMBER: _ClassVar[int]
    OPTIMIZER_BYTES_PER_PARAM_FIELD_NUMBER: _ClassVar[int]
    weight: DType
    activation: DType
    kv_cache: DType
    math: DType
    optimizer_bytes_per_param: float
    def __init__(self, weight: _Optional[_Union[DType, str]] = ..., activation: _Optional[_Union[DType, str]] = ..., kv_cache: _Optional[_Union[DType, str]] = ..., math: _Optional[_Union[DType, str]] = ..., optimizer_bytes_per_param: _Optional[float] = ...) -> None: ...

class ModelSpec(_message.Message):
    __slots__ = ("name", "architecture", "hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim", "intermediate_size", "vocab_size", "ffn", "norm", "tie_embeddings", "attention_bias", "mlp_bias", "max_position_embeddings", "learned_positions", "num_experts", "experts_per_token", "moe_intermediate_size", "num_shared_experts", "first_dense_layers", "capacity_factor", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "post_norms", "gpt2_style_biases", "qk_norm")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARCHITECTURE_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_SIZE_FIELD_NUMBER: _ClassVar[int]
    NUM_LAYERS_FIELD_NUMBER: _ClassVar[int]
    NUM_HEADS_FIELD_NUMBER: _ClassVar[int]
    NUM_KV_HEADS_FIELD_NUMBER: _ClassVar[int]
    HEAD_DIM_FIELD_NUMBER: _ClassVar[int]
    INTERMEDIATE_SIZE_FIELD_NUMBER: _ClassVar[int]
    VOCAB_SIZE_FIELD_NUMBER: _ClassVar[int]
    FFN_FIELD_NUMBER: _ClassVar[int]
    NORM_FIELD_NUMBER: _ClassVar[int]
    TIE_EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    ATTENTION_BIAS_FIELD_NUMBER: _ClassVar[int]
    MLP_BIAS_FIELD_NUMBER: _ClassVar[int]
    MAX_POSITION_EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    LEARNED_POSITIONS_FIELD_NUMBER: _ClassVar[int]
    NUM_EXPERTS_FIELD_NUMBER: _ClassVar[int]
    EXPERTS_PER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    MOE_INTERMEDIATE_SIZE_FIELD_NUMBER: _ClassVar[int]
    NUM_SHARED_EXPERTS_FIELD_NUMBER: _ClassVar[int]
    FIRST_DENSE_LAYERS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FACTOR_FIELD_NUMBER: _ClassVar[int]
    Q_LORA_RANK_FIELD_NUMBER: _ClassVar[int]
    KV_LORA_RANK_FIELD_NUMBER: _ClassVar[int]
    QK_NOPE_HEAD_DIM_FIELD_NUMBER: _ClassVar[int]
    QK_ROPE_HEAD_DIM_FIELD_NUMBER: _ClassVar[int]
    V_HEAD_DIM_FIELD_NUMBER: _ClassVar[int]
    POST_NORMS_FIELD_NUMBER: _ClassVar[int]
    GPT2_STYLE_BIASES_FIELD_NUMBER: _ClassVar[int]
    QK_NORM_FIELD_NUMBER: _ClassVar[int]
    name: str
    architecture: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    ffn: FfnKind
    norm: NormKind
    tie_embeddings: bool
    attention_bias: bool
    mlp_bias: bool
    max_position_embeddings: int
    learned_positions: bool
    num_experts: int
    experts_per_token: int
    moe_intermediate_size: int
    num_shared_experts: int
    first_dense_layers: int
    capacity_factor: float
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    post_norms: bool
    gpt2_style_biases: bool
    qk_norm: bool
    def __init__(self, name: _Optional[str] = ..., architecture: _Optional[str] = ..., hidden_size: _Optional[int] = ..., num_layers: _Optional[int] = ..., num_heads: _Optional[int] = ..., num_kv_heads: _Optional[int] = ..., head_dim: _Optional[int] = ..., intermediate_size: _Optional[int] = ..., vocab_size: _Optional[int] = ..., ffn: _Optional[_Union[FfnKind, str]] = ..., norm: _Optional[_Union[NormKind, str]] = ..., tie_embeddings: _Optional[bool] = ..., attention_bias: _Optional[bool] = ..., mlp_bias: _Optional[bool] = ..., max_position_embeddings: _Optional[int] = ..., learned_positions: _Optional[bool] = ..., num_experts: _Optional[int] = ..., experts_per_token: _Optional[int] = ..., moe_intermediate_size: _Optional[int] = ..., num_shared_experts: _Optional[int] = ..., first_dense_layers: _Optional[int] = ..., capacity_factor: _Optional[float] = ..., q_lora_rank: _Optional[int] = ..., kv_lora_rank: _Optional[int] = ..., qk_nope_head_dim: _Optional[int] = ..., qk_rope_head_dim: _Optional[int] = ..., v_head_dim: _Optional[int] = ..., post_norms: _Optional[bool] = ..., gpt2_style_biases: _Optional[bool] = ..., qk_norm: _Optional[bool] = ...) -> None: ...

class Model(_message.Message):
    __slots__ = ("inline", "hf_model")
    INLINE_FIELD_NUMBER: _ClassVar[int]
    HF_MODEL_FIELD_NUMBER: _ClassVar[int]
    inline: ModelSpec
    hf_model: str
    def __init__(self, inline: _Optional[_Union[ModelSpec, _Mapping]] = ..., hf_model: _Optional[str] = ...) -> None: ...

class LlmTraining(_message.Message):
    __slots__ = ("model", "global_batch", "micro_batch", "seq_len", "recompute", "sequence_parallel", "zero_stage", "virtual_pipeline", "attention", "dropout", "context_parallel", "eager_activation", "loss", "edges_in_pipeline_split", "expert_parallel", "fp8_param_gather", "grad_reduce_fp32", "dp_overlap", "expert_tensor_parallel", "moe_dispatcher", "eager_rope", "master_grad_cast", "moe_gemm", "moe_permute")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_BATCH_FIELD_NUMBER: _ClassVar[int]
    MICRO_BATCH_FIELD_NUMBER: _ClassVar[int]
    SEQ_LEN_FIELD_NUMBER: _ClassVar[int]
    RECOMPUTE_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    ZERO_STAGE_FIELD_NUMBER: _ClassVar[int]
    VIRTUAL_PIPELINE_FIELD_NUMBER: _ClassVar[int]
    ATTENTION_FIELD_NUMBER: _ClassVar[int]
    DROPOUT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    EAGER_ACTIVATION_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    EDGES_IN_PIPELINE_SPLIT_FIELD_NUMBER: _ClassVar[int]
    EXPERT_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    FP8_PARAM_GATHER_FIELD_NUMBER: _ClassVar[int]
    GRAD_REDUCE_FP32_FIELD_NUMBER: _ClassVar[int]
    DP_OVERLAP_FIELD_NUMBER: _ClassVar[int]
    EXPERT_TENSOR_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    MOE_DISPATCHER_FIELD_NUMBER: _ClassVar[int]
    EAGER_ROPE_FIELD_NUMBER: _ClassVar[int]
    MASTER_GRAD_CAST_FIELD_NUMBER: _ClassVar[int]
    MOE_GEMM_FIELD_NUMBER: _ClassVar[int]
    MOE_PERMUTE_FIELD_NUMBER: _ClassVar[int]
    model: Model
    global_batch: int
    micro_batch: int
    seq_len: int
    recompute: Recompute
    sequence_parallel: bool
    zero_stage: int
    virtual_pipeline: int
    attention: AttentionImpl
    dropout: float
    context_parallel: int
    eager_activation: bool
    loss: LossImpl
    edges_in_pipeline_split: bool
    expert_parallel: int
    fp8_param_gather: bool
    grad_reduce_fp32: bool
    dp_overlap: DpOverlap
    expert_tensor_parallel: int
    moe_dispatcher: MoeDispatcher
    eager_rope: bool
    master_grad_cast: bool
    moe_gemm: MoeGemm
    moe_permute: MoePermute
    def __init__(self, model: _Optional[_Union[Model, _Mapping]] = ..., global_batch: _Optional[int] = ..., micro_batch: _Optional[int] = ..., seq_len: _Optional[int] = ..., recompute: _Optional[_Union[Recompute, str]] = ..., sequence_parallel: _Optional[bool] = ..., zero_stage: _Optional[int] = ..., virtual_pipeline: _Optional[int] = ..., attention: _Optional[_Union[AttentionImpl, str]] = ..., dropout: _Optional[float] = ..., context_parallel: _Optional[int] = ..., eager_activation: _Optional[bool] = ..., loss: _Optional[_Union[LossImpl, str]] = ..., edges_in_pipeline_split: _Optional[bool] = ..., expert_parallel: _Optional[int] = ..., fp8_param_gather: _Optional[bool] = ..., grad_reduce_fp32: _Optional[bool] = ..., dp_overlap: _Optional[_Union[DpOverlap, str]] = ..., expert_tensor_parallel: _Optional[int] = ..., moe_dispatcher: _Optional[_Union[MoeDispatcher, str]] = ..., eager_rope: _Optional[bool] = ..., master_grad_cast: _Optional[bool] = ..., moe_gemm: _Optional[_Union[MoeGemm, str]] = ..., moe_permute: _Optional[_Union[MoePermute, str]] = ...) -> None: ...

class LlmInference(_message.Message):
    __slots__ = ("model", "phase", "batch", "input_len", "output_len", "context_len", "chunk_size", "decode_batch", "attention", "serving", "decode_attention", "tensor_parallel_split", "prefill_tokens_per_pass", "request_overhead_us", "kv_reread_dram_share", "prefill_sequences", "stream", "kv_page_tokens", "eager_activation", "eager_rope", "moe_gemm", "moe_permute")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    INPUT_LEN_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LEN_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_LEN_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    DECODE_BATCH_FIELD_NUMBER: _ClassVar[int]
    ATTENTION_FIELD_NUMBER: _ClassVar[int]
    SERVING_FIELD_NUMBER: _ClassVar[int]
    DECODE_ATTENTION_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_SPLIT_FIELD_NUMBER: _ClassVar[int]
    PREFILL_TOKENS_PER_PASS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_OVERHEAD_US_FIELD_NUMBER: _ClassVar[int]
    KV_REREAD_DRAM_SHARE_FIELD_NUMBER: _ClassVar[int]
    PREFILL_SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    KV_PAGE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    EAGER_ACTIVATION_FIELD_NUMBER: _ClassVar[int]
    EAGER_ROPE_FIELD_NUMBER: _ClassVar[int]
    MOE_GEMM_FIELD_NUMBER: _ClassVar[int]
    MOE_PERMUTE_FIELD_NUMBER: _ClassVar[int]
    model: Model
    phase: InferencePhase
    batch: int
    input_len: int
    output_len: int
    context_len: int
    chunk_size: int
    decode_batch: int
    attention: AttentionImpl
    serving: Serving
    decode_attention: DecodeAttention
    tensor_parallel_split: TensorParallelSplit
    prefill_tokens_per_pass: int
    request_overhead_us: float
    kv_reread_dram_share: float
    prefill_sequences: int
    stream: Stream
    kv_page_tokens: int
    eager_activation: bool
    eager_rope: bool
    moe_gemm: MoeGemm
    moe_permute: MoePermute
    def __init__(self, model: _Optional[_Union[Model, _Mapping]] = ..., phase: _Optional[_Union[InferencePhase, str]] = ..., batch: _Optional[int] = ..., input_len: _Optional[int] = ..., output_len: _Optional[int] = ..., context_len: _Optional[int] = ..., chunk_size: _Optional[int] = ..., decode_batch: _Optional[int] = ..., attention: _Optional[_Union[AttentionImpl, str]] = ..., serving: _Optional[_Union[Serving, _Mapping]] = ..., decode_attention: _Optional[_Union[DecodeAttention, str]] = ..., tensor_parallel_split: _Optional[_Union[TensorParallelSplit, str]] = ..., prefill_tokens_per_pass: _Optional[int] = ..., request_overhead_us: _Optional[float] = ..., kv_reread_dram_share: _Optional[float] = ..., prefill_sequences: _Optional[int] = ..., stream: _Optional[_Union[Stream, _Mapping]] = ..., kv_page_tokens: _Optional[int] = ..., eager_activation: _Optional[bool] = ..., eager_rope: _Optional[bool] = ..., moe_gemm: _Optional[_Union[MoeGemm, str]] = ..., moe_permute: _Optional[_Union[MoePermute, str]] = ...) -> None: ...

class LengthMix(_message.Message):
    __slots__ = ("tokens", "min", "max", "values")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    tokens: int
    min: int
    max: int
    values: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, tokens: _Optional[int] = ..., min: _Optional[int] = ..., max: _Optional[int] = ..., values: _Optional[_Iterable[int]] = ...) -> None: ...

class Stream(_message.Message):
    __slots__ = ("num_requests", "input_len", "output_len", "arrival", "rate_per_s", "seed", "max_batch", "max_num_tokens", "chunked_prefill", "kv_memory_fraction", "max_ttft_p99_ms", "max_tpot_p99_ms", "kernel_launch_us")
    NUM_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    INPUT_LEN_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LEN_FIELD_NUMBER: _ClassVar[int]
    ARRIVAL_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_S_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CHUNKED_PREFILL_FIELD_NUMBER: _ClassVar[int]
    KV_MEMORY_FRACTION_FIELD_NUMBER: _ClassVar[int]
    MAX_TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_TPOT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    KERNEL_LAUNCH_US_FIELD_NUMBER: _ClassVar[int]
    num_requests: int
    input_len: LengthMix
    output_len: LengthMix
    arrival: Arrival
    rate_per_s: float
    seed: int
    max_batch: int
    max_num_tokens: int
    chunked_prefill: bool
    kv_memory_fraction: float
    max_ttft_p99_ms: float
    max_tpot_p99_ms: float
    kernel_launch_us: float
    def __init__(self, num_requests: _Optional[int] = ..., input_len: _Optional[_Union[LengthMix, _Mapping]] = ..., output_len: _Optional[_Union[LengthMix, _Mapping]] = ..., arrival: _Optional[_Union[Arrival, str]] = ..., rate_per_s: _Optional[float] = ..., seed: _Optional[int] = ..., max_batch: _Optional[int] = ..., max_num_tokens: _Optional[int] = ..., chunked_prefill: _Optional[bool] = ..., kv_memory_fraction: _Optional[float] = ..., max_ttft_p99_ms: _Optional[float] = ..., max_tpot_p99_ms: _Optional[float] = ..., kernel_launch_us: _Optional[float] = ...) -> None: ...

class Serving(_message.Message):
    __slots__ = ("objective", "batch", "input_len", "max_ttft_ms", "max_tpot_ms")
    OBJECTIVE_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    INPUT_LEN_FIELD_NUMBER: _ClassVar[int]
    MAX_TTFT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_TPOT_MS_FIELD_NUMBER: _ClassVar[int]
    objective: ServingObjective
    batch: _containers.RepeatedScalarFieldContainer[int]
    input_len: _containers.RepeatedScalarFieldContainer[int]
    max_ttft_ms: float
    max_tpot_ms: float
    def __init__(self, objective: _Optional[_Union[ServingObjective, str]] = ..., batch: _Optional[_Iterable[int]] = ..., input_len: _Optional[_Iterable[int]] = ..., max_ttft_ms: _Optional[float] = ..., max_tpot_ms: _Optional[float] = ...) -> None: ...

class Dlrm(_message.Message):
    __slots__ = ("mlp_dim", "bottom_num_mlp", "top_num_mlp", "pooled_row", "row", "num_table", "emb_dim", "micro_batch_size", "dense_features")
    MLP_DIM_FIELD_NUMBER: _ClassVar[int]
    BOTTOM_NUM_MLP_FIELD_NUMBER: _ClassVar[int]
    TOP_NUM_MLP_FIELD_NUMBER: _ClassVar[int]
    POOLED_ROW_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    NUM_TABLE_FIELD_NUMBER: _ClassVar[int]
    EMB_DIM_FIELD_NUMBER: _ClassVar[int]
    MICRO_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    DENSE_FEATURES_FIELD_NUMBER: _ClassVar[int]
    mlp_dim: int
    bottom_num_mlp: int
    top_num_mlp: int
    pooled_row: int
    row: int
    num_table: int
    emb_dim: int
    micro_batch_size: int
    dense_features: int
    def __init__(self, mlp_dim: _Optional[int] = ..., bottom_num_mlp: _Optional[int] = ..., top_num_mlp: _Optional[int] = ..., pooled_row: _Optional[int] = ..., row: _Optional[int] = ..., num_table: _Optional[int] = ..., emb_dim: _Optional[int] = ..., micro_batch_size: _Optional[int] = ..., dense_features: _Optional[int] = ...) -> None: ...

class Hpl(_message.Message):
    __slots__ = ("N", "B", "X", "Y", "sample_iterations", "depth")
    N_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    N: int
    B: int
    X: int
    Y: int
    sample_iterations: int
    depth: int
    def __init__(self, N: _Optional[int] = ..., B: _Optional[int] = ..., X: _Optional[int] = ..., Y: _Optional[int] = ..., sample_iterations: _Optional[int] = ..., depth: _Optional[int] = ...) -> None: ...

class Fft(_message.Message):
    __slots__ = ("length", "batch")
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    length: int
    batch: int
    def __init__(self, length: _Optional[int] = ..., batch: _Optional[int] = ...) -> None: ...

class Gemm(_message.Message):
    __slots__ = ("M", "K", "N", "batch", "weight_operand")
    M_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_OPERAND_FIELD_NUMBER: _ClassVar[int]
    M: int
    K: int
    N: int
    batch: int
    weight_operand: bool
    def __init__(self, M: _Optional[int] = ..., K: _Optional[int] = ..., N: _Optional[int] = ..., batch: _Optional[int] = ..., weight_operand: _Optional[bool] = ...) -> None: ...

class Attention(_message.Message):
    __slots__ = ("batch", "heads", "kv_heads", "head_dim", "q_len", "kv_len", "backward", "decode_attention")
    BATCH_FIELD_NUMBER: _ClassVar[int]
    HEADS_FIELD_NUMBER: _ClassVar[int]
    KV_HEADS_FIELD_NUMBER: _ClassVar[int]
    HEAD_DIM_FIELD_NUMBER: _ClassVar[int]
    Q_LEN_FIELD_NUMBER: _ClassVar[int]
    KV_LEN_FIELD_NUMBER: _ClassVar[int]
    BACKWARD_FIELD_NUMBER: _ClassVar[int]
    DECODE_ATTENTION_FIELD_NUMBER: _ClassVar[int]
    batch: int
    heads: int
    kv_heads: int
    head_dim: int
    q_len: int
    kv_len: int
    backward: bool
    decode_attention: DecodeAttention
    def __init__(self, batch: _Optional[int] = ..., heads: _Optional[int] = ..., kv_heads: _Optional[int] = ..., head_dim: _Optional[int] = ..., q_len: _Optional[int] = ..., kv_len: _Optional[int] = ..., backward: _Optional[bool] = ..., decode_attention: _Optional[_Union[DecodeAttention, str]] = ...) -> None: ...

class System(_message.Message):
    __slots__ = ("chip", "preset", "num_chip", "accelerator", "memory", "memory_levels", "topology", "r", "sw", "fc", "r_r", "r_fc", "r_sw", "sw_sw", "fc_fc", "r_r_r", "r_sw_sw", "sw_sw_sw", "chip_table", "HBD", "kernel_source")
    CHIP_FIELD_NUMBER: _ClassVar[int]
    PRESET_FIELD_NUMBER: _ClassVar[int]
    NUM_CHIP_FIELD_NUMBER: _ClassVar[int]
    ACCELERATOR_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LEVELS_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    R_FIELD_NUMBER: _ClassVar[int]
    SW_FIELD_NUMBER: _ClassVar[int]
    FC_FIELD_NUMBER: _ClassVar[int]
    R_R_FIELD_NUMBER: _ClassVar[int]
    R_FC_FIELD_NUMBER: _ClassVar[int]
    R_SW_FIELD_NUMBER: _ClassVar[int]
    SW_SW_FIELD_NUMBER: _ClassVar[int]
    FC_FC_FIELD_NUMBER: _ClassVar[int]
    R_R_R_FIELD_NUMBER: _ClassVar[int]
    R_SW_SW_FIELD_NUMBER: _ClassVar[int]
    SW_SW_SW_FIELD_NUMBER: _ClassVar[int]
    CHIP_TABLE_FIELD_NUMBER: _ClassVar[int]
    HBD_FIELD_NUMBER: _ClassVar[int]
    KERNEL_SOURCE_FIELD_NUMBER: _ClassVar[int]
    chip: str
    preset: str
    num_chip: int
    accelerator: Accelerator
    memory: Memory
    memory_levels: _containers.RepeatedCompositeFieldContainer[MemoryLevel]
    topology: _containers.RepeatedCompositeFieldContainer[TopologyLevel]
    r: R
    sw: SW
    fc: FC
    r_r: R_R
    r_fc: R_FC
    r_sw: R_SW
    sw_sw: SW_SW
    fc_fc: FC_FC
    r_r_r: R_R_R
    r_sw_sw: R_SW_SW
    sw_sw_sw: SW_SW_SW
    chip_table: str
    HBD: int
    kernel_source: str
    def __init__(self, chip: _Optional[str] = ..., preset: _Optional[str] = ..., num_chip: _Optional[int] = ..., accelerator: _Optional[_Union[Accelerator, _Mapping]] = ..., memory: _Optional[_Union[Memory, _Mapping]] = ..., memory_levels: _Optional[_Iterable[_Union[MemoryLevel, _Mapping]]] = ..., topology: _Optional[_Iterable[_Union[TopologyLevel, _Mapping]]] = ..., r: _Optional[_Union[R, _Mapping]] = ..., sw: _Optional[_Union[SW, _Mapping]] = ..., fc: _Optional[_Union[FC, _Mapping]] = ..., r_r: _Optional[_Union[R_R, _Mapping]] = ..., r_fc: _Optional[_Union[R_FC, _Mapping]] = ..., r_sw: _Optional[_Union[R_SW, _Mapping]] = ..., sw_sw: _Optional[_Union[SW_SW, _Mapping]] = ..., fc_fc: _Optional[_Union[FC_FC, _Mapping]] = ..., r_r_r: _Optional[_Union[R_R_R, _Mapping]] = ..., r_sw_sw: _Optional[_Union[R_SW_SW, _Mapping]] = ..., sw_sw_sw: _Optional[_Union[SW_SW_SW, _Mapping]] = ..., chip_table: _Optional[str] = ..., HBD: _Optional[int] = ..., kernel_source: _Optional[str] = ...) -> None: ...

class Accelerator(_message.Message):
    __slots__ = ("core", "systolic_width", "systolic_height", "sram_cap", "freq", "fp64_tflops", "fp32_tflops", "tf32_tflops", "bf16_tflops", "fp16_tflops", "fp8_tflops", "int8_tflops", "int4_tflops", "vector_tflops", "l2_cap", "l2_bw_GBps", "efficiency", "pmu", "pmu_cap", "x", "y", "placement", "link_latency")
    CORE_FIELD_NUMBER: _ClassVar[int]
    SYSTOLIC_WIDTH_FIELD_NUMBER: _ClassVar[int]
    SYSTOLIC_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    SRAM_CAP_FIELD_NUMBER: _ClassVar[int]
    FREQ_FIELD_NUMBER: _ClassVar[int]
    FP64_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    FP32_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    TF32_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    BF16_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    FP16_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    FP8_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    INT8_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    INT4_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    VECTOR_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    L2_CAP_FIELD_NUMBER: _ClassVar[int]
    L2_BW_GBPS_FIELD_NUMBER: _ClassVar[int]
    EFFICIENCY_FIELD_NUMBER: _ClassVar[int]
    PMU_FIELD_NUMBER: _ClassVar[int]
    PMU_CAP_FIELD_NUMBER: _ClassVar[int]
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    LINK_LATENCY_FIELD_NUMBER: _ClassVar[int]
    core: int
    systolic_width: int
    systolic_height: int
    sram_cap: float
    freq: float
    fp64_tflops: float
    fp32_tflops: float
    tf32_tflops: float
    bf16_tflops: float
    fp16_tflops: float
    fp8_tflops: float
    int8_tflops: float
    int4_tflops: float
    vector_tflops: float
    l2_cap: float
    l2_bw_GBps: float
    efficiency: Efficiency
    pmu: int
    pmu_cap: float
    x: int
    y: int
    placement: str
    link_latency: float
    def __init__(self, core: _Optional[int] = ..., systolic_width: _Optional[int] = ..., systolic_height: _Optional[int] = ..., sram_cap: _Optional[float] = ..., freq: _Optional[float] = ..., fp64_tflops: _Optional[float] = ..., fp32_tflops: _Optional[float] = ..., tf32_tflops: _Optional[float] = ..., bf16_tflops: _Optional[float] = ..., fp16_tflops: _Optional[float] = ..., fp8_tflops: _Optional[float] = ..., int8_tflops: _Optional[float] = ..., int4_tflops: _Optional[float] = ..., vector_tflops: _Optional[float] = ..., l2_cap: _Optional[float] = ..., l2_bw_GBps: _Optional[float] = ..., efficiency: _Optional[_Union[Efficiency, _Mapping]] = ..., pmu: _Optional[int] = ..., pmu_cap: _Optional[float] = ..., x: _Optional[int] = ..., y: _Optional[int] = ..., placement: _Optional[str] = ..., link_latency: _Optional[float] = ...) -> None: ...

class Efficiency(_message.Message):
    __slots__ = ("gemm_util", "gemm_half_dim", "gemm_tile_m", "gemm_tile_n", "dram_util", "attention_util", "vector_util", "kernel_overhead_us", "collective", "gpu_wave_model", "source", "gemm_util_by_precision", "compute_util", "kernel_min_time_us", "fp8_split_accumulate_util", "tp_comm_hidden_share", "strided_elementwise_gelem_per_s", "causal_attention", "unsplit_decode_attention", "atomic_add_gelem_per_s", "grouped_mm_dram_share")
    GEMM_UTIL_FIELD_NUMBER: _ClassVar[int]
    GEMM_HALF_DIM_FIELD_NUMBER: _ClassVar[int]
    GEMM_TILE_M_FIELD_NUMBER: _ClassVar[int]
    GEMM_TILE_N_FIELD_NUMBER: _ClassVar[int]
    DRAM_UTIL_FIELD_NUMBER: _ClassVar[int]
    ATTENTION_UTIL_FIELD_NUMBER: _ClassVar[int]
    VECTOR_UTIL_FIELD_NUMBER: _ClassVar[int]
    KERNEL_OVERHEAD_US_FIELD_NUMBER: _ClassVar[int]
    COLLECTIVE_FIELD_NUMBER: _ClassVar[int]
    GPU_WAVE_MODEL_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    GEMM_UTIL_BY_PRECISION_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_UTIL_FIELD_NUMBER: _ClassVar[int]
    KERNEL_MIN_TIME_US_FIELD_NUMBER: _ClassVar[int]
    FP8_SPLIT_ACCUMULATE_UTIL_FIELD_NUMBER: _ClassVar[int]
    TP_COMM_HIDDEN_SHARE_FIELD_NUMBER: _ClassVar[int]
    STRIDED_ELEMENTWISE_GELEM_PER_S_FIELD_NUMBER: _ClassVar[int]
    CAUSAL_ATTENTION_FIELD_NUMBER: _ClassVar[int]
    UNSPLIT_DECODE_ATTENTION_FIELD_NUMBER: _ClassVar[int]
    ATOMIC_ADD_GELEM_PER_S_FIELD_NUMBER: _ClassVar[int]
    GROUPED_MM_DRAM_SHARE_FIELD_NUMBER: _ClassVar[int]
    gemm_util: float
    gemm_half_dim: float
    gemm_tile_m: int
    gemm_tile_n: int
    dram_util: float
    attention_util: float
    vector_util: float
    kernel_overhead_us: float
    collective: _containers.RepeatedCompositeFieldContainer[CollectiveEfficiency]
    gpu_wave_model: bool
    source: str
    gemm_util_by_precision: _containers.RepeatedCompositeFieldContainer[PrecisionUtil]
    compute_util: float
    kernel_min_time_us: float
    fp8_split_accumulate_util: float
    tp_comm_hidden_share: float
    strided_elementwise_gelem_per_s: float
    causal_attention: _containers.RepeatedCompositeFieldContainer[CausalAttentionEfficiency]
    unsplit_decode_attention: UnsplitDecodeEfficiency
    atomic_add_gelem_per_s: float
    grouped_mm_dram_share: float
    def __init__(self, gemm_util: _Optional[float] = ..., gemm_half_dim: _Optional[float] = ..., gemm_tile_m: _Optional[int] = ..., gemm_tile_n: _Optional[int] = ..., dram_util: _Optional[float] = ..., attention_util: _Optional[float] = ..., vector_util: _Optional[float] = ..., kernel_overhead_us: _Optional[float] = ..., collective: _Optional[_Iterable[_Union[CollectiveEfficiency, _Mapping]]] = ..., gpu_wave_model: _Optional[bool] = ..., source: _Optional[str] = ..., gemm_util_by_precision: _Optional[_Iterable[_Union[PrecisionUtil, _Mapping]]] = ..., compute_util: _Optional[float] = ..., kernel_min_time_us: _Optional[float] = ..., fp8_split_accumulate_util: _Optional[float] = ..., tp_comm_hidden_share: _Optional[float] = ..., strided_elementwise_gelem_per_s: _Optional[float] = ..., causal_attention: _Optional[_Iterable[_Union[CausalAttentionEfficiency, _Mapping]]] = ..., unsplit_decode_attention: _Optional[_Union[UnsplitDecodeEfficiency, _Mapping]] = ..., atomic_add_gelem_per_s: _Optional[float] = ..., grouped_mm_dram_share: _Optional[float] = ...) -> None: ...

class UnsplitDecodeEfficiency(_message.Message):
    __slots__ = ("sm_stream_GBps", "wave_us")
    SM_STREAM_GBPS_FIELD_NUMBER: _ClassVar[int]
    WAVE_US_FIELD_NUMBER: _ClassVar[int]
    sm_stream_GBps: float
    wave_us: float
    def __init__(self, sm_stream_GBps: _Optional[float] = ..., wave_us: _Optional[float] = ...) -> None: ...

class CausalAttentionEfficiency(_message.Message):
    __slots__ = ("kernel", "fwd_util", "fwd_wave_us", "bwd_util", "bwd_wave_us")
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    FWD_UTIL_FIELD_NUMBER: _ClassVar[int]
    FWD_WAVE_US_FIELD_NUMBER: _ClassVar[int]
    BWD_UTIL_FIELD_NUMBER: _ClassVar[int]
    BWD_WAVE_US_FIELD_NUMBER: _ClassVar[int]
    kernel: str
    fwd_util: float
    fwd_wave_us: float
    bwd_util: float
    bwd_wave_us: float
    def __init__(self, kernel: _Optional[str] = ..., fwd_util: _Optional[float] = ..., fwd_wave_us: _Optional[float] = ..., bwd_util: _Optional[float] = ..., bwd_wave_us: _Optional[float] = ...) -> None: ...

class PrecisionUtil(_message.Message):
    __slots__ = ("precision", "util", "half_dim")
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    UTIL_FIELD_NUMBER: _ClassVar[int]
    HALF_DIM_FIELD_NUMBER: _ClassVar[int]
    precision: str
    util: float
    half_dim: float
    def __init__(self, precision: _Optional[str] = ..., util: _Optional[float] = ..., half_dim: _Optional[float] = ...) -> None: ...

class CollectiveEfficiency(_message.Message):
    __slots__ = ("level", "bus_bw_util", "latency_us", "half_bw_bytes", "bus_bw_at_size", "all_to_all_bw_at_size", "all_gather_bw_at_size", "reduce_scatter_bw_at_size")
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    BUS_BW_UTIL_FIELD_NUMBER: _ClassVar[int]
    LATENCY_US_FIELD_NUMBER: _ClassVar[int]
    HALF_BW_BYTES_FIELD_NUMBER: _ClassVar[int]
    BUS_BW_AT_SIZE_FIELD_NUMBER: _ClassVar[int]
    ALL_TO_ALL_BW_AT_SIZE_FIELD_NUMBER: _ClassVar[int]
    ALL_GATHER_BW_AT_SIZE_FIELD_NUMBER: _ClassVar[int]
    REDUCE_SCATTER_BW_AT_SIZE_FIELD_NUMBER: _ClassVar[int]
    level: int
    bus_bw_util: float
    latency_us: float
    half_bw_bytes: float
    bus_bw_at_size: _containers.RepeatedCompositeFieldContainer[BusBandwidthPoint]
    all_to_all_bw_at_size: _containers.RepeatedCompositeFieldContainer[BusBandwidthPoint]
    all_gather_bw_at_size: _containers.RepeatedCompositeFieldContainer[BusBandwidthPoint]
    reduce_scatter_bw_at_size: _containers.RepeatedCompositeFieldContainer[BusBandwidthPoint]
    def __init__(self, level: _Optional[int] = ..., bus_bw_util: _Optional[float] = ..., latency_us: _Optional[float] = ..., half_bw_bytes: _Optional[float] = ..., bus_bw_at_size: _Optional[_Iterable[_Union[BusBandwidthPoint, _Mapping]]] = ..., all_to_all_bw_at_size: _Optional[_Iterable[_Union[BusBandwidthPoint, _Mapping]]] = ..., all_gather_bw_at_size: _Optional[_Iterable[_Union[BusBandwidthPoint, _Mapping]]] = ..., reduce_scatter_bw_at_size: _Optional[_Iterable[_Union[BusBandwidthPoint, _Mapping]]] = ...) -> None: ...

class BusBandwidthPoint(_message.Message):
    __slots__ = ("message_bytes", "bus_bw_util")
    MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    BUS_BW_UTIL_FIELD_NUMBER: _ClassVar[int]
    message_bytes: float
    bus_bw_util: float
    def __init__(self, message_bytes: _Optional[float] = ..., bus_bw_util: _Optional[float] = ...) -> None: ...

class Memory(_message.Message):
    __slots__ = ("dram_bw", "dram_cap", "second_dram_bw", "second_dram_cap")
    DRAM_BW_FIELD_NUMBER: _ClassVar[int]
    DRAM_CAP_FIELD_NUMBER: _ClassVar[int]
    SECOND_DRAM_BW_FIELD_NUMBER: _ClassVar[int]
    SECOND_DRAM_CAP_FIELD_NUMBER: _ClassVar[int]
    dram_bw: float
    dram_cap: float
    second_dram_bw: float
    second_dram_cap: float
    def __init__(self, dram_bw: _Optional[float] = ..., dram_cap: _Optional[float] = ..., second_dram_bw: _Optional[float] = ..., second_dram_cap: _Optional[float] = ...) -> None: ...

class MemoryLevel(_message.Message):
    __slots__ = ("name", "bandwidth_GBps", "capacity_bytes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BANDWIDTH_GBPS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_BYTES_FIELD_NUMBER: _ClassVar[int]
    name: str
    bandwidth_GBps: float
    capacity_bytes: float
    def __init__(self, name: _Optional[str] = ..., bandwidth_GBps: _Optional[float] = ..., capacity_bytes: _Optional[float] = ...) -> None: ...

class TopologyLevel(_message.Message):
    __slots__ = ("kind", "degree", "link_bw_GBps", "latency_us", "parallelism", "torus_dims", "name")
    KIND_FIELD_NUMBER: _ClassVar[int]
    DEGREE_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_GBPS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_US_FIELD_NUMBER: _ClassVar[int]
    PARALLELISM_FIELD_NUMBER: _ClassVar[int]
    TORUS_DIMS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    kind: TopologyKind
    degree: int
    link_bw_GBps: float
    latency_us: float
    parallelism: _containers.RepeatedScalarFieldContainer[str]
    torus_dims: _containers.RepeatedScalarFieldContainer[int]
    name: str
    def __init__(self, kind: _Optional[_Union[TopologyKind, str]] = ..., degree: _Optional[int] = ..., link_bw_GBps: _Optional[float] = ..., latency_us: _Optional[float] = ..., parallelism: _Optional[_Iterable[str]] = ..., torus_dims: _Optional[_Iterable[int]] = ..., name: _Optional[str] = ...) -> None: ...

class R(_message.Message):
    __slots__ = ("x", "link_bw_x", "par_x")
    X_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_X_FIELD_NUMBER: _ClassVar[int]
    PAR_X_FIELD_NUMBER: _ClassVar[int]
    x: int
    link_bw_x: float
    par_x: str
    def __init__(self, x: _Optional[int] = ..., link_bw_x: _Optional[float] = ..., par_x: _Optional[str] = ...) -> None: ...

class SW(_message.Message):
    __slots__ = ("x", "link_bw_x", "par_x")
    X_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_X_FIELD_NUMBER: _ClassVar[int]
    PAR_X_FIELD_NUMBER: _ClassVar[int]
    x: int
    link_bw_x: float
    par_x: str
    def __init__(self, x: _Optional[int] = ..., link_bw_x: _Optional[float] = ..., par_x: _Optional[str] = ...) -> None: ...

class FC(_message.Message):
    __slots__ = ("x", "link_bw_x", "par_x")
    X_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_X_FIELD_NUMBER: _ClassVar[int]
    PAR_X_FIELD_NUMBER: _ClassVar[int]
    x: int
    link_bw_x: float
    par_x: str
    def __init__(self, x: _Optional[int] = ..., link_bw_x: _Optional[float] = ..., par_x: _Optional[str] = ...) -> None: ...

class R_R(_message.Message):
    __slots__ = ("x", "y", "link_bw_x", "link_bw_y", "par_x", "par_y")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_X_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_Y_FIELD_NUMBER: _ClassVar[int]
    PAR_X_FIELD_NUMBER: _ClassVar[int]
    PAR_Y_FIELD_NUMBER: _ClassVar[int]
    x: int
    y: int
    link_bw_x: float
    link_bw_y: float
    par_x: str
    par_y: str
    def __init__(self, x: _Optional[int] = ..., y: _Optional[int] = ..., link_bw_x: _Optional[float] = ..., link_bw_y: _Optional[float] = ..., par_x: _Optional[str] = ..., par_y: _Optional[str] = ...) -> None: ...

class R_FC(_message.Message):
    __slots__ = ("x", "y", "link_bw_x", "link_bw_y", "par_x", "par_y")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_X_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_Y_FIELD_NUMBER: _ClassVar[int]
    PAR_X_FIELD_NUMBER: _ClassVar[int]
    PAR_Y_FIELD_NUMBER: _ClassVar[int]
    x: int
    y: int
    link_bw_x: float
    link_bw_y: float
    par_x: str
    par_y: str
    def __init__(self, x: _Optional[int] = ..., y: _Optional[int] = ..., link_bw_x: _Optional[float] = ..., link_bw_y: _Optional[float] = ..., par_x: _Optional[str] = ..., par_y: _Optional[str] = ...) -> None: ...

class R_SW(_message.Message):
    __slots__ = ("x", "y", "link_bw_x", "link_bw_y", "par_x", "par_y")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_X_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_Y_FIELD_NUMBER: _ClassVar[int]
    PAR_X_FIELD_NUMBER: _ClassVar[int]
    PAR_Y_FIELD_NUMBER: _ClassVar[int]
    x: int
    y: int
    link_bw_x: float
    link_bw_y: float
    par_x: str
    par_y: str
    def __init__(self, x: _Optional[int] = ..., y: _Optional[int] = ..., link_bw_x: _Optional[float] = ..., link_bw_y: _Optional[float] = ..., par_x: _Optional[str] = ..., par_y: _Optional[str] = ...) -> None: ...

class SW_SW(_message.Message):
    __slots__ = ("x", "y", "link_bw_x", "link_bw_y", "par_x", "par_y")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_X_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_Y_FIELD_NUMBER: _ClassVar[int]
    PAR_X_FIELD_NUMBER: _ClassVar[int]
    PAR_Y_FIELD_NUMBER: _ClassVar[int]
    x: int
    y: int
    link_bw_x: float
    link_bw_y: float
    par_x: str
    par_y: str
    def __init__(self, x: _Optional[int] = ..., y: _Optional[int] = ..., link_bw_x: _Optional[float] = ..., link_bw_y: _Optional[float] = ..., par_x: _Optional[str] = ..., par_y: _Optional[str] = ...) -> None: ...

class FC_FC(_message.Message):
    __slots__ = ("x", "y", "link_bw_x", "link_bw_y", "par_x", "par_y")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_X_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_Y_FIELD_NUMBER: _ClassVar[int]
    PAR_X_FIELD_NUMBER: _ClassVar[int]
    PAR_Y_FIELD_NUMBER: _ClassVar[int]
    x: int
    y: int
    link_bw_x: float
    link_bw_y: float
    par_x: str
    par_y: str
    def __init__(self, x: _Optional[int] = ..., y: _Optional[int] = ..., link_bw_x: _Optional[float] = ..., link_bw_y: _Optional[float] = ..., par_x: _Optional[str] = ..., par_y: _Optional[str] = ...) -> None: ...

class R_R_R(_message.Message):
    __slots__ = ("x", "y", "z", "link_bw_x", "link_bw_y", "link_bw_z", "par_x", "par_y", "par_z")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    Z_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_X_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_Y_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_Z_FIELD_NUMBER: _ClassVar[int]
    PAR_X_FIELD_NUMBER: _ClassVar[int]
    PAR_Y_FIELD_NUMBER: _ClassVar[int]
    PAR_Z_FIELD_NUMBER: _ClassVar[int]
    x: int
    y: int
    z: int
    link_bw_x: float
    link_bw_y: float
    link_bw_z: float
    par_x: str
    par_y: str
    par_z: str
    def __init__(self, x: _Optional[int] = ..., y: _Optional[int] = ..., z: _Optional[int] = ..., link_bw_x: _Optional[float] = ..., link_bw_y: _Optional[float] = ..., link_bw_z: _Optional[float] = ..., par_x: _Optional[str] = ..., par_y: _Optional[str] = ..., par_z: _Optional[str] = ...) -> None: ...

class R_SW_SW(_message.Message):
    __slots__ = ("x", "y", "z", "link_bw_x", "link_bw_y", "link_bw_z", "par_x", "par_y", "par_z")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    Z_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_X_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_Y_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_Z_FIELD_NUMBER: _ClassVar[int]
    PAR_X_FIELD_NUMBER: _ClassVar[int]
    PAR_Y_FIELD_NUMBER: _ClassVar[int]
    PAR_Z_FIELD_NUMBER: _ClassVar[int]
    x: int
    y: int
    z: int
    link_bw_x: float
    link_bw_y: float
    link_bw_z: float
    par_x: str
    par_y: str
    par_z: str
    def __init__(self, x: _Optional[int] = ..., y: _Optional[int] = ..., z: _Optional[int] = ..., link_bw_x: _Optional[float] = ..., link_bw_y: _Optional[float] = ..., link_bw_z: _Optional[float] = ..., par_x: _Optional[str] = ..., par_y: _Optional[str] = ..., par_z: _Optional[str] = ...) -> None: ...

class SW_SW_SW(_message.Message):
    __slots__ = ("x", "y", "z", "link_bw_x", "link_bw_y", "link_bw_z", "par_x", "par_y", "par_z")
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    Z_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_X_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_Y_FIELD_NUMBER: _ClassVar[int]
    LINK_BW_Z_FIELD_NUMBER: _ClassVar[int]
    PAR_X_FIELD_NUMBER: _ClassVar[int]
    PAR_Y_FIELD_NUMBER: _ClassVar[int]
    PAR_Z_FIELD_NUMBER: _ClassVar[int]
    x: int
    y: int
    z: int
    link_bw_x: float
    link_bw_y: float
    link_bw_z: float
    par_x: str
    par_y: str
    par_z: str
    def __init__(self, x: _Optional[int] = ..., y: _Optional[int] = ..., z: _Optional[int] = ..., link_bw_x: _Optional[float] = ..., link_bw_y: _Optional[float] = ..., link_bw_z: _Optional[float] = ..., par_x: _Optional[str] = ..., par_y: _Optional[str] = ..., par_z: _Optional[str] = ...) -> None: ...

class Cost(_message.Message):
    __slots__ = ("accelerator_price", "accelerator_power", "dram_unit_price", "dram_unit_power", "link_unit_price", "link_unit_power_x", "link_unit_power_y", "link_unit_power_z", "switch_unit_price", "switch_unit_power", "energy_per_flop_pJ", "energy_per_dram_byte_pJ", "energy_per_link_byte_pJ")
    ACCELERATOR_PRICE_FIELD_NUMBER: _ClassVar[int]
    ACCELERATOR_POWER_FIELD_NUMBER: _ClassVar[int]
    DRAM_UNIT_PRICE_FIELD_NUMBER: _ClassVar[int]
    DRAM_UNIT_POWER_FIELD_NUMBER: _ClassVar[int]
    LINK_UNIT_PRICE_FIELD_NUMBER: _ClassVar[int]
    LINK_UNIT_POWER_X_FIELD_NUMBER: _ClassVar[int]
    LINK_UNIT_POWER_Y_FIELD_NUMBER: _ClassVar[int]
    LINK_UNIT_POWER_Z_FIELD_NUMBER: _ClassVar[int]
    SWITCH_UNIT_PRICE_FIELD_NUMBER: _ClassVar[int]
    SWITCH_UNIT_POWER_FIELD_NUMBER: _ClassVar[int]
    ENERGY_PER_FLOP_PJ_FIELD_NUMBER: _ClassVar[int]
    ENERGY_PER_DRAM_BYTE_PJ_FIELD_NUMBER: _ClassVar[int]
    ENERGY_PER_LINK_BYTE_PJ_FIELD_NUMBER: _ClassVar[int]
    accelerator_price: float
    accelerator_power: float
    dram_unit_price: float
    dram_unit_power: float
    link_unit_price: float
    link_unit_power_x: float
    link_unit_power_y: float
    link_unit_power_z: float
    switch_unit_price: float
    switch_unit_power: float
    energy_per_flop_pJ: float
    energy_per_dram_byte_pJ: float
    energy_per_link_byte_pJ: float
    def __init__(self, accelerator_price: _Optional[float] = ..., accelerator_power: _Optional[float] = ..., dram_unit_price: _Optional[float] = ..., dram_unit_power: _Optional[float] = ..., link_unit_price: _Optional[float] = ..., link_unit_power_x: _Optional[float] = ..., link_unit_power_y: _Optional[float] = ..., link_unit_power_z: _Optional[float] = ..., switch_unit_price: _Optional[float] = ..., switch_unit_power: _Optional[float] = ..., energy_per_flop_pJ: _Optional[float] = ..., energy_per_dram_byte_pJ: _Optional[float] = ..., energy_per_link_byte_pJ: _Optional[float] = ...) -> None: ...

class Llm(_message.Message):
    __slots__ = ("hidden_dim", "head_dim", "num_head", "seq_len", "num_layer", "global_batch_size", "micro_batch_size", "num_layer_in_graph", "vocab_size", "tile_size")
    HIDDEN_DIM_FIELD_NUMBER: _ClassVar[int]
    HEAD_DIM_FIELD_NUMBER: _ClassVar[int]
    NUM_HEAD_FIELD_NUMBER: _ClassVar[int]
    SEQ_LEN_FIELD_NUMBER: _ClassVar[int]
    NUM_LAYER_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    MICRO_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    NUM_LAYER_IN_GRAPH_FIELD_NUMBER: _ClassVar[int]
    VOCAB_SIZE_FIELD_NUMBER: _ClassVar[int]
    TILE_SIZE_FIELD_NUMBER: _ClassVar[int]
    hidden_dim: int
    head_dim: int
    num_head: int
    seq_len: int
    num_layer: int
    global_batch_size: int
    micro_batch_size: int
    num_layer_in_graph: int
    vocab_size: int
    tile_size: int
    def __init__(self, hidden_dim: _Optional[int] = ..., head_dim: _Optional[int] = ..., num_head: _Optional[int] = ..., seq_len: _Optional[int] = ..., num_layer: _Optional[int] = ..., global_batch_size: _Optional[int] = ..., micro_batch_size: _Optional[int] = ..., num_layer_in_graph: _Optional[int] = ..., vocab_size: _Optional[int] = ..., tile_size: _Optional[int] = ...) -> None: ...

class DfmDlrm(_message.Message):
    __slots__ = ("num_table", "emb_dim", "row", "global_batch_size", "num_copy")
    NUM_TABLE_FIELD_NUMBER: _ClassVar[int]
    EMB_DIM_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    NUM_COPY_FIELD_NUMBER: _ClassVar[int]
    num_table: int
    emb_dim: int
    row: int
    global_batch_size: int
    num_copy: int
    def __init__(self, num_table: _Optional[int] = ..., emb_dim: _Optional[int] = ..., row: _Optional[int] = ..., global_batch_size: _Optional[int] = ..., num_copy: _Optional[int] = ...) -> None: ...

class DfmHpl(_message.Message):
    __slots__ = ("n", "b", "num_copy")
    N_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    NUM_COPY_FIELD_NUMBER: _ClassVar[int]
    n: int
    b: int
    num_copy: int
    def __init__(self, n: _Optional[int] = ..., b: _Optional[int] = ..., num_copy: _Optional[int] = ...) -> None: ...

class DfmFft(_message.Message):
    __slots__ = ("length", "num_copy")
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    NUM_COPY_FIELD_NUMBER: _ClassVar[int]
    length: int
    num_copy: int
    def __init__(self, length: _Optional[int] = ..., num_copy: _Optional[int] = ...) -> None: ...

class DfmFftLlm(_message.Message):
    __slots__ = ("hidden", "seq_len", "effective_stage")
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    SEQ_LEN_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_STAGE_FIELD_NUMBER: _ClassVar[int]
    hidden: int
    seq_len: int
    effective_stage: int
    def __init__(self, hidden: _Optional[int] = ..., seq_len: _Optional[int] = ..., effective_stage: _Optional[int] = ...) -> None: ...

class DfmMamba(_message.Message):
    __slots__ = ("hidden", "seq_len", "tile_size", "effective_stage")
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    SEQ_LEN_FIELD_NUMBER: _ClassVar[int]
    TILE_SIZE_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_STAGE_FIELD_NUMBER: _ClassVar[int]
    hidden: int
    seq_len: int
    tile_size: int
    effective_stage: int
    def __init__(self, hidden: _Optional[int] = ..., seq_len: _Optional[int] = ..., tile_size: _Optional[int] = ..., effective_stage: _Optional[int] = ...) -> None: ...

class Execution(_message.Message):
    __slots__ = ("execution_style", "num_config", "perfect_overlap", "compute_util", "word", "llm", "dlrm", "hpl", "fft", "gemm_fft_llm", "vector_fft_llm", "regular_fft_llm", "mamba", "separate_rs_ag_for_ar", "skip_inter_chip_optimization", "effective_stage", "pin_sharding", "pipeline_schedule", "serialize_network", "overlap", "cost_model", "tp_comm_overlap", "placement", "pin", "cuda_graph", "attention_kernel", "host_op_us")
    EXECUTION_STYLE_FIELD_NUMBER: _ClassVar[int]
    NUM_CONFIG_FIELD_NUMBER: _ClassVar[int]
    PERFECT_OVERLAP_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_UTIL_FIELD_NUMBER: _ClassVar[int]
    WORD_FIELD_NUMBER: _ClassVar[int]
    LLM_FIELD_NUMBER: _ClassVar[int]
    DLRM_FIELD_NUMBER: _ClassVar[int]
    HPL_FIELD_NUMBER: _ClassVar[int]
    FFT_FIELD_NUMBER: _ClassVar[int]
    GEMM_FFT_LLM_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FFT_LLM_FIELD_NUMBER: _ClassVar[int]
    REGULAR_FFT_LLM_FIELD_NUMBER: _ClassVar[int]
    MAMBA_FIELD_NUMBER: _ClassVar[int]
    SEPARATE_RS_AG_FOR_AR_FIELD_NUMBER: _ClassVar[int]
    SKIP_INTER_CHIP_OPTIMIZATION_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_STAGE_FIELD_NUMBER: _ClassVar[int]
    PIN_SHARDING_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    SERIALIZE_NETWORK_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    COST_MODEL_FIELD_NUMBER: _ClassVar[int]
    TP_COMM_OVERLAP_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    PIN_FIELD_NUMBER: _ClassVar[int]
    CUDA_GRAPH_FIELD_NUMBER: _ClassVar[int]
    ATTENTION_KERNEL_FIELD_NUMBER: _ClassVar[int]
    HOST_OP_US_FIELD_NUMBER: _ClassVar[int]
    execution_style: ExecutionStyle
    num_config: int
    perfect_overlap: bool
    compute_util: float
    word: float
    llm: Llm
    dlrm: DfmDlrm
    hpl: DfmHpl
    fft: DfmFft
    gemm_fft_llm: DfmFftLlm
    vector_fft_llm: DfmFftLlm
    regular_fft_llm: DfmFftLlm
    mamba: DfmMamba
    separate_rs_ag_for_ar: bool
    skip_inter_chip_optimization: bool
    effective_stage: int
    pin_sharding: bool
    pipeline_schedule: str
    serialize_network: bool
    overlap: OverlapMode
    cost_model: CostModel
    tp_comm_overlap: bool
    placement: str
    pin: _containers.RepeatedCompositeFieldContainer[KernelPin]
    cuda_graph: bool
    attention_kernel: str
    host_op_us: float
    def __init__(self, execution_style: _Optional[_Union[ExecutionStyle, str]] = ..., num_config: _Optional[int] = ..., perfect_overlap: _Optional[bool] = ..., compute_util: _Optional[float] = ..., word: _Optional[float] = ..., llm: _Optional[_Union[Llm, _Mapping]] = ..., dlrm: _Optional[_Union[DfmDlrm, _Mapping]] = ..., hpl: _Optional[_Union[DfmHpl, _Mapping]] = ..., fft: _Optional[_Union[DfmFft, _Mapping]] = ..., gemm_fft_llm: _Optional[_Union[DfmFftLlm, _Mapping]] = ..., vector_fft_llm: _Optional[_Union[DfmFftLlm, _Mapping]] = ..., regular_fft_llm: _Optional[_Union[DfmFftLlm, _Mapping]] = ..., mamba: _Optional[_Union[DfmMamba, _Mapping]] = ..., separate_rs_ag_for_ar: _Optional[bool] = ..., skip_inter_chip_optimization: _Optional[bool] = ..., effective_stage: _Optional[int] = ..., pin_sharding: _Optional[bool] = ..., pipeline_schedule: _Optional[str] = ..., serialize_network: _Optional[bool] = ..., overlap: _Optional[_Union[OverlapMode, str]] = ..., cost_model: _Optional[_Union[CostModel, str]] = ..., tp_comm_overlap: _Optional[bool] = ..., placement: _Optional[str] = ..., pin: _Optional[_Iterable[_Union[KernelPin, _Mapping]]] = ..., cuda_graph: _Optional[bool] = ..., attention_kernel: _Optional[str] = ..., host_op_us: _Optional[float] = ...) -> None: ...

class KernelPin(_message.Message):
    __slots__ = ("phase", "kernel", "config", "sharding", "tile")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    SHARDING_FIELD_NUMBER: _ClassVar[int]
    TILE_FIELD_NUMBER: _ClassVar[int]
    phase: str
    kernel: str
    config: int
    sharding: str
    tile: str
    def __init__(self, phase: _Optional[str] = ..., kernel: _Optional[str] = ..., config: _Optional[int] = ..., sharding: _Optional[str] = ..., tile: _Optional[str] = ...) -> None: ...

class Gurobi(_message.Message):
    __slots__ = ("thread", "gap", "time")
    THREAD_FIELD_NUMBER: _ClassVar[int]
    GAP_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    thread: int
    gap: float
    time: float
    def __init__(self, thread: _Optional[int] = ..., gap: _Optional[float] = ..., time: _Optional[float] = ...) -> None: ...

class Solver(_message.Message):
    __slots__ = ("time_limit_s", "gap", "threads", "name", "node_limit", "max_paths", "max_priced", "max_candidates", "tile_menu_size", "tile_refinements")
    TIME_LIMIT_S_FIELD_NUMBER: _ClassVar[int]
    GAP_FIELD_NUMBER: _ClassVar[int]
    THREADS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    MAX_PATHS_FIELD_NUMBER: _ClassVar[int]
    MAX_PRICED_FIELD_NUMBER: _ClassVar[int]
    MAX_CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    TILE_MENU_SIZE_FIELD_NUMBER: _ClassVar[int]
    TILE_REFINEMENTS_FIELD_NUMBER: _ClassVar[int]
    time_limit_s: float
    gap: float
    threads: int
    name: str
    node_limit: int
    max_paths: int
    max_priced: int
    max_candidates: int
    tile_menu_size: int
    tile_refinements: int
    def __init__(self, time_limit_s: _Optional[float] = ..., gap: _Optional[float] = ..., threads: _Optional[int] = ..., name: _Optional[str] = ..., node_limit: _Optional[int] = ..., max_paths: _Optional[int] = ..., max_priced: _Optional[int] = ..., max_candidates: _Optional[int] = ..., tile_menu_size: _Optional[int] = ..., tile_refinements: _Optional[int] = ...) -> None: ...

class ChipSpec(_message.Message):
    __slots__ = ("name", "vendor", "accelerator", "memory", "memory_levels", "scale_up_bw_GBps", "scale_out_bw_GBps", "scale_up_latency_us", "scale_out_latency_us", "scale_up_domain", "tdp_W", "price_usd", "aliases", "sources", "overlap")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VENDOR_FIELD_NUMBER: _ClassVar[int]
    ACCELERATOR_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LEVELS_FIELD_NUMBER: _ClassVar[int]
    SCALE_UP_BW_GBPS_FIELD_NUMBER: _ClassVar[int]
    SCALE_OUT_BW_GBPS_FIELD_NUMBER: _ClassVar[int]
    SCALE_UP_LATENCY_US_FIELD_NUMBER: _ClassVar[int]
    SCALE_OUT_LATENCY_US_FIELD_NUMBER: _ClassVar[int]
    SCALE_UP_DOMAIN_FIELD_NUMBER: _ClassVar[int]
    TDP_W_FIELD_NUMBER: _ClassVar[int]
    PRICE_USD_FIELD_NUMBER: _ClassVar[int]
    ALIASES_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    name: str
    vendor: str
    accelerator: Accelerator
    memory: Memory
    memory_levels: _containers.RepeatedCompositeFieldContainer[MemoryLevel]
    scale_up_bw_GBps: float
    scale_out_bw_GBps: float
    scale_up_latency_us: float
    scale_out_latency_us: float
    scale_up_domain: int
    tdp_W: float
    price_usd: float
    aliases: _containers.RepeatedScalarFieldContainer[str]
    sources: _containers.RepeatedScalarFieldContainer[str]
    overlap: OverlapMode
    def __init__(self, name: _Optional[str] = ..., vendor: _Optional[str] = ..., accelerator: _Optional[_Union[Accelerator, _Mapping]] = ..., memory: _Optional[_Union[Memory, _Mapping]] = ..., memory_levels: _Optional[_Iterable[_Union[MemoryLevel, _Mapping]]] = ..., scale_up_bw_GBps: _Optional[float] = ..., scale_out_bw_GBps: _Optional[float] = ..., scale_up_latency_us: _Optional[float] = ..., scale_out_latency_us: _Optional[float] = ..., scale_up_domain: _Optional[int] = ..., tdp_W: _Optional[float] = ..., price_usd: _Optional[float] = ..., aliases: _Optional[_Iterable[str]] = ..., sources: _Optional[_Iterable[str]] = ..., overlap: _Optional[_Union[OverlapMode, str]] = ...) -> None: ...

class SystemPreset(_message.Message):
    __slots__ = ("name", "chip", "num_chip", "topology", "description")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CHIP_FIELD_NUMBER: _ClassVar[int]
    NUM_CHIP_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    chip: str
    num_chip: int
    topology: _containers.RepeatedCompositeFieldContainer[TopologyLevel]
    description: str
    def __init__(self, name: _Optional[str] = ..., chip: _Optional[str] = ..., num_chip: _Optional[int] = ..., topology: _Optional[_Iterable[_Union[TopologyLevel, _Mapping]]] = ..., description: _Optional[str] = ...) -> None: ...

class Range(_message.Message):
    __slots__ = ("start", "stop", "step", "factor")
    START_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    FACTOR_FIELD_NUMBER: _ClassVar[int]
    start: float
    stop: float
    step: float
    factor: float
    def __init__(self, start: _Optional[float] = ..., stop: _Optional[float] = ..., step: _Optional[float] = ..., factor: _Optional[float] = ...) -> None: ...

class Axis(_message.Message):
    __slots__ = ("field", "values", "range", "name")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    RANGE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    field: str
    values: _containers.RepeatedScalarFieldContainer[str]
    range: Range
    name: str
    def __init__(self, field: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ..., range: _Optional[_Union[Range, _Mapping]] = ..., name: _Optional[str] = ...) -> None: ...

class Filter(_message.Message):
    __slots__ = ("metric", "max", "min")
    METRIC_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    metric: str
    max: float
    min: float
    def __init__(self, metric: _Optional[str] = ..., max: _Optional[float] = ..., min: _Optional[float] = ...) -> None: ...

class Sweep(_message.Message):
    __slots__ = ("base", "inline", "axis", "combine", "filter", "objective")
    BASE_FIELD_NUMBER: _ClassVar[int]
    INLINE_FIELD_NUMBER: _ClassVar[int]
    AXIS_FIELD_NUMBER: _ClassVar[int]
    COMBINE_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    OBJECTIVE_FIELD_NUMBER: _ClassVar[int]
    base: str
    inline: Setup
    axis: _containers.RepeatedCompositeFieldContainer[Axis]
    combine: Combine
    filter: _containers.RepeatedCompositeFieldContainer[Filter]
    objective: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, base: _Optional[str] = ..., inline: _Optional[_Union[Setup, _Mapping]] = ..., axis: _Optional[_Iterable[_Union[Axis, _Mapping]]] = ..., combine: _Optional[_Union[Combine, str]] = ..., filter: _Optional[_Iterable[_Union[Filter, _Mapping]]] = ..., objective: _Optional[_Iterable[str]] = ...) -> None: ...
