"""The public validation rows: the FIT/CHECK split follows its written rule (VALIDATION_SCHEMA.md,
decided before any fit, never from a prediction): rows of one configuration are one family,
wholly FIT or wholly CHECK, on the side the sha256 rule gives the family's anchor row (its
earliest release, then its smallest id); a family with a dev row is FIT. The sets are
disjoint, and every row names its source, its value as published, and the table, row and
release it comes from."""

from __future__ import annotations

import csv
import hashlib
import re
from collections import defaultdict
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "data" / "validation"
DEV = DATA / "validation_dev_structured.csv"
FIT = DATA / "validation_public_fit.csv"
CHECK = DATA / "validation_public_check.csv"
# A configuration, written out here from the schema (not imported): model, chips, layout,
# shapes, precision, what was measured. Software settings (recipes, engine flags) are not in
# it: they are what changes between releases of one configuration.
CONFIGURATION = (
    "kind",
    "metric",
    "chip",
    "num_chips",
    "precision",
    "model",
    "hidden",
    "layers",
    "heads",
    "kv_heads",
    "head_dim",
    "ffn_hidden",
    "experts",
    "experts_per_token",
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "virtual_pipeline",
    "sequence_parallel",
    "recompute",
    "fsdp",
    "global_batch",
    "micro_batch",
    "seq_len",
    "batch",
    "input_len",
    "output_len",
    "kv_len",
    "m",
    "k",
    "n",
    "collective",
    "message_bytes",
)
# extra_params that are shapes: causality and pass of an attention kernel, the HPL problem,
# the request set of an offline-throughput run
SHAPE_KEYS = ("causal", "attn_pass", "hpl_n", "hpl_nb", "hpl_p", "hpl_q", "requests")
PROVENANCE = ("source_table", "source_row", "release")


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def header(path: Path) -> list[str]:
    with path.open(encoding="utf-8", newline="") as f:
        return next(csv.reader(f))


def side(row_id: str) -> str:
    """The written rule: CHECK when the first 8 hex digits of sha256(id) are 0 mod 3."""
    return "check" if int(hashlib.sha256(row_id.encode()).hexdigest()[:8], 16) % 3 == 0 else "fit"


def configuration(row: dict[str, str]) -> tuple[str, ...]:
    extra = dict(p.split("=", 1) for p in row["extra_params"].split(";") if "=" in p)
    return tuple(row[c].strip() for c in CONFIGURATION) + tuple(
        extra.get(k, "").strip() for k in SHAPE_KEYS
    )


def release_order(release: str) -> tuple[str, tuple[int, ...]] | None:
    """("NeMo", (25, 9)) for "NeMo 25.09": software and a numeric version; None when the
    version is not a dotted number (a commit, a paper)."""
    match = re.fullmatch(r"(.+) (\d+(?:\.\d+)*)", release.strip())
    if not match:
        return None
    return match.group(1), tuple(int(x) for x in match.group(2).split("."))


def anchor(family: list[tuple[str, dict[str, str]]]) -> str:
    """The family's earliest release where its releases compare (one software, numeric
    versions), then its smallest id; the smallest id when they do not compare. Rows measured
    here (ids M-...) anchor only a family of measured rows alone."""
    published = [(n, r) for n, r in family if not r["id"].startswith("M-")]
    family = published or family
    orders = [release_order(r["release"]) for _, r in family]
    ids = sorted(r["id"] for _, r in family)
    if all(orders) and len({o[0] for o in orders if o}) == 1:
        first = min(o[1] for o in orders if o)
        ids = sorted(r["id"] for (_, r), o in zip(family, orders) if o and o[1] == first)
    return ids[0]


def families() -> list[list[tuple[str, dict[str, str]]]]:
    groups: dict[tuple[str, ...], list[tuple[str, dict[str, str]]]] = defaultdict(list)
    for name, path in (("dev", DEV), ("fit", FIT), ("check", CHECK)):
        for r in rows(path):
            groups[configuration(r)].append((name, r))
    return list(groups.values())


def expected_side(family: list[tuple[str, dict[str, str]]]) -> str:
    """Dev rows are FIT (the chip files were fitted to them first): so is their family."""
    if any(name == "dev" for name, _ in family):
        return "fit"
    return side(anchor(family))


def test_public_files_share_the_dev_schema():
    assert header(FIT) == header(DEV) == header(CHECK)
    assert len(header(DEV)) == 50 and tuple(header(DEV)[-3:]) == PROVENANCE


def test_no_family_straddles_the_split():
    """Every family is wholly on one side: no configuration is fitted on one release and
    checked on another."""
    straddling = [
        sorted(r["id"] for _, r in fam)
        for fam in families()
        if len({"fit" if name == "dev" else name for name, _ in fam}) > 1
    ]
    assert not straddling


def test_every_family_is_on_the_side_of_its_anchor():
    wrong = [
        (sorted(r["id"] for _, r in fam), expected_side(fam))
        for fam in families()
        if any(("fit" if name == "dev" else name) != expected_side(fam) for name, _ in fam)
    ]
    assert not wrong


def test_the_families_of_several_rows():
    """The rule by hand on the families of this data: NeMo 25.09 and 25.11 of one layout
    (P-NEM31 / P-NEM23 both FIT; P-NEM30 / P-NEM22 both CHECK); the MI300X HBM copy of
    Azure's VM (P-MIC01) and of two GPUs of one run of AMD's acceptance guide (P-MIC02,
    P-MIC03): releases of different software, so the smallest id, P-MIC01, is CHECK."""
    by_id = {tuple(sorted(r["id"] for _, r in fam)): fam for fam in families() if len(fam) > 1}
    families_of_several = {
        ("P-NEM23", "P-NEM31"),
        ("P-NEM22", "P-NEM30"),
        ("P-MIC01", "P-MIC02", "P-MIC03"),
    }
    assert families_of_several <= set(by_id)
    assert anchor(by_id["P-NEM23", "P-NEM31"]) == "P-NEM31"  # NeMo 25.09 before 25.11
    assert side("P-NEM31") == "fit" and side("P-MIC01") == "check" and side("P-MIC03") == "fit"
    assert expected_side(by_id["P-MIC01", "P-MIC02", "P-MIC03"]) == "check"
    assert release_order("NeMo 26.04.01") == ("NeMo", (26, 4, 1))
    assert release_order("OpenXLA 71feeddf7c") is None


@pytest.mark.parametrize("path", [FIT, CHECK], ids=lambda p: p.name)
def test_every_public_row_records_its_table_row_and_release(path):
    for r in rows(path):
        for column in PROVENANCE:
            assert r[column].strip(), f"{r['id']}: {column} is empty"


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
