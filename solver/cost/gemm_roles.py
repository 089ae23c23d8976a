"""What a kernel's operands are to the cost model: the A, B, C roles and batch/M/N/K dims of
a two-input matrix kernel, and the bytes each operand must move at least once."""

from __future__ import annotations

import math

from generator.graph import Kernel, KernelKind, OperandRole


def gemm_roles(kernel: Kernel) -> tuple[str, str, str, list[str], list[str], list[str], list[str]]:
    """Names of A, B, C and the batch/M/N/K dims of a two-input matrix kernel (a bias and
    its gradient are epilogue operands: Kernel.matrix_operands)."""
    ins, outs = kernel.matrix_operands
    a, b = ins[0], ins[1]
    c = outs[0]
    da, db, dc = set(a.dims), set(b.dims), set(c.dims)
    batch = [d for d, _ in kernel.dims if d in da and d in db and d in dc]
    m = [d for d, _ in kernel.dims if d in da and d in dc and d not in db]
    n = [d for d, _ in kernel.dims if d in db and d in dc and d not in da]
    k = [d for d, _ in kernel.dims if d not in dc]
    return a.name, b.name, c.name, batch, m, n, k


def is_gemm(kernel: Kernel) -> bool:
    return kernel.is_matrix


def gemm_dims(kernel: Kernel) -> tuple[int, int, int, float] | None:
    """(M, K, N, bytes per element) of a two-input matrix kernel as the data-movement
    frontier sees it (batch dims excluded), or None for any other kernel."""
    if not is_gemm(kernel):
        return None
    _, _, _, _, m, n, k = gemm_roles(kernel)
    sizes = kernel.dim_sizes
    elem = max(o.bytes_per_element for o in kernel.operands)
    return (
        math.prod(sizes[d] for d in m),
        math.prod(sizes[d] for d in k),
        math.prod(sizes[d] for d in n),
        elem,
    )


def compulsory_bytes(kernel: Kernel, sizes: dict[str, int]) -> dict[str, float]:
    traffic: dict[str, float] = {}
    for op in kernel.operands:
        elems = math.prod(sizes[d] for d in op.dims)
        traffic[op.name] = elems * op.bytes_per_element
    if kernel.kind == KernelKind.EMBEDDING:
        # A lookup reads only the gathered rows, not the table.
        out_bytes = sum(traffic[o.name] for o in kernel.outputs)
        for op in kernel.operands:
            if op.role == OperandRole.WEIGHT:
                traffic[op.name] = min(traffic[op.name], out_bytes)
    return traffic
