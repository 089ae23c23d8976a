"""FFT: a multi-pass (mixed-radix, Cooley-Tukey / four-step) transform of `batch` complex
sequences of `length` points.

The length is factored N = n_0 x n_1 x ... (each pass at most 256 points, so a pass's
sub-transforms fit on chip); the data tensor has one dim per factor, `digit_i` of size n_i.
Pass i (`fft_pass_i`, an elementwise-like butterfly kernel) transforms along digit_i:
5 batch N log2(n_i) FLOP, so the passes total the customary 5 N log2 N per transform
(twiddle multiplications are not counted, by that convention). Between passes a
`transpose_i` kernel carries an all-to-all (ALL_TO_ALL, group "ep" = the chips the data is
spread over): a layout split along the next pass's digit must move; on one chip it is a
local reorder. Bytes per point: 2 x the activation type (complex; FP32 -> 8).
"""

from __future__ import annotations

import math
from pathlib import Path

from generator.builder import Arg, GraphBuilder
from generator.graph import Communication, KernelKind, Phase, Workload
from generator.ops import IN, OUT
from generator.precision import Precision
from generator.requests import request_batch
from schema import setup_pb2
from schema.errors import SetupError

MAX_PASS_POINTS = 256


def _primes(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def factor_passes(n: int) -> list[int]:
    """Factors of n, each <= MAX_PASS_POINTS where possible, as few and as even as possible."""
    primes = sorted(_primes(n), reverse=True)
    passes = max(1, math.ceil(math.log(n) / math.log(MAX_PASS_POINTS) - 1e-12)) if n > 1 else 1
    while True:
        groups = [1] * passes
        for p in primes:  # largest first into the smallest group
            i = min(range(passes), key=groups.__getitem__)
            groups[i] *= p
        if max(groups) <= MAX_PASS_POINTS or passes >= len(primes):
            return sorted((g for g in groups if g > 1), reverse=True) or [n]
        passes += 1


def fft_workload(req: setup_pb2.Fft, prec: Precision, path: Path) -> Workload:
    if req.length <= 1:
        raise SetupError(f"{path}: workload.fft.length must be > 1 points, got {req.length}")
    if req.batch < 0:
        raise SetupError(f"{path}: workload.fft.batch must be >= 0 (0 = 1), got {req.batch}")
    n, batch = req.length, request_batch(req)
    bpe = 2 * prec.activation_bytes
    factors = factor_passes(n)
    dims = (("batch", batch), *((f"digit_{i}", f) for i, f in enumerate(factors)))
    names = [d for d, _ in dims]
    b = GraphBuilder("fft")
    x = None
    for i, f in enumerate(factors):
        if i:
            x = b.add_kernel(
                f"transpose_{i}",
                KernelKind.COLLECTIVE,
                [Arg("in", IN, dims, bpe, x), Arg("out", OUT, dims, bpe)],
                batch * n,
                shardable=names,
                communication=Communication.ALL_TO_ALL,
                communication_bytes=batch * n * bpe,
            )
        x = b.add_kernel(
            f"fft_pass_{i}",
            KernelKind.ELEMENTWISE,
            [Arg("in", IN, dims, bpe, x), Arg("out", OUT, dims, bpe)],
            5 * batch * n * math.log2(f),
            kernel_class="Va_Va",
            shardable=[d for d in names if d != f"digit_{i}"],
        )
    return Workload(
        kind="fft",
        phases=(Phase("fft", b.graph()),),
        activation_bytes_per_element=bpe,
        weight_bytes_per_param=prec.weight_bytes,
        compute_dtype=prec.math,
        notes=(
            f"{batch} x {n}-point complex FFT in {len(factors)} passes "
            f"({' x '.join(map(str, factors))})",
        ),
    )
