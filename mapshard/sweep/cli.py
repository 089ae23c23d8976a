"""`mapshard sweep SWEEP_FILE [--workers N] [--cluster tcp://HOST:PORT] [--out DIR] [--quiet]`."""

from __future__ import annotations

import argparse
import sys

from mapshard.sweep.runner import run_sweep
from schema.errors import SetupError

EXIT_OK, EXIT_INTERRUPTED = 0, 130


def run_sweep_command(args: argparse.Namespace) -> int:
    """Run or resume a sweep. Bad input raises SetupError (the CLI turns it into exit 2);
    an interrupt keeps every finished row and returns 130."""
    if args.workers is not None and args.workers < 0:
        raise SetupError(
            f"mapshard sweep: --workers must be >= 0 (0 = one per core), got {args.workers}"
        )
    if args.cluster and args.workers:
        raise SetupError(
            "mapshard sweep: give --workers or --cluster, not both (a cluster's "
            "workers are started with the cluster)"
        )
    outcome = run_sweep(
        args.sweep_file,
        out=args.out,
        workers=args.workers or 0,
        cluster=args.cluster,
        quiet=args.quiet,
    )
    if outcome.interrupted:
        print(
            f"interrupted: {len(outcome.rows)} of {len(outcome.points)} points are in "
            f"{outcome.out / 'results.csv'}; run the same command again to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if not args.quiet:
        print(outcome.summary, file=sys.stderr)
        print(f"results: {outcome.out}")
    return EXIT_OK
