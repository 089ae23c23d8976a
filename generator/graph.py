"""The kernel graph: the contract between workload generators and the solver.

Kernels are described by their loops (einsum style): loop dimensions with sizes, and which
dimensions index each operand. One tiling model and one sharding model then serve every
kernel kind. Sizes are for one graph instance (e.g. one transformer layer, one micro-batch,
before any splitting across chips); the solver decides how each kernel is split.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any

from generator.kinds import Communication, KernelKind, OperandRole, Pass
from generator.order import canonical_order


@dataclass(frozen=True)
class Operand:
    """One tensor a kernel reads or writes. `dims` are loop-dimension names, outermost first."""

    name: str
    role: OperandRole
    dims: tuple[str, ...]
    bytes_per_element: float


@dataclass(frozen=True)
class DFModelExtra:
    """A DFModel kernel variant's fields that only DFModel's equations read
    (solver/dfmodel/lanes.py, problem.py)."""

    memory_size_bytes: float = 0.0  # explicit DRAM bytes DFModel charges to the kernel
    num_input: int = 0  # streamed inputs (0 = unset: DFModel counts 1)
    use_effective_stage: bool = False  # lane/stage: K over execution's effective_stage
    skip_weight: bool = False  # no weight buffer in SRAM
    sram_extra_bytes: float = 0.0  # DFModel's newer schema: SRAM the kernel adds
    dram_extra_bytes: float = 0.0  # ... and DRAM (per layer of a stage)


# the operands ops.linear adds to a GEMM for its bias: epilogue work, not the contraction
EPILOGUE_IN = "bias"
EPILOGUE_OUT = "dbias"


@dataclass(frozen=True)
class Kernel:
    name: str
    kind: KernelKind
    dims: tuple[tuple[str, int], ...]  # loop dims with sizes, in loop order
    operands: tuple[Operand, ...]
    flop: float  # FLOP for the whole kernel (one graph instance)
    pass_: Pass = Pass.FWD
    kernel_class: str = ""  # notebook class: Ma_Mw, Ma_Mqa, Va_Mw, KVCache, ...
    # Loop dims that may be split across chips; empty = any dim of size > 1.
    shardable_dims: tuple[str, ...] = ()
    communication: Communication = Communication.NONE
    communication_bytes: float = 0.0  # bytes of the implied collective (whole tensor)
    communication_group: str = ""  # the collective's group: "dp", "ep", "tp", "pp"
    # A second collective over the same group (DFModel's communication_type_2: HPL's
    # panel broadcast is followed by a point-to-point row swap).
    communication_2: Communication = Communication.NONE
    communication_2_bytes: float = 0.0
    # Sharding pinned by the input ("" = searched, "none" = replicated).
    pinned_sharding: str = ""
    # The TP group must split it when one of its dims can be split: an engine's linear
    # layers and attention are never replicated (MODEL_DIMS_SPLIT). Out of repr: structural
    # signatures (canonical order) hash the repr; a field there would reorder graphs' ties.
    must_split: bool = field(default=False, repr=False)
    pinned_config: int = -1
    pinned_tile: str = ""  # on-chip tile pinned by the input (schema.tiles; "" = searched)
    unit: str = ""  # the unit that runs it when the input says ("matrix", "vector"; "" = kind)
    # DFModel's `tiling` dim ("M", "K", "N"; "" = none) and `type` ("SYSTOLIC" or "SIMD"),
    # for --cost-model dfmodel only; not identity (the einsum form has no place for them).
    dfmodel_tiling: str = field(default="", compare=False)
    dfmodel_type: str = field(default="", compare=False)
    # The precision its matrix work runs in when it is not the workload's math precision
    # ("" = the workload's): the LM head stays 16-bit under FP8 recipes.
    math_precision: str = ""
    # an FP8 GEMM promoting its partial sums to FP32 (Transformer Engine's FP8 dgrad and
    # wgrad): the chip's fp8_split_accumulate_util plateau. Out of the repr, so structural
    # signatures (canonical order) of graphs without it stay; in equality (menu memo keys)
    split_accumulate: bool = field(default=False, repr=False)
    # the input its output overwrites (the FP32 loss, generator/ops_loss.py): memory only
    in_place: str = field(default="", repr=False, compare=False)
    # a sliding-window causal attention's window (tokens; 0 = none): each query attends to
    # the last this-many keys only (solver.cost.causal_attention prices the tiles that
    # covers). Out of the repr like split_accumulate; part of equality (the menu memo's key)
    attention_window: int = field(default=0, repr=False)
    # a decode attention kernel with one thread block per (sequence, KV head) over the whole
    # cache (KV_SHARED_UNSPLIT: kernel_times prices the SMs its blocks occupy). As above.
    unsplit_kv: bool = field(default=False, repr=False)
    # an MoE expert GEMM run as one grouped kernel whose waves span experts (MoeGemm
    # MOE_GEMM_GROUPED), not a GEMM per expert (solver.cost.menus). As above.
    fused_experts: bool = field(default=False, repr=False)
    # ... as torch._grouped_mm (MOE_GEMM_TORCH_GROUPED: menus.torch_grouped_streaming)
    torch_grouped: bool = field(default=False, repr=False)
    # Kernel launches it stands for in an eager framework (PyTorch's unfused MoE routing:
    # a sort, a count, a scan, each its own launch): that many kernel overheads. As above.
    launches: int = field(default=1, repr=False)
    # Ops per expert of a host loop right after a sync (MOE_GEMM_PER_EXPERT): at least
    # that many x the chip's experts x the host's time per op (kernel_times). As above.
    host_loop_ops: int = field(default=0, repr=False)
    # `launches` issued once per expert the chip runs (Transformer Engine's GroupedLinear
    # quantizes expert by expert: generator.moe_routing), not once for all. Its per-expert
    # GEMMs keep one overhead for the group (kernel_times.grouped_gemm_time: TE spreads
    # them over 4 streams, whose fill and drain overlap). As above.
    per_expert_launches: bool = field(default=False, repr=False)
    # an MoE dispatch or combine sending a token once per destination chip (DeepEP), not once
    # per routed expert: the model's experts and top-k (solver.cost.own_network.wire_share);
    # 0 = once per routed expert. As above.
    dedup_experts: int = field(default=0, repr=False)
    dedup_top_k: int = field(default=0, repr=False)
    # DFModel's other per-variant fields (memory_size, num_input, use_effective_stage,
    # skip_weight), read by --cost-model dfmodel only; same reasons as above.
    dfmodel_extra: DFModelExtra | None = field(default=None, compare=False)
    # the sharding the kernel order sees (order.unpinned_text): None = pinned_sharding (a
    # generator's own "none"); a user's pin (generator.pins, a graph's field) keeps the one
    # before it
    order_sharding: str | None = field(default=None, repr=False, compare=False)
    # the group of the second collective ("" = communication_group): HPL's row swap runs
    # down the process column, its panel broadcast along the row. Out of the repr, as above
    communication_2_group: str = field(default="", repr=False)
    # Elements converted between formats on the vector unit (one instance, to the chip's
    # share): a per-query-head decode attention dequantizing an 8-bit KV cache. As above.
    converted_elements: float = field(default=0.0, repr=False)
    # Cores (thread blocks) the kernel can occupy, 0 = all: one thread block's step (HPL's
    # pivot column) streams at that share of the DRAM bandwidth (menus.block_limited).
    thread_blocks: int = field(default=0, repr=False)
    # An eager framework's strided elementwise kernel (a transposed or sliced view): its
    # elements at the chip's strided_elementwise rate at best (kernel_times). As above.
    strided: bool = field(default=False, repr=False)
    # 16-bit elements a scatter-add sums by scalar atomics (whole kernel; MoePermute
    # SCATTER_ADD): at least these at the chip's atomic-add rate (kernel_times). As above.
    atomic_adds: float = field(default=0.0, repr=False)
    # The expected share of its `experts` that tokens are routed to (1 = all): the others
    # run nothing, read no weights (solver.cost.menus); storage keeps all. As above.
    expert_share: float = field(default=1.0, repr=False)

    def __hash__(self) -> int:
        """The dataclass's own hash (of the fields equality compares, in order), computed
        once per kernel: the solver's memos (solver.cost.memo) key tables by kernel, tens
        of thousands of lookups per sweep. Kept out of the pickled state: a string's hash
        differs between processes."""
        kept = self.__dict__.get("_hash")
        if kept is None:
            kept = hash(tuple(getattr(self, f) for f in _HASHED))
            object.__setattr__(self, "_hash", kept)
        return kept

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in _DERIVED}

    def renamed(self, name: str) -> Kernel:
        """This kernel under another name: cached derived values reused, the cached hash
        dropped (it covers the name); `dataclasses.replace` re-runs __init__."""
        copy = object.__new__(type(self))
        copy.__dict__.update({k: v for k, v in self.__dict__.items() if k != "_hash"}, name=name)
        return copy

    @property
    def dim_sizes(self) -> dict[str, int]:
        return dict(self.dims)

    @cached_property
    def _sizes(self) -> dict[str, int]:
        """`dim_sizes` built once, for reading here only (callers may write theirs)."""
        return dict(self.dims)

    def operand(self, name: str) -> Operand:
        for op in self.operands:
            if op.name == name:
                return op
        raise KeyError(f"kernel {self.name} has no operand {name}")

    @cached_property
    def inputs(self) -> tuple[Operand, ...]:
        return tuple(o for o in self.operands if o.role != OperandRole.OUTPUT)

    @cached_property
    def outputs(self) -> tuple[Operand, ...]:
        return tuple(o for o in self.operands if o.role == OperandRole.OUTPUT)

    @cached_property
    def matrix_operands(self) -> tuple[tuple[Operand, ...], tuple[Operand, ...]]:
        """(inputs, outputs) of the contraction itself: a linear layer's bias (an input
        over output dims only, added in the epilogue) and its gradient (an output over a
        subset of the weight gradient's dims, reduced in the same pass) left out, so a
        biased GEMM is priced as the GEMM it is (ops.linear)."""
        outs = self.outputs
        first = set(outs[0].dims) if outs else set()
        ins = tuple(o for o in self.inputs if not (o.name == EPILOGUE_IN and set(o.dims) <= first))
        gradient = outs[0] if outs else None  # the contraction's own output, always kept
        epilogue = [o for o in outs if o.name == EPILOGUE_OUT and set(o.dims) <= first]
        return ins, tuple(o for o in outs if o not in epilogue or o == gradient)

    @property
    def is_matrix(self) -> bool:
        """A two-input matrix kernel (A x B -> C, a bias riding on it): the GEMM the
        data-movement frontier tiles and the GEMM tables time."""
        ins, outs = self.matrix_operands
        gemm = self.kind in (KernelKind.GEMM, KernelKind.BATCHED_GEMM)
        return gemm and len(ins) == 2 and len(outs) == 1

    @property
    def reduction_dims(self) -> tuple[str, ...]:
        out = {d for o in self.outputs for d in o.dims}
        return tuple(d for d, _ in self.dims if d not in out)

    def operand_elements(self, op: Operand) -> int:
        sizes = self._sizes
        return math.prod(sizes[d] for d in op.dims)

    def operand_bytes(self, op: Operand) -> float:
        return self.operand_elements(op) * op.bytes_per_element

    def bytes_by_role(self, role: OperandRole) -> float:
        return sum(self.operand_bytes(o) for o in self.operands if o.role == role)

    @property
    def weight_bytes(self) -> float:
        return self.bytes_by_role(OperandRole.WEIGHT)

    @property
    def kv_bytes(self) -> float:
        return self.bytes_by_role(OperandRole.KV_CACHE)

    @property
    def activation_bytes(self) -> float:
        return self.bytes_by_role(OperandRole.INPUT) + self.bytes_by_role(OperandRole.OUTPUT)

    @property
    def weight_params(self) -> int:
        return sum(self.operand_elements(o) for o in self.operands if o.role == OperandRole.WEIGHT)


# the fields the dataclass would hash (hash=None follows compare), in declaration order
_HASHED = tuple(f.name for f in fields(Kernel) if (f.compare if f.hash is None else f.hash))
# what a kernel computes once and keeps (frozen: it cannot go stale), never pickled
_DERIVED = frozenset(("_hash", "_sizes", "inputs", "outputs"))


@dataclass(frozen=True)
class Edge:
    """A tensor from `src`'s output operand to `dst`'s input operand.

    `dim_map` maps the producer's output dims to the consumer operand's dims (same tensor,
    possibly other names). Empty: dims with equal names are the same tensor axis. Non-empty:
    it lists every shared axis (identities included); dims of the consumer operand missing
    from it are not shared (a layout split along them needs an all-to-all). The generators
    and the proto reader both derive it with `generator.builder.infer_dim_map`.

    Several edges may feed one operand: each is a part of it (a concatenation, e.g. the
    prefill and decode attention outputs of a chunked-prefill step), or a slice of the
    producer's output; `tensor_bytes` is then the part actually moved.
    """

    src: str
    dst: str
    dst_operand: str
    # "" = the producer's first output (further outputs, e.g. weight gradients, are sinks)
    src_operand: str = ""
    dim_map: tuple[tuple[str, str], ...] = ()
    tensor_bytes: float = 0.0  # whole tensor, one graph instance


@dataclass(frozen=True)
class KernelGraph:
    name: str
    kernels: tuple[Kernel, ...]
    edges: tuple[Edge, ...] = ()
    # Edges from one instance of a repeated graph to the next (a layer's output into the
    # next layer's first reader of its input; the input gradient into the previous layer's
    # first reader of its output gradient): no ordering or fusion, only the layout
    # conversion across the boundary, paid once per instance.
    boundary: tuple[Edge, ...] = ()

    def kernel(self, name: str) -> Kernel:
        return self._by_name[name]  # KeyError when absent

    @cached_property
    def _by_name(self) -> dict[str, Kernel]:
        """Name -> the first kernel of that name, built once: a lookup per kernel over a
        20,000-kernel graph is otherwise n^2."""
        by_name: dict[str, Kernel] = {}
        for k in self.kernels:
            by_name.setdefault(k.name, k)
        return by_name

    @property
    def flop(self) -> float:
        return sum(k.flop for k in self.kernels)

    def canonical_order(self) -> tuple[str, ...]:
        """A topological order that does not depend on how the input numbers or declares its
        kernels: ties go to the kernel whose structural signature (its own content and its
        neighbourhood's, names left out) sorts first, then to declaration order (only
        between kernels that look alike). A search restricted to one order then gives the
        same answer for every numbering of the same graph.

        Repeated layers joined by lone edges (generator.layers) run layer by layer: the
        kernels of a lower level first, each level's ready kernels sorted afresh when it
        starts, ties by signatures within the layer, so every copy comes out in the same
        order and the problem's order is periodic (solver.fusion.period).

        Computed once per graph object (`_canonical_order`): the graph is frozen, so its
        order cannot change, and a sweep's points share generated graphs."""
        return self._canonical_order

    @cached_property
    def _canonical_order(self) -> tuple[str, ...]:
        return canonical_order(self.kernels, self.edges, self.boundary)

    def topological_order(self, key: Callable[[str, int], Any] | None = None) -> tuple[str, ...]:
        """Kahn's algorithm, ties broken by `key(name, declaration index)` (default: the
        declaration order), deterministic."""
        index = {k.name: i for i, k in enumerate(self.kernels)}
        if key is not None:
            index = {name: key(name, i) for name, i in index.items()}
        indeg = {k.name: 0 for k in self.kernels}
        succ: dict[str, list[str]] = {k.name: [] for k in self.kernels}
        for e in self.edges:
            indeg[e.dst] += 1
            succ[e.src].append(e.dst)
        ready = sorted((n for n, d in indeg.items() if d == 0), key=index.__getitem__)
        order: list[str] = []
        while ready:
            n = ready.pop(0)
            order.append(n)
            for m in succ[n]:
                indeg[m] -= 1
                if indeg[m] == 0:
                    ready.append(m)
            ready.sort(key=index.__getitem__)
        if len(order) != len(self.kernels):
            raise ValueError(f"graph {self.name} has a cycle")
        return tuple(order)


@dataclass(frozen=True)
class Phase:
    """One graph and how many times it runs per step.

    Training: `layer` (fwd+bwd of one layer for one micro-batch) x num_layers, plus `head`
    (embeddings, LM head, loss). Inference: `prefill`/`decode` layer graphs; a whole request
    has one prefill phase and `count` decode steps (each decode phase is one step at a
    representative context length).
    """

    name: str
    graph: KernelGraph
    count: int = 1  # graph instances per step / per phase (e.g. layers)
    steps: int = 1  # sequential repetitions of the phase (decode steps)
    # Pipeline placement: "layer" graphs are split across pipeline stages; "head" graphs
    # run on the first/last stage.
    role: str = "layer"
    # The phase this one runs beside on other units or chips ("" = none): HPL's look-ahead
    # factors the next panel while the trailing update runs. The step charges such a group
    # max(the phase's time, the sum of the phases beside it) (assemble.graph_times).
    overlaps: str = ""


@dataclass(frozen=True)
class ModelInfo:
    """Model bookkeeping. Parameter counts are WEIGHT operand elements of the FWD kernels
    (backward and recompute kernels re-read the same weights)."""

    name: str
    num_params: int
    num_active_params: int
    num_layers: int
    hidden_size: int
    num_heads: int = 0
    num_kv_heads: int = 0
    head_dim: int = 0
    vocab_size: int = 0
    num_experts: int = 0
    experts_per_token: int = 0
    # KV-cache bytes per token per layer (MLA: compressed latent + rope key).
    kv_bytes_per_token_per_layer: float = 0.0
    # Per-layer parameter count of the repeated block (for pipeline memory), and the rest.
    params_per_layer: int = 0
    params_outside_layers: int = 0
    architecture: str = ""  # llama, mixtral, qwen2, gemma2, gpt2, deepseek_v2, ...
    attention: str = ""  # mha, gqa, mqa, mla
    # of num_params, the routed experts' weights (an EP rank stores experts / EP of them)
    num_expert_params: int = 0


TRAINING_KNOBS = ("micro_batch", "recompute", "zero_stage", "virtual_pipeline")


@dataclass(frozen=True)
class Workload:
    """What a generator returns: graphs with counts, and the workload's bookkeeping."""

    kind: str  # "training", "inference", "graph", "dlrm", "hpl", "fft", "gemm"
    phases: tuple[Phase, ...]
    model: ModelInfo | None = None
    # Training
    global_batch: int = 1
    micro_batch: int = 1
    seq_len: int = 0
    recompute: str = "none"
    sequence_parallel: bool = False
    zero_stage: int = 0
    virtual_pipeline: int = 1
    # the embedding and the loss take a layer's place each in the pipeline split
    # (LlmTraining.edges_in_pipeline_split)
    edges_in_pipeline_split: bool = False
    context_parallel: int = 1  # CP ranks sharing each sequence (graphs hold one rank's part)
    # EP ranks splitting the experts beyond the TP chips: TP groups in one EP group (graphs
    # hold one TP group's experts, experts / this many; generator.llm_training)
    expert_parallel: int = 1
    # 1: each chip holds whole experts, the EP group folds over the TP chips (Megatron-core
    # expert_tensor_parallel 1; the graphs pin the experts split over TP); 0: the experts'
    # FFN splits over the TP group (expert_tensor_parallel = TP)
    expert_tensor_parallel: int = 0
    # the setup's EP degree, Megatron's (the chips of one EP group; 0 = searched)
    expert_parallel_group: int = 0
    # "alltoall" (NCCL all-to-all) or "deepep" (LlmTraining.moe_dispatcher)
    moe_dispatcher: str = "alltoall"
    # FP8 training gathers its FP8 GEMM weights in FP8 (LlmTraining.fp8_param_gather)
    fp8_param_gather: bool = False
    # the DP gradient reduction runs on FP32 buffers (LlmTraining.grad_reduce_fp32)
    grad_reduce_fp32: bool = False
    # DP collectives run beside the compute (LlmTraining.dp_overlap): "all", "grad_reduce"
    # (the ZeRO parameter all-gather after the step) or "none"
    dp_overlap: str = "all"
    weight_bytes_per_param: float = 2.0
    optimizer_bytes_per_param: float = 14.0  # gradients + optimizer state beyond weights
    # step-end bytes per updated parameter beyond the fused update's (LlmTraining.
    # master_grad_cast: the gradients cast to FP32 by a kernel of their own)
    grad_cast_bytes_per_param: float = 0.0
    # Graph instances per micro-batch (a DFModel LLM graph is one sequence: a micro-batch
    # of n sequences runs it n times); 1 for graphs that hold the whole micro-batch.
    instances_per_micro_batch: int = 1
    # Training graphs that wire every forward tensor their backward reads to its reader (the
    # LLM generator's autograd): the kept activations are those tensors
    # (solver.search.assemble); otherwise (a DFModel or proto graph) every forward output
    backward_reads_wired: bool = False
    # A training-shaped workload with no backward pass (a DFModel forward-only LLM graph):
    # no gradient reduction and no optimizer step.
    forward_only: bool = False
    activation_bytes_per_element: float = 2.0
    # Inference
    phase: str = ""  # "prefill", "decode", "chunked_prefill", "request"
    batch: int = 1
    replicas: int = 1  # model replicas (DP); graphs and KV cache: one replica's batch share
    input_len: int = 0
    output_len: int = 0
    kv_cache_bytes: float = 0.0  # whole batch at the longest context
    # Data held for the whole run and updated in place, split over every chip (HPL's
    # N x (N+1) matrix), and the largest buffer each chip holds besides (HPL's panel)
    resident_bytes: float = 0.0
    workspace_bytes: float = 0.0
    # HPL's P x Q process grid ((0, 0) = none): its graphs hold one process's share, and the
    # grid's row and column groups ("hpl_row", "hpl_col") are placed on the topology
    process_grid: tuple[int, int] = (0, 0)
    # FLOP per step by the workload's own count when the graphs hold one process's share
    # of work some processes repeat (HPL: 2/3 N^3 + 3/2 N^2 - N/6); 0 = the graphs' sum
    useful_flop: float = 0.0
    # Work per step independent of the mapping, for utilisation reports.
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Precision the matrix units run at (Precision.math, else the activation type).
    compute_dtype: str = "BF16"
    kv_bytes_per_element: float = 2.0
    # Inference: tokens of the chunked-prefill step's prefill chunk, decode sequences in it,
    # and the KV length the decode tokens attend to.
    chunk_size: int = 0
    decode_batch: int = 0
    context_len: int = 0
    # Inference: the serving runtime's host time per generate call (request_overhead_us)
    request_overhead_s: float = 0.0
    # Knobs the setup left unset, chosen by the solver's outer search: TRAINING_KNOBS,
    # "expert_parallel" (training) or "replicas" (inference).
    searched: tuple[str, ...] = ()
    # When a knob that changes the graphs is searched: one workload per value, each with
    # every graph built (this workload is the first of them); else empty.
    variants: tuple[Workload, ...] = ()

    @property
    def flop_per_step(self) -> float:
        if self.useful_flop > 0:
            return self.useful_flop
        return sum(p.graph.flop * p.count * p.steps for p in self.phases)

    @property
    def label(self) -> str:
        """What the workload is, for a reader: its kind, except that a training-shaped graph
        with no backward pass (a DFModel forward-only LLM graph) is a forward pass, and at
        one token per sequence a decode step (DFModel's serving graphs), not training."""
        if self.kind == "training" and self.forward_only:
            return "decode step" if self.seq_len == 1 else "forward pass"
        return self.kind
