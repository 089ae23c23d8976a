"""The scenario subcommands (run, generate, explain, bounds), one function each: call the run
or the stages, print, return the exit code. The others live beside the code they drive
(mapshard.cli.COMMANDS names them all), so a command imports only what it uses."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from generator.export import generated_files
from mapshard import pipeline
from mapshard.outdir import replace_folder
from mapshard.progress import Progress
from mapshard.report.bounds import bounds_files, bounds_summary, gemm_bounds, workload_gemms
from mapshard.report.explain import format_explain
from mapshard.report.terminal import format_summary
from mapshard.run import Result, run
from schema.errors import Interrupted, SetupError, Terminated


def _out_dir(scenario: str, out: str | None, default: str = "results") -> Path:
    """--out, else a folder beside the setup: results/, graph/ or bounds/ (siblings, so a
    run's result folder never holds another command's output)."""
    if out:
        return Path(out)
    base = Path(scenario)
    base = base if base.is_dir() else base.parent
    return base / default


def cmd_run(args: argparse.Namespace) -> int:
    out = _out_dir(args.scenario, args.out)
    try:
        with Progress(enabled=not args.quiet) as progress:
            what_if = True if args.what_if else False if args.no_sensitivity else None
            result = run(
                args.scenario, out, args.time_limit, progress.update, what_if, args.cost_model
            )
    except Interrupted as stop:
        if stop.result is None:
            raise
        return _interrupted(stop, args.quiet)
    plan = result.plan
    if not args.quiet:
        print(format_summary(plan, result.views))
        print(f"\nresults: {out}")
    if plan.stats.status == "time_limit":
        why = {
            "path_cap": "on the fusion search's path cap (solver max_paths)",
            "price_cap": "on the fusion search's budget of segment prices (solver max_priced)",
            "node_limit": "on a MILP's node budget (solver node_limit)",
            "candidate_cap": "on the outer search's candidate budget (solver max_candidates)",
            "tile_menus": "short of a proof over every tile (solver tile_refinements)",
            "tile_bound": "short of a proof over every tile (the sampled tile menus' bound "
            "stalled; a larger solver tile_menu_size samples more)",
            "memory_split": "short of proving the DRAM split among the graphs optimal",
            "step_bound": "short of proving the step around its proven graphs",
            "unexplained": "with a layout skipped (no mapping found, none ruled out)",
            "split_over_capacity": "with a layout skipped (its DRAM split over capacity)",
        }.get(plan.stats.stop_reason, "at the time limit")
        print(
            f"warning: stopped {why}; the plan is within {plan.stats.gap:.2%} of optimal",
            file=sys.stderr,
        )
    if plan.stats.search_space != "all":
        print(
            f"warning: the fusion search covered {plan.stats.search_space} only; "
            "status and gap hold within that space",
            file=sys.stderr,
        )
    return 0


def _interrupted(stop: Interrupted, quiet: bool) -> int:
    """The best plan found before Ctrl-C / SIGTERM was written: say so, exit 130 / 143."""
    result = stop.result
    assert isinstance(result, Result)
    plan = result.plan
    if not quiet:
        print(format_summary(plan))
    if stop.during_what_if:
        print(
            f"interrupted during the what-if table: wrote the plan to {result.out} without "
            f"it (status {plan.stats.status}, within {plan.stats.gap:.2%} of optimal)",
            file=sys.stderr,
        )
    else:
        print(
            f"interrupted: wrote the best plan found so far to {result.out} "
            f"(status interrupted, within {plan.stats.gap:.2%} of optimal)",
            file=sys.stderr,
        )
    return 143 if isinstance(stop.__cause__, Terminated) else 130


def cmd_generate(args: argparse.Namespace) -> int:
    scenario = pipeline.load_scenario(args.scenario)
    out = _out_dir(args.scenario, args.out, "graph")
    replace_folder(out, generated_files(scenario.workload))
    model = scenario.workload.model
    print(
        f"{scenario.name}: {sum(len(p.graph.kernels) for p in scenario.workload.phases)} "
        f"kernels in {len(scenario.workload.phases)} phase(s)"
        + (f", {model.num_params:,} parameters" if model else "")
    )
    print(f"written: {out}")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    scenario = pipeline.load_scenario(args.scenario)
    print(format_explain(pipeline.plan(scenario, args.time_limit)))
    return 0


def cmd_bounds(args: argparse.Namespace) -> int:
    scenario = pipeline.load_scenario(args.scenario)
    gemms = workload_gemms(scenario.workload, args.kernel)
    if not gemms:
        valid = [name for name, *_ in workload_gemms(scenario.workload)]
        shown = ", ".join(valid[:12]) + (", ..." if len(valid) > 12 else "")
        raise SetupError(
            f"{args.scenario}: no GEMM kernel"
            + (f" named {args.kernel}; valid: {shown}" if args.kernel and valid else "")
        )
    out = _out_dir(args.scenario, args.out, "bounds")
    replace_folder(out, bounds_files(gemms, scenario.system.chip.sram_bytes))
    print("\n".join(bounds_summary(gemm_bounds(gemms, scenario.system), scenario.system)))
    print(f"\nwritten: {out / 'bounds.csv'}, {out / 'bounds.svg'}")
    return 0
