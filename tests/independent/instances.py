"""Small random mapping problems, described in plain data and written as setup text.

Shares no code with the product: the instance is this module's own dataclasses, and the
product only ever sees it as protobuf text (`setup_text`), read through its public entry
point. Every kernel is an einsum kernel whose loop dims carry names unique to it (so a
tensor's axes match the consumer operand's axes by position, which is how the product's
dim map reads them when names differ and sizes agree).

Shapes: every produced tensor is T x H (tokens x width, per instance). A root GEMM reads a
graph input T x K0 and a weight K0 x H; an inner GEMM takes the fed tensor as its left
operand (x weight H x H) or as its right operand (weight T x T x fed T x H); a two-input
kernel is an elementwise add, or a GEMM of two fed tensors when T == H.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

SHAPES = ("chain", "fork", "join", "diamond", "dag")


@dataclass(frozen=True)
class Tensor:
    name: str
    role: str  # "in" (an input, fed by an edge or read from DRAM), "weight", "out"
    axes: tuple[str, ...]  # loop dims indexing it, outermost first
    bytes_per_element: float


@dataclass(frozen=True)
class Op:
    name: str
    kind: str  # "gemm" (C[m,n] = A[m,k] B[k,n]) or "eltwise" (streamed row by row)
    dims: tuple[tuple[str, int], ...]  # loop dims in order (m, k, n) or (m, n)
    tensors: tuple[Tensor, ...]  # inputs in order, then the output
    backward: bool = False  # a backward-pass kernel: forward outputs it reads are saved

    @property
    def size(self) -> dict[str, int]:
        return dict(self.dims)

    @property
    def out(self) -> Tensor:
        return self.tensors[-1]

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return self.tensors[:-1]

    def tensor(self, name: str) -> Tensor:
        return next(t for t in self.tensors if t.name == name)

    @property
    def flop(self) -> float:
        """2 MKN for a GEMM, one per output element otherwise (the setup.proto default)."""
        n = 1
        for _, s in self.dims:
            n *= s
        if self.kind == "gemm":
            return 2.0 * n
        return float(n)


@dataclass(frozen=True)
class Link:
    src: int  # index into Instance.ops
    dst: int
    operand: str  # the consumer's input tensor it feeds


@dataclass(frozen=True)
class Machine:
    chips: int
    sram_bytes: float
    matrix_flops: float  # FLOP/s peak (bf16)
    vector_flops: float
    gemm_util: float
    vector_util: float
    dram_Bps: float
    dram_util: float
    overhead_s: float  # per kernel
    topology: str  # "RING" or "SWITCH" (one level of `chips` chips)
    link_Bps: float
    hop_latency_s: float  # the level's latency
    step_latency_s: float  # calibrated software latency per algorithm step
    bus_util: float
    # a second, outer level (4 chips as 2 x 2): its kind ("" = one level of `chips`), link
    # bandwidth and latency; the inner level is then `topology` of 2 chips
    outer: str = ""
    outer_link_Bps: float = 0.0
    outer_latency_s: float = 0.0

    @property
    def levels(self) -> tuple[tuple[str, int, float, float], ...]:
        """(kind, chips, link bandwidth, level latency) per level, innermost first."""
        if not self.outer:
            return ((self.topology, self.chips, self.link_Bps, self.hop_latency_s),)
        inner = self.chips // 2
        return (
            (self.topology, inner, self.link_Bps, self.hop_latency_s),
            (self.outer, 2, self.outer_link_Bps, self.outer_latency_s),
        )


@dataclass(frozen=True)
class Instance:
    name: str
    ops: tuple[Op, ...]
    links: tuple[Link, ...]
    machine: Machine
    dataflow: bool
    num_config: int
    overlap: bool

    def relabelled(self, perm: list[int]) -> Instance:
        """The same graph with kernel i declared at position perm[i] (connections follow)."""
        ops = [None] * len(self.ops)
        for i, p in enumerate(perm):
            ops[p] = self.ops[i]
        links = tuple(Link(perm[e.src], perm[e.dst], e.operand) for e in self.links)
        return replace(self, ops=tuple(ops), links=links, name=f"{self.name}-perm")


# --------------------------------------------------------------------------------------
# Random instances
# --------------------------------------------------------------------------------------


def _graph(rng: random.Random, shape: str) -> tuple[int, list[tuple[int, int]]]:
    """(kernels, edges u->v with u < v), in-degree at most two."""
    if shape == "chain":
        n = rng.randint(2, 5)
        return n, [(i, i + 1) for i in range(n - 1)]
    if shape == "fork":
        n = rng.randint(3, 5)
        return n, [(0, j) for j in range(1, n)]
    if shape == "join":
        n = rng.choice([3, 4])
        if n == 3:
            return 3, [(0, 2), (1, 2)]
        return 4, [(0, 1), (1, 3), (2, 3)]
    if shape == "diamond":
        n = rng.choice([4, 5])
        edges = [(0, 1), (0, 2), (1, 3), (2, 3)]
        return n, edges + ([(3, 4)] if n == 5 else [])
    n = rng.randint(3, 5)
    edges = []
    for v in range(1, n):
        preds = rng.sample(range(v), k=min(v, rng.choice([1, 1, 2])))
        edges += [(u, v) for u in sorted(preds)]
    return n, edges


def _op(i: int, preds: int, t: int, h: int, bpe: float, rng: random.Random) -> Op:
    m, k, n = f"m{i}", f"k{i}", f"n{i}"

    def ten(name: str, role: str, *axes: str) -> Tensor:
        return Tensor(name, role, axes, bpe)

    if preds == 2 and (t != h or rng.random() < 0.5):
        return Op(
            f"add{i}",
            "eltwise",
            ((m, t), (n, h)),
            (ten("x", "in", m, n), ten("y", "in", m, n), ten("z", "out", m, n)),
        )
    if preds == 2:  # T == H: a GEMM of two fed tensors
        dims = ((m, t), (k, h), (n, h))
        a, b = ten("a", "in", m, k), ten("b", "in", k, n)
        return Op(f"mm{i}", "gemm", dims, (a, b, ten("c", "out", m, n)))
    if preds == 0 or rng.random() < 0.6:
        if rng.random() < 0.3:
            return Op(
                f"act{i}",
                "eltwise",
                ((m, t), (n, h)),
                (ten("x", "in", m, n), ten("z", "out", m, n)),
            )
        k0 = rng.choice([4, 8, 12, 16, 24, 32]) if preds == 0 else h
        dims = ((m, t), (k, k0), (n, h))
        a, b = ten("a", "in", m, k), ten("w", "weight", k, n)
        return Op(f"mm{i}", "gemm", dims, (a, b, ten("c", "out", m, n)))
    # the fed tensor as the right operand: W[T,T] x B[T,H]
    dims = ((m, t), (k, t), (n, h))
    a, b = ten("w", "weight", m, k), ten("b", "in", k, n)
    return Op(f"mm{i}", "gemm", dims, (a, b, ten("c", "out", m, n)))


def _feed(op: Op, links: list[int]) -> list[str]:
    """Which input tensor each incoming link feeds, in link order."""
    fed = [t.name for t in op.inputs if t.role == "in"]
    return fed[: len(links)]


def random_machine(rng: random.Random, chips: int) -> Machine:
    """Parameters where compute, DRAM and the network each bind somewhere: a GEMM of
    16 x 32 x 32 is ~66 kFLOP (~30-130 us), its operands ~1-4 kB (~10-40 us of DRAM),
    a 1 kB all-reduce over 2 chips ~5-20 us."""
    return Machine(
        chips=chips,
        sram_bytes=float(rng.choice([600, 900, 1500, 2500, 4000, 8000])),
        matrix_flops=rng.choice([0.5e9, 1e9, 2e9]),
        vector_flops=rng.choice([0.1e9, 0.3e9]),
        gemm_util=rng.choice([1.0, 0.8]),
        vector_util=rng.choice([1.0, 0.5]),
        dram_Bps=rng.choice([0.1e9, 0.2e9, 0.5e9]),
        dram_util=rng.choice([1.0, 0.9]),
        overhead_s=rng.choice([0.0, 1e-6, 4e-6]),
        topology=rng.choice(["RING", "SWITCH"]),
        link_Bps=rng.choice([0.05e9, 0.2e9, 1e9]),
        hop_latency_s=rng.choice([0.0, 1e-6]),
        step_latency_s=rng.choice([0.0, 2e-6]),
        bus_util=rng.choice([1.0, 0.75]),
    )


def random_instance(rng: random.Random, shape: str, chips: int, dataflow: bool) -> Instance:
    n, edges = _graph(rng, shape)
    t = rng.choice([4, 6, 8, 12, 16])
    h = t if rng.random() < 0.25 else rng.choice([4, 8, 12, 16, 24])
    bpe = rng.choice([1.0, 2.0, 2.0, 4.0])
    preds = {v: [u for u, w in edges if w == v] for v in range(n)}
    ops = [_op(i, len(preds[i]), t, h, bpe, rng) for i in range(n)]
    links = []
    for v in range(n):
        for u, name in zip(preds[v], _feed(ops[v], preds[v])):
            links.append(Link(u, v, name))
    if n >= 3 and rng.random() < 0.3:  # a backward tail: its inputs from forward are saved
        cut = rng.randint(1, n - 1)
        ops = [replace(op, backward=i >= cut) for i, op in enumerate(ops)]
    machine = random_machine(rng, chips)
    inst = Instance(
        name=f"{shape}{n}-p{chips}-{'df' if dataflow else 'kbk'}",
        ops=tuple(ops),
        links=tuple(links),
        machine=machine,
        dataflow=dataflow,
        num_config=rng.randint(1, 3) if dataflow else 0,
        overlap=rng.random() < 0.7,
    )
    if chips == 4 and rng.random() < 0.5:  # two levels of 2 (drawn last: seeds stay put)
        outer = rng.choice(["RING", "SWITCH"])
        bw, lat = rng.choice([0.02e9, 0.1e9]), rng.choice([0.0, 3e-6])
        inst = replace(
            inst, machine=replace(machine, outer=outer, outer_link_Bps=bw, outer_latency_s=lat)
        )
    return inst


# --------------------------------------------------------------------------------------
# Setup text (the product's public input)
# --------------------------------------------------------------------------------------

_ROLE = {"in": "INPUT", "weight": "WEIGHT", "out": "OUTPUT"}


def _kernel_text(i: int, op: Op) -> str:
    dims = " ".join(f'dims {{ name: "{d}" size: {s} }}' for d, s in op.dims)
    ops = " ".join(
        f'operands {{ name: "{t.name}" role: {_ROLE[t.role]} '
        + " ".join(f'dims: "{a}"' for a in t.axes)
        + f" bytes_per_element: {t.bytes_per_element:g} }}"
        for t in op.tensors
    )
    kind = "GEMM" if op.kind == "gemm" else "ELEMENTWISE"
    direction = "BWD" if op.backward else "FWD"
    return (
        f'  kernels {{ name: "{op.name}_{i}" id: {i + 1} fwd_bwd: {direction} '
        f'einsum {{ kind: "{kind}" '
        f"{dims} {ops} }} }}\n"
    )


def setup_text(inst: Instance) -> str:
    m = inst.machine
    kernels = "".join(_kernel_text(i, op) for i, op in enumerate(inst.ops))
    conns = "".join(
        f"  connections {{ startIdx: {e.src + 1} endIdx: {e.dst + 1} id: {j + 1} "
        f'end_operand: "{e.operand}" }}\n'
        for j, e in enumerate(inst.links)
    )
    topo = ""
    if m.chips > 1:
        topo = "".join(
            f"  topology {{ kind: {kind} degree: {p} "
            f"link_bw_GBps: {bw / 1e9:g} latency_us: {lat * 1e6:g} }}\n"
            for kind, p, bw, lat in m.levels
        )
    coll = ""
    if m.chips > 1:
        coll = "".join(
            f"      collective {{ level: {i} bus_bw_util: {m.bus_util:g} "
            f"latency_us: {m.step_latency_s * 1e6:g} }}\n"
            for i in range(len(m.levels))
        )
    style = "DATAFLOW" if inst.dataflow else "KERNEL_BY_KERNEL"
    return (
        f"dataflow_graph {{\n{kernels}{conns}}}\n"
        f"system {{\n  num_chip: {m.chips}\n"
        f"  accelerator {{ sram_cap: {m.sram_bytes:g} bf16_tflops: {m.matrix_flops / 1e12:g} "
        f"vector_tflops: {m.vector_flops / 1e12:g}\n"
        f"    efficiency {{ gemm_util: {m.gemm_util:g} vector_util: {m.vector_util:g} "
        f"dram_util: {m.dram_util:g} kernel_overhead_us: {m.overhead_s * 1e6:g}\n{coll}"
        "    } }\n"
        f"  memory {{ dram_bw: {m.dram_Bps / 1e9:g} dram_cap: 0 }}\n{topo}}}\n"
        f"execution {{ execution_style: {style} num_config: {inst.num_config} "
        f"perfect_overlap: {'true' if inst.overlap else 'false'} word: 2 }}\n"
        "solver { gap: 1e-9 }\n"
    )
