"""The step-end optimizer kernels of a profiled single-GPU PyTorch training step (issue #35),
as rates against the chip's DRAM peak: fused AdamW (multi_tensor_apply with
FusedAdamMathFunctor: FP32 master, gradient, two moments read, master and moments written,
28 bytes a parameter), the master weights copied back to BF16 (multi_tensor_apply with
CopyFunctor: 6 bytes a parameter) and the BF16 -> FP32 gradient casts (direct_copy_kernel:
elements per second, as `strided_elementwise_gelem_per_s` counts them).

Why: the H200 profiles show these kernels at 68-71% (AdamW) and 75-76% (copy) of the HBM
peak, where the model prices the optimizer at the chip's achieved copy rate (88%): a
single-GPU step's optimizer is 15-20% of it. Only a FIT row's profile may set a constant
(tests/data/validation/VALIDATION_SCHEMA.md): `benchmarks/gpu_profile.py --fit` profiles
the FIT configurations.

    python benchmarks/optimizer_rates.py ROW_ID PROFILE.json

ROW_ID: the validation row whose configuration was profiled; its parameter count and chip
come from its setup (as `mapshard validate` builds it)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mapshard import pipeline  # noqa: E402
from mapshard.fidelity.cases import read_cases  # noqa: E402
from mapshard.fidelity.scenarios import build_setup  # noqa: E402
from solver.search.storage_rule import param_count  # noqa: E402

VALIDATION = ROOT / "tests" / "data" / "validation"
ADAM_BYTES_PER_PARAM = 28.0  # master, gradient, exp_avg, exp_avg_sq read; three written
COPY_BYTES_PER_PARAM = 6.0  # FP32 master read, BF16 weight written
# kernel name fragments of each class
ADAM, COPY, CAST = "FusedAdamMathFunctor", "CopyFunctor", "direct_copy_kernel"


def kernel_seconds(trace: Path) -> dict[str, tuple[int, float]]:
    """(launches, seconds) of the three classes in a profile's GPU kernel events."""
    events = json.loads(trace.read_text(encoding="utf-8")).get("traceEvents", [])
    out = {ADAM: (0, 0.0), COPY: (0, 0.0), CAST: (0, 0.0)}
    for ev in events:
        if ev.get("ph") != "X" or str(ev.get("cat", "")).lower() != "kernel":
            continue
        name = ev.get("name", "")
        for key in out:
            if key in name:
                n, s = out[key]
                out[key] = (n + 1, s + float(ev.get("dur", 0.0)) * 1e-6)
                break
    return out


def row_setup(row_id: str):
    """(side, parameters, DRAM peak B/s) of a validation row's setup."""
    for side in ("fit", "check"):
        cases = read_cases(VALIDATION / f"validation_public_{side}.csv")
        cases = cases[0] if isinstance(cases, tuple) else cases
        case = next((c for c in cases if c.id == row_id), None)
        if case is None:
            continue
        setup = build_setup(case)[0]
        loaded = pipeline.load_message(setup, ROOT / row_id)
        system = pipeline.resolve(loaded)
        scenario = pipeline.assemble(loaded, system)
        return side, param_count(scenario.workload), system.dram.bandwidth_Bps
    raise SystemExit(f"{row_id}: no such row in {VALIDATION}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("row_id")
    ap.add_argument("profile", type=Path)
    args = ap.parse_args()
    side, params, peak = row_setup(args.row_id)
    got = kernel_seconds(args.profile)
    print(f"{args.row_id} ({side.upper()} row): {params / 1e9:.4f} B parameters, "
          f"DRAM peak {peak / 1e12:.2f} TB/s")  # fmt: skip
    for key, per_param in ((ADAM, ADAM_BYTES_PER_PARAM), (COPY, COPY_BYTES_PER_PARAM)):
        n, s = got[key]
        if s > 0:
            rate = params * per_param / s
            print(f"  {key:22s} {n:4d} launches {s * 1e3:8.3f} ms  {rate / 1e12:.3f} TB/s "
                  f"({rate / peak:.1%} of peak)")  # fmt: skip
    n, s = got[CAST]
    if s > 0:
        # every dtype-converting copy counted (the step has others): the rate is at least this
        print(f"  {CAST:22s} {n:4d} launches {s * 1e3:8.3f} ms  "
              f"{params / s / 1e9:.1f} G elements/s at least")  # fmt: skip
    if side != "fit":
        print("  a CHECK row: its rates may explain a residual, never set a constant")


if __name__ == "__main__":
    main()
