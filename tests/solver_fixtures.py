"""Small random kernel graphs and machines for solver tests (shared by several tests)."""

from __future__ import annotations

import random

from generator.graph import Edge, Kernel, KernelGraph, KernelKind, Operand, OperandRole
from hardware.system import Chip, Efficiency, MemoryLevel, NetworkLevel, System, Topology
from solver.cost.menus import build_problem
from solver.cost.problem import KernelMenu


def small_chip(sram_bytes: float = 2e5, peak: float = 1e12) -> Chip:
    return Chip(
        name="test-chip",
        cores=4,
        peak_flops={"bf16": peak},
        vector_flops=peak / 8,
        sram_bytes=sram_bytes,
        frequency_Hz=1e9,
        efficiency=Efficiency(),
    )


def small_system(
    num_chips: int = 2, sram_bytes: float = 2e5, link_Bps: float = 5e9, dram_Bps: float = 1e11
) -> System:
    return System(
        num_chips=num_chips,
        chip=small_chip(sram_bytes),
        memory=(MemoryLevel("dram", 1e12, dram_Bps),),
        network=(NetworkLevel("ring", Topology.RING, num_chips, link_Bps, 1e-6, ("TP",)),),
    )


def gemm(name: str, m: int, k: int, n: int, a_dims=("t", "h"), w: bool = True) -> Kernel:
    """C[t, o] = A[t, h] x W[h, o] with dims named so layouts match across kernels."""
    t, h = a_dims
    o = f"{name}_o"
    return Kernel(
        name=name,
        kind=KernelKind.GEMM,
        dims=((t, m), (h, k), (o, n)),
        operands=(
            Operand("a", OperandRole.INPUT, (t, h), 2),
            Operand("w", OperandRole.WEIGHT if w else OperandRole.INPUT, (h, o), 2),
            Operand("c", OperandRole.OUTPUT, (t, o), 2),
        ),
        flop=2.0 * m * k * n,
    )


def elementwise(name: str, m: int, n: int, dims=("t", "h")) -> Kernel:
    return Kernel(
        name=name,
        kind=KernelKind.ELEMENTWISE,
        dims=((dims[0], m), (dims[1], n)),
        operands=(
            Operand("x", OperandRole.INPUT, dims, 2),
            Operand("y", OperandRole.OUTPUT, dims, 2),
        ),
        flop=float(m * n),
    )


def random_chain(rng: random.Random, n_kernels: int) -> KernelGraph:
    """A chain of GEMMs and elementwise kernels with consistent dim names, so edges carry
    real layout choices."""
    kernels: list[Kernel] = []
    edges: list[Edge] = []
    tokens = rng.choice([16, 32, 64])
    width = rng.choice([16, 32, 48])
    out_dim = "h"
    for i in range(n_kernels):
        name = f"k{i}"
        if i == 0 or rng.random() < 0.6:
            n = rng.choice([16, 32, 64])
            k = gemm(name, tokens, width, n, a_dims=("t", out_dim))
            kernels.append(k)
            new_dim, width = f"{name}_o", n
        else:
            k = elementwise(name, tokens, width, dims=("t", out_dim))
            kernels.append(k)
            new_dim = out_dim
        if i > 0:
            prev = kernels[i - 1]
            dst_op = k.inputs[0].name
            edges.append(
                Edge(prev.name, name, dst_op, tensor_bytes=prev.operand_bytes(prev.outputs[0]))
            )
        out_dim = new_dim
    return KernelGraph("random", tuple(kernels), tuple(edges))


def residual_add(name: str, m: int, n: int, dims: tuple[str, str]) -> Kernel:
    return Kernel(
        name=name,
        kind=KernelKind.ELEMENTWISE,
        dims=((dims[0], m), (dims[1], n)),
        operands=(
            Operand("x", OperandRole.INPUT, dims, 2),
            Operand("r", OperandRole.INPUT, dims, 2),
            Operand("y", OperandRole.OUTPUT, dims, 2),
        ),
        flop=float(m * n),
    )


def random_dag(rng: random.Random, n_kernels: int) -> KernelGraph:
    """Like `random_chain`, but some elementwise kernels are residual adds whose second
    input comes from an earlier kernel of the same shape (a skip edge over several
    kernels, as in transformer layers)."""
    kernels: list[Kernel] = []
    edges: list[Edge] = []
    tokens = rng.choice([16, 32])
    width = rng.choice([16, 32])
    out_dim = "h"
    shapes: list[tuple[str, int]] = []  # (output dim, width) per kernel
    for i in range(n_kernels):
        name = f"k{i}"
        earlier = [q for q in range(i - 1) if shapes[q] == (out_dim, width)]
        if i == 0 or rng.random() < 0.5:
            n = rng.choice([16, 32])
            k = gemm(name, tokens, width, n, a_dims=("t", out_dim))
            new_dim, new_width = f"{name}_o", n
        elif earlier and rng.random() < 0.7:
            k = residual_add(name, tokens, width, ("t", out_dim))
            src = kernels[rng.choice(earlier)]
            edges.append(Edge(src.name, name, "r", tensor_bytes=src.operand_bytes(src.outputs[0])))
            new_dim, new_width = out_dim, width
        else:
            k = elementwise(name, tokens, width, dims=("t", out_dim))
            new_dim, new_width = out_dim, width
        kernels.append(k)
        if i > 0:
            prev = kernels[i - 1]
            tensor_bytes = prev.operand_bytes(prev.outputs[0])
            edges.append(Edge(prev.name, name, k.inputs[0].name, tensor_bytes=tensor_bytes))
        out_dim, width = new_dim, new_width
        shapes.append((out_dim, width))
    return KernelGraph("random_dag", tuple(kernels), tuple(edges))


def tp2_problem(
    graph: KernelGraph,
    system: System,
    *,
    dataflow: bool,
    overlap: bool,
    max_configs: int,
    tiling_points: int,
):
    """The mapping problem of `graph` on `system` with 2-way tensor parallelism on its
    first network level (the shape every solver test uses)."""
    span = [(system.network[0], 2)]
    return build_problem(
        graph,
        system.chip,
        system.dram.bandwidth_Bps,
        2,
        span,
        {"tp": span},
        "bf16",
        dataflow=dataflow,
        overlap=overlap,
        max_configs=max_configs,
        tiling_points=tiling_points,
    )


def one_kernel_options(kernel: Kernel, system: System) -> tuple:
    """The menu options of `kernel` alone on one chip of `system` (kernel by kernel, compute
    and memory overlapped): how tests read one kernel's priced time."""
    return one_kernel_menu(kernel, system).options


def one_kernel_menu(kernel: Kernel, system: System) -> KernelMenu:
    """`kernel`'s whole menu alone on one chip of `system` (one_kernel_options)."""
    problem = build_problem(
        KernelGraph("g", (kernel,)),
        system.chip,
        system.dram.bandwidth_Bps,
        1,
        [],
        {},
        "bf16",
        False,
        True,
        0,
    )
    return problem.kernels[0]
