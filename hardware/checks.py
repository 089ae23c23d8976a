"""Collecting setup problems: one-line messages prefixed with the setup file, raised once."""

from __future__ import annotations

import math


class Problems(list):
    """Collected one-line messages, each prefixed with the setup file."""

    def __init__(self, where: str):
        super().__init__()
        self.where = where

    def add(self, message: str) -> None:
        self.append(f"{self.where}: {message}")


def num(value: float) -> str:
    """A value as the user wrote it (no trailing .0)."""
    return f"{value:g}"


def non_negative(value: float, path: str, problems: Problems, note: str = "") -> None:
    """Report a negative or non-finite value at `path`."""
    if not math.isfinite(value):
        problems.add(f"{path} is not a finite number, got {num(value)}")
    elif value < 0:
        problems.add(f"{path} must be >= 0{note}, got {num(value)}")


def positive(value: float, path: str, problems: Problems, unit: str = "") -> None:
    """Report a value that is not a finite number > 0 at `path`."""
    if not math.isfinite(value):
        problems.add(f"{path} is not a finite number, got {num(value)}")
    elif value <= 0:
        problems.add(f"{path} must be > 0{unit}, got {num(value)}")


def fraction(value: float, path: str, problems: Problems) -> None:
    """Report a utilisation outside [0, 1] (0 = unset) at `path`."""
    if not math.isfinite(value) or value < 0 or value > 1:
        problems.add(f"{path} must be in (0, 1] (0 = unset), got {num(value)}")
