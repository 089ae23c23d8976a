"""Chip tables (hardware/chip_table.py): every malformed cell, column or row is a one-line
error naming the file and row, and nothing but number-like cells is ever echoed."""

from __future__ import annotations

from pathlib import Path

import pytest

from hardware import chip_table
from schema.errors import SetupError


def test_chip_table_errors_name_file_row_and_column(tmp_path: Path):
    path = tmp_path / "chips.csv"
    path.write_text("name,bf16_tflop,memory_gb\nA,1,-3\nA,2,4\n,1,1\nB,x,1\n")
    with pytest.raises(SetupError) as info:
        chip_table.load_chip_table(path)
    text = "\n".join(info.value.problems)
    assert f'{path}:1: unknown column "bf16_tflop"; did you mean "bf16_tflops"?' in text
    assert f"{path}:2: column memory_gb must be a number in 0..1e+09, got '-3'" in text
    assert f'{path}:3: chip "A" is already defined on row 2' in text
    assert f"{path}:4: column name is empty" in text


# ---------------------------------------------------------------------------------------
# Errors: every problem, with file and field path, in one SetupError
# ---------------------------------------------------------------------------------------


def test_chip_table_refuses_out_of_range_numbers_and_echoes_no_foreign_text(tmp_path: Path):
    """1e30 cores would overflow the protobuf integer, 1e300 TFLOP/s an infinite peak; a
    table path pointing at some other file must not print that file's first line."""
    path = tmp_path / "chips.csv"
    path.write_text("name,cores,bf16_tflops\nA,1e30,1\nB,8,1e300\n")
    with pytest.raises(SetupError) as info:
        chip_table.load_chip_table(path)
    text = "\n".join(info.value.problems)
    assert f"{path}:2: column cores must be a whole number in 0..2.14748e+09" in text
    assert f"{path}:3: column bf16_tflops must be a number in 0..1e+09" in text
    secret = tmp_path / "secret.csv"
    secret.write_text("root:x:0:0:root:/root:/bin/bash,name\n")
    with pytest.raises(SetupError) as info:
        chip_table.load_chip_table(secret)
    text = "\n".join(info.value.problems)
    assert "root:x" not in text and "unknown column 1 (not a name)" in text


def test_chip_table_refuses_repeated_columns_stray_cells_and_echoes_no_text_cell(tmp_path: Path):
    """A column named twice (the second would silently win), a cell beyond the header and a
    non-numeric cell (a name or a secret pasted by mistake: not printed) are each an error."""
    path = tmp_path / "chips.csv"
    path.write_text("name,cores,Cores\nA,8,16\n")
    with pytest.raises(
        SetupError, match=r"chips.csv:1: column cores appears twice \(columns 2 and 3"
    ):
        chip_table.load_chip_table(path)
    path.write_text("name,cores\nA,8,99\nB,4\n")
    with pytest.raises(SetupError, match=r"chips.csv:2: 1 cell\(s\) beyond the header's 2 columns"):
        chip_table.load_chip_table(path)
    path.write_text("name,cores\nA,ghp_SECRETTOKEN123\n")
    with pytest.raises(SetupError) as info:
        chip_table.load_chip_table(path)
    text = "\n".join(info.value.problems)
    assert "SECRET" not in text and "got text of 18 characters" in text
