"""Outer-search benchmark (issue #19 item 3): training knobs searched beside TP/PP/DP.

    python benchmarks/outer.py [--repeat 1] [--time-limit 120] [--only CASE]

Each case prints the grid size (the candidates a Calculon-style search enumerates and
evaluates one by one: every TP/PP/DP placement x micro-batch x recompute x ZeRO stage x
interleaving depth it allows), how many MapShard evaluated (solved or found infeasible
by its memory) and pruned by bounds, the ratio grid / evaluated, the wall time, and the
knobs chosen. Cases:
  tiny_2chips        the tests' tiny Llama (4 layers, h 256) on 2 H100, every knob
                     searched (51 candidates); also times the full enumeration: one pinned
                     MapShard run per candidate (what an enumerating search costs here)
  gpt3_175b_pinned   scenarios/gpt3_175b_train_a100 as shipped (Megatron 2021: ZeRO 0 and
                     no interleaving pinned): the TP/PP/DP search alone
  gpt3_175b_knobs    the same scenario with its zero_stage and virtual_pipeline lines
                     removed: ZeRO stage and interleaving searched too
  llama8b_all_knobs  Llama-3.1-8B, global batch 32 x 2048 tokens on 8 H100, every knob
                     searched
Prints one row per case with medians over --repeat runs.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mapshard import pipeline  # noqa: E402
from schema.errors import InfeasibleError, NoPlanError  # noqa: E402

TINY_MODEL = """model { inline { name: "tiny" architecture: "llama" hidden_size: 256
    num_layers: 4 num_heads: 4 num_kv_heads: 4 intermediate_size: 512 vocab_size: 1000
    ffn: SWIGLU norm: RMSNORM } }"""


def tiny(knobs: str = "", tag: str = "") -> str:
    par = f'parallelism: "{tag}"' if tag else ""
    return f"""
workload {{ llm_training {{ {TINY_MODEL} global_batch: 4 seq_len: 128 {knobs} }} }}
system {{ chip: "H100-SXM5-80GB" num_chip: 2
  topology {{ kind: SWITCH degree: 2 link_bw_GBps: 450 latency_us: 1 {par} }} }}
execution {{ execution_style: KERNEL_BY_KERNEL }}
"""


def without_fields(text: str, *fields: str) -> str:
    """`text` without the lines setting `fields` (each must be set once: the shipped
    scenario pins them; a scenario that stops doing so fails here, not silently)."""
    lines = text.splitlines(keepends=True)
    for field in fields:
        found = [line for line in lines if line.strip().startswith(f"{field}:")]
        if len(found) != 1:
            raise SystemExit(f"gpt3_175b_train_a100 sets {field} {len(found)} times, not once")
        lines.remove(found[0])
    return "".join(lines)


GPT3 = (ROOT / "scenarios/gpt3_175b_train_a100/setup.txt").read_text(encoding="utf-8")
CASES = {
    "tiny_2chips": tiny(),
    "gpt3_175b_pinned": GPT3,
    "gpt3_175b_knobs": without_fields(GPT3, "zero_stage", "virtual_pipeline"),
    "llama8b_all_knobs": """
workload { llm_training { model { hf_model: "Llama-3.1-8B" } global_batch: 32 seq_len: 2048 } }
system { chip: "H100-SXM5-80GB" num_chip: 8 }
execution { execution_style: KERNEL_BY_KERNEL }
""",
}


def run_text(text: str, time_limit: float, folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "setup.txt").write_text(text, encoding="utf-8")
    scenario = pipeline.load_scenario(folder)
    t0 = time.perf_counter()
    plan = pipeline.plan(scenario, time_limit)
    return plan, time.perf_counter() - t0


def tiny_enumeration(time_limit: float, folder: Path) -> tuple[int, float, float]:
    """Every candidate of tiny_2chips pinned and solved on its own (the grid of
    tests/solver/test_outer_training.py): (runs, seconds, best latency)."""
    runs, seconds, best = 0, 0.0, float("inf")
    rec = ("RECOMPUTE_NONE", "RECOMPUTE_SELECTIVE", "RECOMPUTE_FULL")
    for par in ("TP", "PP", "DP"):
        dp, pp = (2 if par == "DP" else 1), (2 if par == "PP" else 1)
        sizes = [mb for mb in (1, 2, 4) if (4 // dp) % mb == 0]
        zeros = (0, 1, 2, 3) if dp > 1 else (0,)
        for mb, r, z, v in itertools.product(sizes, rec, zeros, (1, 2) if pp > 1 else (1,)):
            knobs = f"micro_batch: {mb} recompute: {r} zero_stage: {z} virtual_pipeline: {v}"
            plan, s = run_text(tiny(knobs, par), time_limit, folder / f"p{runs}")
            runs, seconds, best = runs + 1, seconds + s, min(best, plan.latency_s)
    return runs, seconds, best


def knobs_text(plan) -> str:
    t = plan.training
    deg = plan.parallelism
    par = f"TP{deg.get('tp', 1)} PP{deg.get('pp', 1)} DP{deg.get('dp', 1)}"
    if not t:
        return par
    return (
        f"{par} mb{t['micro_batch']} {t['recompute']} ZeRO-{t['zero_stage']} "
        f"v{t['virtual_pipeline']}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--only", choices=sorted(CASES), help="run one case")
    args = parser.parse_args()
    header = (
        f"{'case':18} {'grid':>6} {'evaluated':>9} {'pruned':>6} {'infeas':>6} "
        f"{'grid/eval':>9} {'milps':>6} {'solve s':>8} {'latency s':>10}  chosen"
    )
    print(header)
    print("-" * (len(header) + 30))
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in CASES.items():
            if args.only and name != args.only:
                continue
            try:
                runs = [
                    run_text(text, args.time_limit, Path(tmp) / f"{name}_{i}")
                    for i in range(args.repeat)
                ]
            except (NoPlanError, InfeasibleError) as exc:
                print(f"{name:18} no plan: {exc}")
                continue
            plan = runs[-1][0]
            med = statistics.median(s for _, s in runs)
            st = plan.stats
            evaluated = st.choices_solved + st.choices_infeasible
            print(
                f"{name:18} {st.choices_total:6d} {evaluated:9d} {st.choices_pruned:6d} "
                f"{st.choices_infeasible:6d} {st.choices_total / max(evaluated, 1):9.2f} "
                f"{st.milps_solved:6d} {med:8.2f} {plan.latency_s:10.4g}  {knobs_text(plan)}"
            )
            if name == "tiny_2chips":
                n, seconds, best = tiny_enumeration(args.time_limit, Path(tmp) / "enum")
                print(
                    f"{'  full enumeration':18} {n:6d} {n:9d} {0:6d} {'':6} {1:9.2f} "
                    f"{'':6} {seconds:8.2f} {best:10.4g}  outer search {seconds / med:.2f}x "
                    f"faster, same best: {abs(best - plan.latency_s) <= 1e-9 * best}"
                )
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
