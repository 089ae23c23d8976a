"""`mapshard compare`: scenarios or result folders side by side (mapshard/compare.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mapshard.compare import compare_csv, compare_html, format_table, load_sides
from mapshard.outdir import check_writable, replace_folder
from schema.errors import SetupError


def cmd_compare(args: argparse.Namespace) -> int:
    if len(args.items) < 2:
        raise SetupError("mapshard compare: give at least two scenario or result folders")
    out = Path(args.out or "compare")
    check_writable(out)
    sides = load_sides(args.items, args.time_limit)
    replace_folder(out, {"compare.html": compare_html(sides), "compare.csv": compare_csv(sides)})
    print(format_table(sides))
    print(f"\nwritten: {out / 'compare.html'}")
    return 0
