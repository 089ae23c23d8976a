"""Measure on a lent GPU what the validation set lacks (issue 16, part 6), as rows of the
validation schema (tests/data/validation/VALIDATION_SCHEMA.md) with the device named.

What (STEPS, each its own row-id letter): GEMMs in BF16, FP8 and FP64 (square, decode-sized
M, the skinny-N 802816 x 768 x N shapes, and a seeded log-uniform random family), fused
causal attention forward and backward (cuDNN, FlashAttention), the HBM copy bandwidth, and
through benchmarks/gpu_workloads.py: MoE expert GEMMs, decode attention in both kernel
families, Llama layers' decode steps and prefills, BF16 training steps (dense and MoE),
MoE layers' decode steps (gpu_moe.py), single-GPU HPL.
Timing: GEMMs, attention and copies back to back in one stream between two CUDA events
(the cuBLASLt-bench convention of the GEMM rows), the median of gpu_workloads.ROUNDS rounds;
short kernels from a replayed CUDA graph of them (no host launch gaps).

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
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path
import gpu_moe  # noqa: E402
import gpu_runs  # noqa: E402
import gpu_workloads  # noqa: E402

HERE = Path(__file__).resolve().parents[1]
FIT = HERE / "tests" / "data" / "validation" / "validation_public_fit.csv"
CHECK = HERE / "tests" / "data" / "validation" / "validation_public_check.csv"
DEV = HERE / "tests" / "data" / "validation" / "validation_dev_structured.csv"

CUBES = (1024, 2048, 4096, 8192)
DECODE_M = (1, 16, 64, 128)
DECODE_KN = ((4096, 4096), (4096, 14336), (14336, 4096), (8192, 8192), (8192, 28672))
SKINNY = tuple((802816, 768, n) for n in (64, 128, 192, 256, 384)) + tuple(
    (65536, 4096, n) for n in (64, 128, 192, 256)
)
PREFILL_SEQ = (512, 1024, 2048, 4096, 8192, 16384)  # batch x seq = 16k tokens (FA3's setup)


RANDOM_GEMMS = 24  # shapes drawn log-uniformly, a family no model was built around
FP64_CUBES = (2048, 4096, 8192, 16384)


def random_gemm_shapes(count: int, seed: int = 2026) -> list[tuple[int, int, int]]:
    """(m, k, n) drawn log-uniformly in [16, 16384], each a multiple of 16 (aligned for FP8),
    at most 2^34 multiply-adds (a few ms)."""
    rng = random.Random(seed)
    shapes: list[tuple[int, int, int]] = []
    while len(shapes) < count:
        m, k, n = (16 * max(1, round(2 ** rng.uniform(4, 14) / 16)) for _ in range(3))
        if m * k * n <= 2**34:
            shapes.append((m, k, n))
    return shapes


def gemm_shapes() -> list[tuple[int, int, int]]:
    """(m, k, n) of every GEMM measured."""
    shapes = [(c, c, c) for c in CUBES]
    shapes += [(m, k, n) for m in DECODE_M for k, n in DECODE_KN]
    return shapes + list(SKINNY) + random_gemm_shapes(RANDOM_GEMMS)


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
    extra = "device=" + device.replace(" ", "_").replace(";", "")
    if "timing=" not in row["extra_params"]:  # graph-timed rows say cuda_graph_replay
        extra += ";timing=cuda_event_stream"
    row["extra_params"] = extra + (";" + row["extra_params"] if row["extra_params"] else "")
    return row


# extra_params that are shapes (VALIDATION_SCHEMA.md, Families)
SHAPE_KEYS = ("causal", "attn_pass", "hpl_n", "hpl_nb", "hpl_p", "hpl_q", "requests")
NOT_CONFIGURATION = ("usable", "chips_per_node", "ffn_kind", "vocab")


def configuration(header: list[str], row: dict[str, str]) -> tuple[str, ...]:
    """What was measured on what (the schema's family key): the columns kind ... message_bytes
    but the four that do not tell configurations apart, the metric, the shape keys."""
    columns = header[header.index("kind") : header.index("message_bytes") + 1] + ["metric"]
    extra = dict(p.split("=", 1) for p in row["extra_params"].split(";") if "=" in p)
    cells = tuple(row[c].strip() for c in columns if c not in NOT_CONFIGURATION)
    return cells + tuple(extra.get(k, "").strip() for k in SHAPE_KEYS)


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def place(measured: Path) -> tuple[int, int]:
    """Append a measured CSV's rows to the fit or check file: a row whose configuration
    already has rows joins their side (dev rows are FIT), a new family goes where the
    sha256 rule puts its smallest id."""
    header = schema_header()
    known: dict[tuple[str, ...], str] = {}
    for name, path in (("fit", DEV), ("fit", FIT), ("check", CHECK)):
        for r in read_rows(path):
            known[configuration(header, r)] = name
    rows = read_rows(measured)
    first: dict[tuple[str, ...], str] = {}
    for r in sorted(rows, key=lambda r: r["id"]):
        first.setdefault(configuration(header, r), r["id"])
    counts = {"fit": 0, "check": 0}
    for name, path in (("fit", FIT), ("check", CHECK)):
        chosen = [
            r
            for r in rows
            if known.get(configuration(header, r), side(first[configuration(header, r)])) == name
        ]
        with path.open("a", encoding="utf-8", newline="") as f:
            csv.DictWriter(f, fieldnames=header, lineterminator="\n").writerows(chosen)
        counts[name] = len(chosen)
    return counts["fit"], counts["check"]


# ---------------------------------------------------------------------------------------
# Measuring (device machine only)
# ---------------------------------------------------------------------------------------


def stream_time_s(torch, fn: Callable[[], object], reps: int) -> float:
    """Median over ROUNDS of the mean time of `reps` back-to-back calls (one stream)."""
    return gpu_workloads.timed(torch, fn, reps, smoke=False)


def reps_for(seconds_each: float) -> int:
    return max(3, min(200, int(0.05 / max(seconds_each, 1e-6))))


def gemm_call(torch, precision: str, m: int, k: int, n: int) -> Callable[[], object]:
    """One GEMM A (m x k) times B^T (B n x k) in `precision`: BF16 in and out; FP8 (e4m3)
    in with unit tensor scales and BF16 out (cuBLASLt through _scaled_mm); FP64 in and out."""
    dtype = torch.float64 if precision == "fp64" else torch.bfloat16
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(n, k, device="cuda", dtype=dtype)
    if precision != "fp8":
        return lambda: a @ b.t()
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda")
    return lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)


def measure_gemms(torch, new_row: Callable[..., dict]) -> list[dict]:
    rows = []
    shapes = [("bf16", s) for s in gemm_shapes()] + [("fp8", s) for s in gemm_shapes()]
    shapes += [("fp64", (c, c, c)) for c in FP64_CUBES]
    for precision, (m, k, n) in shapes:
        peak = 5e13 if precision == "fp64" else 5e14
        try:
            call, reps = gemm_call(torch, precision, m, k, n), reps_for(gemm_flop(m, k, n) / peak)
            t = gpu_workloads.graph_time_s(torch, call, reps)
        except RuntimeError as exc:  # a shape the library refuses (FP8 with m = 1)
            print(f"skip gemm {precision} {m}x{k}x{n}: {exc}", file=sys.stderr)
            continue
        out = "FP64" if precision == "fp64" else "BF16"
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
                notes=f"A (m x k) row-major times B^T, {out} output; random normal data.",
                extra_params="library=torch_cublaslt;timing=cuda_graph_replay;derived_kernel_time_s="
                + repr(t),
            )
        )
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
                        extra_params=f"library={name};pass={pass_};causal=1"
                        + (";attention_kernel=fa2" if name == "flash" else ""),
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


# step name -> (row id tag, the function measuring it)
STEPS: dict[str, tuple[str, Callable[..., list[dict]]]] = {
    "layer_decode": ("L", gpu_workloads.measure_layer_decode),
    "layer_decode_per_head": ("D", gpu_workloads.measure_layer_decode_per_head),
    "layer_prefill": ("F", gpu_workloads.measure_layer_prefill),
    "decode_attention": ("A", gpu_workloads.measure_decode_attention),
    "expert_gemms": ("E", gpu_workloads.measure_expert_gemms),
    "training_step": ("T", gpu_runs.measure_training_step),
    "moe_training_step": ("R", gpu_runs.measure_moe_training_step),
    "moe_layer_decode": ("Q", gpu_moe.measure_moe_layer_decode),
    "moe_layer_prefill": ("S", gpu_moe.measure_moe_layer_prefill),
    "grouped_mm_rates": ("U", gpu_moe.measure_grouped_mm_rates),
    "hpl": ("H", gpu_runs.measure_hpl),
    "gemms": ("G", measure_gemms),
    "prefill_attention": ("P", measure_attention),
    "copy": ("C", measure_copy),
}
SMOKE_STEPS = (
    "layer_decode",
    "layer_decode_per_head",
    "layer_prefill",
    "decode_attention",
    "expert_gemms",
    "training_step",
    "moe_training_step",
    "moe_layer_decode",
    "moe_layer_prefill",
    "hpl",
)


def write_rows(path: Path, header: list[str], rows: list[dict]) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    tmp.replace(path)


def measure(out: Path, steps: list[str], smoke: bool = False) -> Path:
    """Run `steps` in order, rewriting out/measured.csv after each, so a run stopped at its
    time limit still returns what it measured; a step that fails is reported and skipped."""
    import torch

    device = "cpu smoke run" if smoke else torch.cuda.get_device_name()
    chip = {"H100": "H100-SXM5-80GB", "H200": "H200-SXM-141GB"}.get(
        (device.split() + ["", ""])[1], device
    )
    header, rows = schema_header(), []
    release = f"PyTorch {torch.__version__} (CUDA {torch.version.cuda})"
    out.mkdir(parents=True, exist_ok=True)
    path = out / "measured.csv"
    for name in steps:
        tag, step = STEPS[name]
        count = [0]

        def new_row(kind: str, tag: str = tag, count: list[int] = count, **cells: object) -> dict:
            count[0] += 1
            row_id = f"M-{chip.split('-')[0]}-{tag}{count[0]:03d}"
            return make_row(header, chip, device, id=row_id, kind=kind, release=release, **cells)

        start_s = time.perf_counter()
        try:
            got = step(torch, new_row, smoke=True) if smoke else step(torch, new_row)
        except Exception as exc:  # noqa: BLE001 - one step's failure must not lose the rest
            print(f"step {name} failed: {type(exc).__name__}: {exc}", flush=True)
            got = []
        rows += got
        print(f"step {name}: {len(got)} rows in {time.perf_counter() - start_s:.1f} s", flush=True)
        write_rows(path, header, rows)
        if not smoke:
            torch.cuda.empty_cache()
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="measure here (device machine)")
    ap.add_argument("--place", type=Path, help="file a measured CSV into fit/check")
    ap.add_argument("--steps", help="comma-separated, in order (default: every step)")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU (no GPU)")
    args = ap.parse_args()
    if args.place:
        fit, check = place(args.place)
        print(f"placed {fit} rows in {FIT.name}, {check} in {CHECK.name}")
    elif args.out:
        every = SMOKE_STEPS if args.smoke else tuple(STEPS)
        steps = args.steps.split(",") if args.steps else list(every)
        unknown = [s for s in steps if s not in STEPS]
        if unknown:
            ap.error(f"unknown steps {unknown}; valid: {', '.join(STEPS)}")
        print(f"wrote {measure(args.out, steps, args.smoke)}")
    else:
        ap.error("give --out DIR (on a GPU) or --place FILE")


if __name__ == "__main__":
    main()
