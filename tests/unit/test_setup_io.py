"""Reading setup files: every failure names the file, and syntax errors its line:column.

A user with a 700-line DFModel setup needs to know where the problem is; protobuf's own
messages carry line:col but no file name, and some failures (empty file, wrong encoding,
a folder without setup.txt) never reach protobuf at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from schema import setup_pb2
from schema.errors import SetupError
from schema.setup_io import load_message, load_setup

VALID = """\
system {
  num_chip: 8
  memory {
    dram_bw: 2000
  }
}
workload {
  gemm {
    M: 64
    K: 64
    N: 64
  }
}
"""


def _write(tmp_path: Path, text: str | bytes, name: str = "setup.txt") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def _problems(scenario: Path) -> list[str]:
    with pytest.raises(SetupError) as info:
        load_setup(scenario)
    assert info.value.problems
    return info.value.problems


def test_valid_folder_and_file_load(tmp_path: Path) -> None:
    path = _write(tmp_path, VALID)
    for scenario in (tmp_path, path, str(path)):
        setup, loaded = load_setup(scenario)
        assert loaded == path
        assert setup.system.num_chip == 8
        assert setup.workload.gemm.K == 64


@pytest.mark.parametrize(
    "old, new, line_col, words",
    [
        ("  num_chip: 8\n", "  num_chip: 8;;\n", "2:15", "got ;"),
        ("  num_chip: 8\n", "  num_chip 8\n", "2:12", 'Expected ":"'),
        ("  num_chip: 8\n", '  num_chip: "eight"\n', "2:13", "integer"),
        ("    dram_bw: 2000\n", '    dram_bw: "fast"\n', "4:14", "float"),
        ("  num_chip: 8\n", "  num_chip: 8\n  num_chip: 16\n", "3:13", '"num_chip"'),
        ("  memory {\n", "  memory\n", "4:5", 'Expected "{"'),
        ("workload {", "system {\n}\nworkload {", "7:8", '"system"'),
        ("system {\n", 'name: "x\nsystem {\n', "1:7", "missing ending quote"),
    ],
    ids=["bad-token", "no-colon", "string-for-int", "string-for-double", "repeated-field",
         "no-open-brace", "repeated-message", "unterminated-string"],
)  # fmt: skip
def test_syntax_error_names_file_line_and_column(
    tmp_path: Path, old: str, new: str, line_col: str, words: str
) -> None:
    assert old in VALID
    path = _write(tmp_path, VALID.replace(old, new, 1))
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}:{line_col}: "), problem
    assert words in problem


def test_missing_closing_brace_at_end_of_file(tmp_path: Path) -> None:
    path = _write(tmp_path, VALID.rstrip().rstrip("}"))
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}:12:3: "), problem  # after the last token
    assert 'Expected "}"' in problem


def test_unknown_field_suggests_the_closest_name(tmp_path: Path) -> None:
    path = _write(tmp_path, VALID.replace("num_chip:", "num_chips:"))
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}:2:3: "), problem
    assert 'unknown field "num_chips" in System' in problem
    assert 'did you mean "num_chip"?' in problem
    assert "valid fields: chip, preset, num_chip" in problem


def test_unknown_enum_value_lists_the_valid_ones(tmp_path: Path) -> None:
    path = _write(tmp_path, VALID + "execution {\n  execution_style: FUSED\n}\n")
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}:15:20: "), problem
    assert "FUSED" in problem and "KERNEL_BY_KERNEL, DATAFLOW" in problem


@pytest.mark.parametrize("text", ["", "\n", "  \n\t\n"], ids=["empty", "newline", "blanks"])
def test_empty_file(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, text)
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}: ")
    assert "empty" in problem


@pytest.mark.parametrize(
    "data, line, byte",
    [
        (b'name: "caf\xe9"\n', 1, "0xe9"),
        (b"\x89PNG\r\n\x1a\n\x00", 1, "0x89"),
        (VALID.encode() + b"# \xff\n", 14, "0xff"),
    ],
    ids=["latin-1", "binary", "last-line"],
)
def test_non_utf8_file_names_line_and_byte(
    tmp_path: Path, data: bytes, line: int, byte: str
) -> None:
    path = _write(tmp_path, data)
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}:{line}: "), problem
    assert "UTF-8" in problem and byte in problem


def test_folder_without_setup_txt(tmp_path: Path) -> None:
    _write(tmp_path, VALID, name="notes.txt")
    (problem,) = _problems(tmp_path)
    assert problem.startswith(f"{tmp_path}: ")
    assert "no setup.txt" in problem


def test_setup_txt_that_is_a_folder(tmp_path: Path) -> None:
    (tmp_path / "setup.txt").mkdir()
    (problem,) = _problems(tmp_path)
    assert str(tmp_path) in problem and "no setup.txt" in problem


def test_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_scenario"
    (problem,) = _problems(missing)
    assert problem.startswith(f"{missing}: ")
    assert "no such file or folder" in problem


def test_every_message_is_one_line_naming_the_file(tmp_path: Path) -> None:
    broken = {
        "a.txt": VALID.replace("M: 64", "M: 6.4"),
        "b.txt": VALID.replace("gemm", "gem"),
        "c.txt": VALID + "}",
        "d.txt": 'system { chip: "\\xff" }',
        "e.txt": VALID.replace("K: 64", "K: 64 K: 32"),
    }
    for name, text in broken.items():
        path = _write(tmp_path, text, name=name)
        for problem in _problems(path):
            assert problem.startswith(f"{path}:"), problem
            assert "\n" not in problem


def test_load_message_reads_other_messages(tmp_path: Path) -> None:
    """Chip library entries use the same reader, with the same error format."""
    path = _write(tmp_path, 'name: "X1"\naccelerator {\n  freq: 1.5\n}\n', name="x1.txt")
    chip = load_message(path, setup_pb2.ChipSpec())
    assert chip.name == "X1" and chip.accelerator.freq == 1.5
    bad = _write(tmp_path, 'name: "X1"\naccelerator {\n  frq: 1.5\n}\n', name="x2.txt")
    with pytest.raises(SetupError) as info:
        load_message(bad, setup_pb2.ChipSpec())
    assert info.value.problems[0].startswith(f"{bad}:3:3: ")
    assert 'did you mean "freq"?' in info.value.problems[0]
