"""The library subcommands (hardware, models): the shipped chips, systems and models, printed.
Neither needs a scenario, so neither imports the pipeline or the solver."""

from __future__ import annotations

import argparse

from hardware import library
from mapshard.models_list import format_models, model_rows
from schema.errors import SetupError


def cmd_hardware(args: argparse.Namespace) -> int:
    if args.action == "list":
        print(library.format_list())
        return 0
    if not args.name:
        raise SetupError(
            "mapshard hardware show: give a chip or system name (see `mapshard hardware list`)"
        )
    print(library.format_show(args.name))
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    print(format_models(model_rows()))
    return 0
