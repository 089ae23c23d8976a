"""Semantic validation of a parsed Setup: every problem at once, each with its field path.

Protobuf only checks syntax and types. This pass finds the rest before any hardware is
resolved or any graph is generated, so a user fixes every mistake in one round instead of
one per run. Each problem is one line:
`{file}: {field path} {what is wrong}, got {value}; {what is valid}`.
Checks that need the hardware library or the model generator (unknown chips, degree
products, graph cycles, model types) live in `hardware.resolve` and `generator.build`.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from schema import setup_pb2
from schema.dfmodel import sram_unbounded
from schema.errors import SetupError
from schema.problems import BOTH, NONE, NOTHING, Problems, Said
from schema.validation_graph import check_graph
from schema.validation_model import check_model_spec
from schema.validation_pins import check_pins
from schema.validation_stream import check_prefill_sequences, check_stream

MAX_CHIPS = 1 << 20  # a million chips: beyond every built or planned system
MAX_THREADS = 256  # HiGHS aborts the process on absurd thread counts
# solver work budgets (proto/setup.proto Solver) and what 0 means for each
WORK_BUDGETS = {
    "node_limit": "10000 nodes per MILP",
    "max_paths": "200 segmentations",
    "max_priced": "500 segment prices",
    "max_candidates": "every candidate",
    "tile_menu_size": "10 tiles per long frontier",
    "tile_refinements": "8 rounds",
}
MAX_BUDGET = 2**31 - 1
TINY = 1e-12  # below any physical rate, size, price or fraction in the fields' units
HUGE = 1e30  # beyond any physical size, rate or price: a typo in an exponent or unit
PARALLELISMS = ("TP", "PP", "DP", "EP", "CP")
WORDS = (0.5, 1.0, 2.0, 4.0, 8.0)  # bytes per element
PIPELINE_SCHEDULES = ("", "1F1B", "GPIPE")
SOURCES = "give exactly one workload source: dataflow_graph, workload, or execution.llm"
LIBRARY = "or name a library chip with system.chip (see `mapshard hardware list`)"
# Integer fields whose negative values mean something (Kernel.config: -1 = searched).
_LOWEST = {("Kernel", "config"): -1}
_FLOATS = (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)
_INTS = (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT64)


def validate_setup(
    setup: setup_pb2.Setup,
    path: Path,
    solver_names: Callable[[], Sequence[str]] = lambda: ("highs",),
) -> None:
    """Raise SetupError listing every semantic problem of `setup` (read from `path`).
    `solver_names`: the MILP solvers that can run here (asked only when the setup names one
    other than HiGHS; the schema knows no solver)."""
    p = Problems(path)
    negatives = _check_numbers(setup, "", p)  # NaN, inf, huge, undefined enum numbers
    _check_sources(setup, p)
    if setup.HasField("system"):
        _check_system(setup.system, p, sram_unbounded(setup))
    else:
        p.add("system", "is missing", NOTHING, f"add system {{ chip num_chip ... }} {LIBRARY}")
    if setup.HasField("dataflow_graph"):
        check_graph(setup.dataflow_graph, setup.execution.num_config, p)
    if setup.HasField("workload"):
        _check_workload(setup.workload, p)
    _check_execution(setup.execution, p)
    check_pins(setup, p)
    _check_solver(setup, solver_names, p)
    for field, value, valid in negatives:  # generic, so after the more specific messages
        p.add(field, "is negative", value, valid)
    if p.problems:
        raise SetupError(p.problems)


def _check_numbers(msg: Message, prefix: str, p: Problems) -> list[tuple[str, object, str]]:
    """Report NaN, inf, > 1e30, nonzero < 1e-12 and undefined enum numbers anywhere in the
    tree; return the negative numbers as (field path, value, what is valid) to report after
    the specific checks, which say more about a field than "is negative"."""
    negatives: list[tuple[str, object, str]] = []
    for field, value in msg.ListFields():
        name = f"{prefix}.{field.name}" if prefix else field.name
        items = enumerate(value) if field.is_repeated else [(None, value)]
        for i, item in items:
            fpath = name if i is None else f"{name}[{i}]"
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                negatives += _check_numbers(item, fpath, p)
            elif field.type in _FLOATS:
                if math.isnan(item) or math.isinf(item):
                    p.add(fpath, "is not a finite number", item, "give a finite number")
                elif abs(item) > HUGE:
                    valid = f"give a value below {HUGE:g} (check the exponent and the unit)"
                    p.add(fpath, "is absurdly large", item, valid)
                elif 0 < abs(item) < TINY:
                    valid = f"give 0 or a value above {TINY:g} (check the exponent and the unit)"
                    p.add(fpath, "is absurdly small", item, valid)
                elif item < 0:
                    negatives.append((fpath, item, "give a value >= 0"))
            elif field.type in _INTS:
                low = _LOWEST.get((msg.DESCRIPTOR.name, field.name), 0)
                if item < low:
                    negatives.append((fpath, item, f"give a value >= {low}"))
            elif field.type == FieldDescriptor.TYPE_ENUM:
                enum = field.enum_type
                if item not in enum.values_by_number:
                    valid = "valid: " + ", ".join(v.name for v in enum.values)
                    p.add(fpath, f"is not a defined {enum.name} value", item, valid)
    return negatives


def _check_sources(setup: setup_pb2.Setup, p: Problems) -> None:
    """Exactly one of dataflow_graph, workload, execution.llm (a DFModel graph may carry
    execution.llm beside it as its batch description)."""
    graph = setup.HasField("dataflow_graph")
    workload = setup.HasField("workload")
    llm = setup.execution.HasField("llm")
    if graph and workload:
        p.add("workload", "is given together with dataflow_graph", BOTH, SOURCES)
    elif workload and llm:
        p.add("execution.llm", "is given together with workload", BOTH, SOURCES)
    elif not (graph or workload or llm):
        p.add("workload", "is missing", NOTHING, SOURCES)


# --------------------------------------------------------------------------------------
# System
# --------------------------------------------------------------------------------------


def _check_system(s: setup_pb2.System, p: Problems, sram_optional: bool = False) -> None:
    """Sizes the hardware library cannot fill in, fractions, parallelism assignments.
    `sram_optional`: DFModel's equations read an unset sram_cap as no limit."""
    library = bool(s.chip or s.preset)
    if s.num_chip < 0:
        p.add("system.num_chip", "is negative", s.num_chip, "give the number of chips (>= 1)")
    elif s.HasField("num_chip") and s.num_chip == 0:
        valid = "give the number of chips, or leave it out to take the preset's"
        p.add("system.num_chip", "must be >= 1", 0, valid)
    elif s.num_chip > MAX_CHIPS:
        p.add("system.num_chip", "is beyond any system", s.num_chip, f"give at most {MAX_CHIPS}")
    if s.chip_table and not s.chip:
        valid = "name the chip to look up in the table with system.chip"
        p.add("system.chip_table", "is given without system.chip", s.chip_table, valid)
    elif s.chip_table and not (p.path.parent / s.chip_table).is_file():
        valid = f"give a .csv or .xlsx path relative to {p.path.name}"
        p.add("system.chip_table", "names no file", s.chip_table, valid)
    if not library:
        _check_custom_chip(s, p, sram_optional)
    eff = s.accelerator.efficiency
    for name in ("gemm_util", "dram_util", "attention_util", "vector_util"):
        p.fraction(f"system.accelerator.efficiency.{name}", getattr(eff, name), False, True)
    for i, coll in enumerate(eff.collective):
        field = f"system.accelerator.efficiency.collective[{i}].bus_bw_util"
        p.fraction(field, coll.bus_bw_util, False, True)
    for i, level in enumerate(s.memory_levels):
        p.positive(level, f"system.memory_levels[{i}]", "bandwidth_GBps capacity_bytes")
    _check_kernel_source(s, p)
    _check_topology(s, library, p)


# system.kernel_source: "none" | "roofline" | a framework, optionally "-<version>" (which
# versions a chip has is hardware.resolve's check: it needs the installed database)
KERNEL_SOURCE = re.compile(r"(none|roofline|(trtllm|vllm|sglang)(-[0-9][0-9A-Za-z.+]*)?)")


def _check_kernel_source(s: setup_pb2.System, p: Problems) -> None:
    if s.kernel_source and not KERNEL_SOURCE.fullmatch(s.kernel_source):
        valid = (
            'give "none" or "roofline" (the calibrated model), or a framework of the measured '
            'kernel database (trtllm, vllm, sglang), optionally with "-<version>", e.g. '
            '"trtllm-1.3.0rc20"'
        )
        p.add("system.kernel_source", "is not a kernel-time source", s.kernel_source, valid)


def _check_custom_chip(s: setup_pb2.System, p: Problems, sram_optional: bool = False) -> None:
    """Without system.chip or system.preset the setup must describe the chip itself."""
    if not s.HasField("accelerator"):
        valid = f"describe the chip: accelerator {{ core systolic_width ... freq }} {LIBRARY}"
        p.add("system.accelerator", "is missing", NOTHING, valid)
    else:
        acc = s.accelerator
        if not (sram_optional and acc.sram_cap == 0):
            p.positive(acc, "system.accelerator", "sram_cap")
        precisions = "fp64 fp32 tf32 bf16 fp16 fp8 int8 int4".split()
        if not any(getattr(acc, f"{t}_tflops") > 0 for t in precisions):
            why = " (or give a peak such as bf16_tflops)"
            names = "core systolic_width systolic_height freq"
            p.positive(acc, "system.accelerator", names, why)
    if not s.HasField("memory"):
        valid = f"give memory {{ dram_bw dram_cap }} {LIBRARY}"
        p.add("system.memory", "is missing", NOTHING, valid)
    else:
        p.positive(s.memory, "system.memory", "dram_bw")  # dram_cap 0 = unbounded


def _topology_levels(s: setup_pb2.System) -> list[tuple[int, str, float, list[tuple[str, str]]]]:
    """Every level, DFModel variant or not: (degree, bandwidth path, bandwidth,
    [(parallelism path, parallelism)]). A DFModel par_x may name several: "TP+EP"."""
    levels = []
    for i, lv in enumerate(s.topology):
        lp = f"system.topology[{i}]"
        pars = [(f"{lp}.parallelism[{j}]", v) for j, v in enumerate(lv.parallelism)]
        levels.append((lv.degree, f"{lp}.link_bw_GBps", lv.link_bw_GBps, pars))
    variant = s.WhichOneof("topology_variant")
    if variant:
        v = getattr(s, variant)
        vp = f"system.{variant}"
        for axis in [a for a in "xyz" if a in v.DESCRIPTOR.fields_by_name]:
            par = getattr(v, f"par_{axis}")
            pars = [(f"{vp}.par_{axis}", n) for n in re.split(r"[\s,+/]+", par) if n]
            bw = getattr(v, f"link_bw_{axis}")
            levels.append((getattr(v, axis), f"{vp}.link_bw_{axis}", bw, pars))
    return levels


def _check_topology(s: setup_pb2.System, library: bool, p: Problems) -> None:
    """One interconnect description; complete levels; each parallelism on one level."""
    variant = s.WhichOneof("topology_variant")
    if variant and len(s.topology):
        valid = "describe the interconnect once: topology levels or one DFModel variant"
        p.add(f"system.{variant}", "is given together with system.topology", variant, valid)
    for i, lv in enumerate(s.topology):
        lp = f"system.topology[{i}]"
        if lv.kind == setup_pb2.TOPOLOGY_UNSET and not s.preset:
            valid = "give RING, SWITCH, FULLY_CONNECTED or TORUS"
            p.add(f"{lp}.kind", "is missing", Said("TOPOLOGY_UNSET"), valid)
        if len(lv.torus_dims) and lv.kind != setup_pb2.TORUS:
            kind = setup_pb2.TopologyKind.DESCRIPTOR.values_by_number.get(lv.kind)
            got = kind.name if kind else lv.kind
            valid = "set kind: TORUS or drop torus_dims"
            p.add(f"{lp}.torus_dims", "is given for a level that is not a TORUS", got, valid)
        for j, dim in enumerate(lv.torus_dims):
            if dim < 1:
                p.add(f"{lp}.torus_dims[{j}]", "must be >= 1", dim, "give ring sizes >= 1")
        if len(lv.torus_dims) and lv.degree > 0 and math.prod(lv.torus_dims) != lv.degree:
            dims = " x ".join(map(str, lv.torus_dims))
            valid = f"give ring sizes whose product is the degree {lv.degree}"
            p.add(f"{lp}.torus_dims", "do not multiply to the level's degree", dims, valid)
    # a parallelism on several system.topology levels spans them (hardware.topology); once
    # per level, and one level per parallelism in a DFModel variant
    owner: dict[str, tuple[str, int]] = {}
    for i, (degree, bw_path, bw, pars) in enumerate(_topology_levels(s)):
        if not library and bw == 0 and degree != 1:
            p.add(bw_path, "is missing", 0, f"give the link bandwidth in GB/s (> 0) {LIBRARY}")
        native = bw_path.startswith("system.topology[")
        for par_path, raw in pars:  # any case, as hardware.resolve reads them
            par = raw.strip().upper()
            if par not in PARALLELISMS:
                close = difflib.get_close_matches(par, PARALLELISMS, n=1, cutoff=0.5)
                hint = f'did you mean "{close[0]}"? ' if close else ""
                valid = f"{hint}valid: {', '.join(PARALLELISMS)}"
                p.add(par_path, "is not a parallelism", raw, valid)
            elif par in owner and (owner[par][1] == i or not native):
                valid = f"{par} is already on {owner[par][0]}; each parallelism goes on one level"
                p.add(par_path, f"assigns {par} a second time", par, valid)
            else:
                owner.setdefault(par, (par_path, i))


# --------------------------------------------------------------------------------------
# Explicit dataflow graph
# --------------------------------------------------------------------------------------


def _check_workload(w: setup_pb2.Workload, p: Problems) -> None:
    kind = w.WhichOneof("kind")
    if kind is None:
        names = ", ".join(f.name for f in w.DESCRIPTOR.oneofs_by_name["kind"].fields)
        p.add("workload", "names no workload kind", NONE, f"give one of {names}")
        return
    wp = f"workload.{kind}"
    v = getattr(w, kind)
    if kind == "llm_training":
        _check_model(v, wp, p)
        p.positive(v, wp, "global_batch seq_len")
        _batches(v.global_batch, v.micro_batch, f"{wp}.global_batch", "micro_batch", p)
        if not 0 <= v.zero_stage <= 3:
            p.add(f"{wp}.zero_stage", "is not a ZeRO stage", v.zero_stage, "give 0, 1, 2 or 3")
        pinned_ddp = v.HasField("zero_stage") and v.zero_stage == 0
        if v.dp_overlap == setup_pb2.DP_OVERLAP_GRAD_REDUCE and pinned_ddp:
            p.add(
                f"{wp}.dp_overlap",
                "leaves a ZeRO parameter all-gather exposed, which zero_stage 0 has not",
                "DP_OVERLAP_GRAD_REDUCE",
                "give DP_OVERLAP_ALL or DP_OVERLAP_NONE, or a zero_stage of 1-3",
            )
    elif kind == "llm_inference":
        _check_model(v, wp, p)
        _check_inference(v, wp, p)
    elif kind == "dlrm":
        names = "mlp_dim bottom_num_mlp top_num_mlp pooled_row row num_table emb_dim"
        p.positive(v, wp, f"{names} micro_batch_size")
    elif kind == "hpl":
        p.positive(v, wp, "N B")
        if 0 < v.N < v.B:
            p.add(f"{wp}.N", f"is smaller than the block size B ({v.B})", v.N, "give N >= B")
    elif kind == "fft":
        if v.length < 2:  # any length >= 2: the generator factors it into mixed-radix passes
            p.add(f"{wp}.length", "must be >= 2", v.length, "give the points per transform")
    elif kind == "attention":
        _check_attention(v, wp, p)
    else:
        p.positive(v, wp, "M K N")


def _check_attention(v: setup_pb2.Attention, wp: str, p: Problems) -> None:
    p.positive(v, wp, "batch heads head_dim q_len")
    if v.kv_heads < 0 or (v.heads > 0 and v.kv_heads > 0 and v.heads % v.kv_heads):
        p.add(f"{wp}.kv_heads", f"does not divide heads ({v.heads})", v.kv_heads,
              "give a divisor of heads (0 = heads)")  # fmt: skip
    if v.kv_len < 0 or 0 < v.kv_len < v.q_len:
        p.add(f"{wp}.kv_len", f"is shorter than q_len ({v.q_len})", v.kv_len,
              "give kv_len >= q_len (0 = q_len)")  # fmt: skip
    if v.backward and v.kv_len > v.q_len:
        p.add(f"{wp}.backward", f"needs kv_len = q_len (a training step's attention), kv_len "
              f"is {v.kv_len}", True, "drop kv_len or backward")  # fmt: skip


def _batches(global_b: int, micro_b: int, gpath: str, micro: str, p: Problems) -> None:
    """The global batch is a whole number of micro-batches (micro 0 = searched)."""
    if global_b < 1 or micro_b < 1 or global_b % micro_b == 0:
        return
    wrong = "is smaller than" if global_b < micro_b else "is not divisible by"
    p.add(gpath, f"{wrong} {micro} ({micro_b})", global_b, f"give a multiple of {micro_b}")


def _check_inference(v: setup_pb2.LlmInference, wp: str, p: Problems) -> None:
    """Each phase needs its own lengths (batch 0 means 1); a stream has its own."""
    if v.HasField("stream"):
        pass
    elif v.phase == setup_pb2.REQUEST:
        p.positive(v, wp, "input_len output_len", " for phase REQUEST")
    elif v.phase == setup_pb2.PREFILL:
        p.positive(v, wp, "input_len", " for phase PREFILL")
    elif v.phase == setup_pb2.DECODE and v.input_len < 1:
        p.positive(v, wp, "context_len", " for phase DECODE (or give input_len)")
    elif v.phase == setup_pb2.CHUNKED_PREFILL:
        p.positive(v, wp, "chunk_size", " for phase CHUNKED_PREFILL")
    if v.HasField("serving"):
        _check_serving(v.serving, f"{wp}.serving", p)
        if v.phase == setup_pb2.CHUNKED_PREFILL:
            # one engine step: no tokens/s to maximise, no TPOT to bound (found by fuzzing)
            p.add(
                f"{wp}.serving",
                "is a view of requests; a CHUNKED_PREFILL step has no tokens/s or TPOT",
                "CHUNKED_PREFILL",
                "give phase REQUEST, PREFILL or DECODE, or a stream { } for chunked prefill",
            )
    check_prefill_sequences(v, wp, p)
    if v.HasField("stream"):
        check_stream(v, wp, p)


def _check_serving(v: setup_pb2.Serving, sp: str, p: Problems) -> None:
    """Batch sizes and lengths are positive; limits are milliseconds >= 0 (0 = none)."""
    for name in ("batch", "input_len"):
        for i, value in enumerate(getattr(v, name)):
            if value < 1:
                p.add(f"{sp}.{name}[{i}]", "must be >= 1", value, "give a positive size")
    for name in ("max_ttft_ms", "max_tpot_ms"):
        value = getattr(v, name)
        if not (math.isfinite(value) and value >= 0):
            p.add(f"{sp}.{name}", "must be >= 0 (0 = no limit)", value, "give milliseconds")


def _check_model(v: setup_pb2.LlmTraining | setup_pb2.LlmInference, wp: str, p: Problems) -> None:
    source = v.model.WhichOneof("source") if v.HasField("model") else None
    if source is None:
        valid = 'give model { hf_model: "config.json" } or model { inline { ... } }'
        p.add(f"{wp}.model", "is missing", NOTHING, valid)
    elif source == "hf_model":
        _check_hf_model(v.model.hf_model, f"{wp}.model.hf_model", p)
    else:
        check_model_spec(v.model.inline, f"{wp}.model.inline", p)


def _check_hf_model(ref: str, field: str, p: Problems) -> None:
    """An empty reference, or a local path that does not exist. A hub id is left to the
    generator (cache first); a path must not reach the hub, whose retries take ~20 s."""
    valid = f"give a config.json path relative to {p.path.name}, a model folder or a hub id"
    if not ref.strip():
        p.add(field, "is empty", ref, valid)
    elif ref.endswith(".json") or ref.startswith(("/", "./", "../", "~")):
        if not (p.path.parent / Path(ref).expanduser()).exists():
            p.add(field, "names a local path that does not exist", ref, valid)


# --------------------------------------------------------------------------------------
# Execution and solver options
# --------------------------------------------------------------------------------------


def _check_execution(e: setup_pb2.Execution, p: Problems) -> None:
    if e.num_config < 0:
        valid = "give the most configurations (0 = one per kernel)"
        p.add("execution.num_config", "is negative", e.num_config, valid)
    p.fraction("execution.compute_util", e.compute_util, low_closed=False, zero_unset=True)
    if e.word != 0 and e.word not in WORDS:
        valid = "give bytes per element: 0.5, 1, 2, 4 or 8"
        p.add("execution.word", "is not a word size", e.word, valid)
    if e.pipeline_schedule.upper() not in PIPELINE_SCHEDULES:
        valid = "give 1F1B or GPIPE (empty = 1F1B)"
        p.add("execution.pipeline_schedule", "is not a schedule", e.pipeline_schedule, valid)
    if e.HasField("llm"):
        llm = e.llm
        names = "hidden_dim head_dim num_head seq_len num_layer"
        p.positive(llm, "execution.llm", f"{names} global_batch_size micro_batch_size")
        gpath = "execution.llm.global_batch_size"
        _batches(llm.global_batch_size, llm.micro_batch_size, gpath, "micro_batch_size", p)
        if 0 < llm.num_layer < llm.num_layer_in_graph:
            wrong = f"exceeds num_layer ({llm.num_layer})"
            valid = f"give 1..{llm.num_layer}"
            p.add("execution.llm.num_layer_in_graph", wrong, llm.num_layer_in_graph, valid)


def _check_solver(
    setup: setup_pb2.Setup, solver_names: Callable[[], Sequence[str]], p: Problems
) -> None:
    s, g = setup.solver, setup.gurobi
    for field, value in (("solver.time_limit_s", s.time_limit_s), ("gurobi.time", g.time)):
        if value < 0:
            p.add(field, "is negative", value, "give seconds (0 = no limit)")
    for field, value in (("solver.threads", s.threads), ("gurobi.thread", g.thread)):
        if value < 0:
            p.add(field, "is negative", value, "give a thread count (0 = default)")
    if s.threads > MAX_THREADS:
        valid = f"give at most {MAX_THREADS} (HiGHS aborts on more)"
        p.add("solver.threads", "is too many", s.threads, valid)
    for name, default in WORK_BUDGETS.items():
        value = getattr(s, name)
        if value < 0:
            p.add(f"solver.{name}", "is negative", value, f"give a count (0 = {default})")
        elif value > MAX_BUDGET:
            valid = f"give at most {MAX_BUDGET} (HiGHS counts in 32 bits)"
            p.add(f"solver.{name}", "is too large", value, valid)
    p.fraction("solver.gap", s.gap, low_closed=True, zero_unset=False)
    if s.name and s.name != "highs":
        names = list(solver_names())
        if s.name not in names:
            valid = f"give one Pyomo can run here: {', '.join(names) or 'highs'}"
            p.add("solver.name", "is not an available MILP solver", s.name, valid)
    p.fraction("gurobi.gap", g.gap, low_closed=True, zero_unset=False)
