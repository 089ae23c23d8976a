"""Every extra_params key of a validation row is known, and only the setup keys shape the
scenario (issue #35): an unknown key stops `mapshard validate` with one line naming the
valid keys; a convention, setting or record key never changes the setup a row implies."""

from __future__ import annotations

import csv
import re
from dataclasses import replace
from pathlib import Path

import pytest

from mapshard.cli import EXIT_BAD_INPUT, main
from mapshard.fidelity.cases import Unmodelable, read_cases
from mapshard.fidelity.row_keys import SETTINGS, SETUP_KEYS, key_kind, valid_keys
from mapshard.fidelity.row_settings import check_settings
from mapshard.fidelity.scenarios import build_setup
from schema.errors import SetupError

DATA = Path(__file__).parents[1] / "data" / "validation"
FILES = [DATA / f"validation_{n}.csv" for n in ("dev_structured", "public_fit", "public_check")]
SCHEMA = DATA / "VALIDATION_SCHEMA.md"
# kinds whose rows `validate` builds a setup for
SETUP_KINDS = (
    "gemm",
    "hpl",
    "training_step",
    "inference_prefill",
    "inference_static_batch",
    "layer_prefill",
    "layer_decode",
)


def one_row_csv(tmp_path: Path, extra: str) -> Path:
    """The dev file's header and its row K01 with `extra` as its extra_params."""
    with FILES[0].open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        header = list(reader.fieldnames or [])
        k01 = next(r for r in reader if r["id"] == "K01")
    path = tmp_path / "cases.csv"
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, header, lineterminator="\n")
        writer.writeheader()
        writer.writerow({**k01, "extra_params": extra})
    return path


def test_a_misspelt_key_is_one_line_naming_the_valid_keys(tmp_path):
    path = one_row_csv(tmp_path, "overlap_grad_reduc=0")
    with pytest.raises(SetupError) as info:
        read_cases(path)
    (problem,) = info.value.problems
    assert "\n" not in problem
    assert "line 2: K01: extra_params key 'overlap_grad_reduc' is not known" in problem
    assert "did you mean overlap_grad_reduce?" in problem
    assert ", ".join(valid_keys()) in problem


def test_validate_refuses_the_file_with_exit_2(tmp_path, capsys):
    path = one_row_csv(tmp_path, "optimiser=distributed_fused_adam")
    code = main(["validate", str(path), "--out", str(tmp_path / "out"), "--single-pass"])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT
    assert "Traceback" not in err
    assert err.count("error:") == 1 and "'optimiser' is not known" in err
    assert "did you mean optimizer?" in err


def test_every_key_of_the_shipped_rows_is_known():
    for path in FILES:
        for case in read_cases(path):  # raises on an unknown key
            assert all(key_kind(k) for k in case.extra), case.id


def test_a_setting_the_model_does_not_run_names_itself():
    case = next(c for c in read_cases(FILES[1]) if c.id == "P-TTN02")
    assert case.extra["compile"] == "1"
    with pytest.raises(Unmodelable, match="compile=1"):
        check_settings(replace(case, cells={**case.cells, "usable": "1"}))
    assert SETTINGS["compile"] == ("0",)


def test_only_setup_keys_shape_the_setup():
    """For every row validate builds a setup for, dropping every key that is not a setup key
    leaves the setup unchanged: conventions, settings and records are never read into it."""
    built = 0
    for path in FILES:
        for case in read_cases(path):
            if not case.usable or case.kind not in SETUP_KINDS:
                continue
            setup_only = {k: v for k, v in case.extra.items() if k in SETUP_KEYS}
            assert build_setup(case)[0] == build_setup(replace(case, extra=setup_only))[0], case.id
            built += 1
    assert built > 100


def test_the_schema_documents_every_key():
    """VALIDATION_SCHEMA.md's extra_params table names every key the reader knows."""
    text = SCHEMA.read_text(encoding="utf-8")
    table = text[text.index("## `extra_params` keys") :]
    documented = set(re.findall(r"`([A-Za-z0-9_]+\*?)`", table))
    documented |= {f"{m}*" for m in re.findall(r"`([a-z]+_)<", table)}
    missing = [k for k in valid_keys() if k not in documented]
    assert not missing
