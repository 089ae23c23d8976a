"""`mapshard sweep SWEEP_FILE [--workers N] [--cluster tcp://HOST:PORT] [--out DIR] [--quiet]`."""

from __future__ import annotations

import argparse
import ipaddress
import sys

from mapshard.sweeps.runner import run_sweep
from schema.errors import SetupError

EXIT_OK, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 130, 143


def run_sweep_command(args: argparse.Namespace) -> int:
    """Run or resume a sweep. Bad input raises SetupError (the CLI turns it into exit 2);
    an interrupt keeps every finished row and returns 130 (Ctrl-C) or 143 (SIGTERM)."""
    if args.workers is not None and args.workers < 0:
        raise SetupError(
            f"mapshard sweep: --workers must be >= 0 (0 = one per core), got {args.workers}"
        )
    if args.cluster and args.workers:
        raise SetupError(
            "mapshard sweep: give --workers or --cluster, not both (a cluster's "
            "workers are started with the cluster)"
        )
    warning = cluster_warning(args.cluster)
    if warning:
        print(warning, file=sys.stderr)
    outcome = run_sweep(
        args.sweep_file,
        out=args.out,
        workers=args.workers or 0,
        cluster=args.cluster,
        quiet=args.quiet,
    )
    if outcome.dropped:
        shown = "; ".join(outcome.dropped[:3]) + ("; ..." if len(outcome.dropped) > 3 else "")
        print(
            f"warning: {outcome.out / 'results.csv'}: removed {len(outcome.dropped)} row(s) "
            f"that were not finished points ({shown}); their points run again",
            file=sys.stderr,
        )
    for line in outcome.kept:
        print(f"warning: {line}", file=sys.stderr)
    if outcome.interrupted:
        print(
            f"interrupted: {len(outcome.rows)} of {len(outcome.points)} points are in "
            f"{outcome.out / 'results.csv'}; run the same command again to resume",
            file=sys.stderr,
        )
        return EXIT_TERMINATED if outcome.terminated else EXIT_INTERRUPTED
    if not args.quiet:
        print(outcome.summary, file=sys.stderr)
        print(f"results: {outcome.out}")
    return EXIT_OK


def cluster_warning(address: str | None) -> str:
    """A plain-TCP scheduler address off this machine: anyone who reaches it can run code
    on the workers (README, Sweeps on a Dask cluster); say so, and what to use instead."""
    if not address:
        return ""
    scheme, _, rest = address.rpartition("://")
    host = rest.rsplit(":", 1)[0].strip("[]") if rest else ""
    if scheme == "tls" or host in ("localhost", "") or _loopback(host):
        return ""
    return (
        f"warning: --cluster {address} is plain TCP off this machine: anyone who can reach "
        "the scheduler can run code on its workers; use a tls:// address with Dask's TLS "
        "security, or an SSH tunnel to 127.0.0.1"
    )


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
