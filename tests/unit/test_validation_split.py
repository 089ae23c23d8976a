"""The public validation rows: the FIT/CHECK split follows its written rule (VALIDATION_SCHEMA.md:
sha256 of the id, decided before any fit), the sets are disjoint, and every row names its
source and its value as published."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "data" / "validation"
DEV = DATA / "validation_dev_structured.csv"
FIT = DATA / "validation_public_fit.csv"
CHECK = DATA / "validation_public_check.csv"


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def header(path: Path) -> list[str]:
    with path.open(encoding="utf-8", newline="") as f:
        return next(csv.reader(f))


def side(row_id: str) -> str:
    """The written rule: CHECK when the first 8 hex digits of sha256(id) are 0 mod 3."""
    return "check" if int(hashlib.sha256(row_id.encode()).hexdigest()[:8], 16) % 3 == 0 else "fit"


def test_public_files_share_the_dev_schema():
    assert header(FIT) == header(DEV) == header(CHECK)
    assert len(header(DEV)) == 47


@pytest.mark.parametrize("path,expected", [(FIT, "fit"), (CHECK, "check")])
def test_every_public_row_is_on_the_side_its_id_hash_decides(path, expected):
    wrong = [r["id"] for r in rows(path) if side(r["id"]) != expected]
    assert not wrong


def test_the_rule_by_hand():
    """sha256("P-GEM07") starts 4ee64573 = 1323713907 = 0 mod 3 (a CHECK row); "P-GEM01"
    starts 5ce76db8 = 1 mod 3 (FIT)."""
    digest = hashlib.sha256(b"P-GEM07").hexdigest()[:8]
    assert digest == "4ee64573" and 1323713907 % 3 == 0 and side("P-GEM07") == "check"
    assert int(hashlib.sha256(b"P-GEM01").hexdigest()[:8], 16) % 3 != 0


def test_ids_are_unique_and_the_sets_disjoint():
    dev, fit, check = ([r["id"] for r in rows(p)] for p in (DEV, FIT, CHECK))
    every = dev + fit + check
    assert len(every) == len(set(every))
    assert not set(fit) & set(check)


def test_at_least_40_public_points_with_both_sides_populated():
    fit, check = rows(FIT), rows(CHECK)
    assert len(fit) + len(check) >= 40
    assert sum(r["usable"] == "1" for r in check) >= 10  # a check set worth reporting


@pytest.mark.parametrize("path", [DEV, FIT, CHECK], ids=lambda p: p.name)
def test_every_row_names_its_source_value_and_reason(path):
    for r in rows(path):
        assert r["source"].strip(), r["id"]
        assert r["value_as_published"].strip(), r["id"]
        assert float(r["value"]) > 0, r["id"]
        if r["usable"] == "0":
            assert r["notes"].strip(), f"{r['id']}: usable=0 needs its reason in notes"
