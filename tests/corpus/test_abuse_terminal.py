"""Abuse corpus, terminal safety (issue #36 class 5): control and bidi characters (ESC
sequences, BEL, CR, C1 controls, U+202E, U+0001..U+001F) in chip, kernel, model and file
names, in a seeded random family, never reach the terminal raw from run, validate, compare
or sweep, and an error stays one line."""

from __future__ import annotations

import random
import re
import unicodedata
from pathlib import Path

import pytest
from test_abuse_inputs import CHAIN, GEMM, MODEL_SETUP, scenario

from mapshard.cli import EXIT_BAD_INPUT, main

CONTROLS = [chr(c) for c in range(1, 32)] + ["\x7f", "\x9b", "\x85", "\u202e", "\u2066",
                                             "\u200f", "\x1b]0;pwned\x07", "\x1b[2J"]  # fmt: skip
OWN_SGR = re.compile(r"\x1b\[[0-9;]*m")  # MapShard's own bold and colours
BIDI = {"\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068",
        "\u2069", "\u200e", "\u200f", "\u061c"}  # fmt: skip


def raw_controls(text: str) -> list[str]:
    """Control and bidi characters in text, apart from newlines, tabs and MapShard's SGR."""
    text = OWN_SGR.sub("", text)
    return sorted(
        {c for c in text if c not in "\n\t" and (unicodedata.category(c) == "Cc" or c in BIDI)}
    )


def evil(rng: random.Random, for_path: bool = False) -> str:
    picks = rng.sample(CONTROLS, 4)
    if for_path:
        picks = [c.replace("/", "") for c in picks]
    return "n" + "".join(picks) + "e"


def proto_string(text: str) -> str:
    """text as a protobuf text-format string literal (controls as \\x escapes)."""
    return "".join(
        f"\\x{ord(c):02x}" if ord(c) < 0x20 or c in "\x7f" else "\\" + c if c in '"\\' else c
        for c in text
    )


def _terminal_case(kind: str, rng: random.Random, tmp_path: Path) -> list[str]:
    """The command line of one case (its inputs written under tmp_path)."""
    bad = evil(rng)
    lit = proto_string(bad)
    out = str(tmp_path / "out")
    if kind == "chip":
        text = GEMM.replace("H100-SXM5-80GB", lit)
        return ["run", str(scenario(tmp_path / "sc", text)), "--out", out, "--quiet"]
    if kind == "kernel":
        text = CHAIN.replace('name: "a"', f'name: "{lit}"')
        text += f'execution {{ pin {{ phase: "{lit}x" kernel: "{lit}" }} }}\n'
        return ["run", str(scenario(tmp_path / "sc", text)), "--out", out, "--quiet"]
    if kind == "model":
        text = MODEL_SETUP.format(model=lit)
        return ["run", str(scenario(tmp_path / "sc", text)), "--out", out, "--quiet"]
    if kind == "name":
        text = f'name: "{lit}"\n' + GEMM
        return ["run", str(scenario(tmp_path / "sc", text)), "--out", out, "--no-sensitivity"]
    folder = tmp_path / evil(rng, for_path=True)
    if kind == "scenario_path":
        return ["run", str(scenario(folder, GEMM + "bogus: 1\n")), "--out", out, "--quiet"]
    if kind == "out_path":
        (tmp_path / "mine").mkdir()
        (tmp_path / "mine" / "f").write_text("x")
        return ["run", str(scenario(tmp_path / "sc", GEMM)), "--out", str(tmp_path / "mine"),
                "--quiet"]  # fmt: skip
    if kind == "validate":
        folder.mkdir()
        (folder / "cases.csv").write_text(f"id,kind\n{bad.replace(',', '')},gemm\n")
        return ["validate", str(folder / "cases.csv"), "--out", out, "--quiet"]
    if kind == "compare":
        return ["compare", str(folder), str(tmp_path / "nowhere"), "--out", out]
    folder.mkdir()
    (folder / "sweep.txt").write_text(
        "inline { " + GEMM + " }\n" + f'axis {{ field: "{lit}" values: ["1"] }}\n',
        encoding="utf-8",
    )
    return ["sweep", str(folder / "sweep.txt"), "--out", out, "--quiet"]


TERMINAL_KINDS = ["chip", "kernel", "model", "name", "scenario_path", "out_path", "validate",
                  "compare", "sweep"]  # fmt: skip


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("kind", TERMINAL_KINDS)
def test_no_raw_control_character_reaches_the_terminal(
    kind: str, seed: int, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(f"terminal-{kind}-{seed}")
    args = _terminal_case(kind, rng, tmp_path)
    code = main(args)
    stdout, stderr = capfd.readouterr()
    assert "Traceback" not in stdout + stderr
    assert code in (0, EXIT_BAD_INPUT), (code, stderr)
    assert raw_controls(stdout) == [] and raw_controls(stderr) == [], (stdout, stderr)
    if code:
        assert all(line.startswith("error: ") for line in stderr.splitlines()), stderr


def test_raw_controls_finds_what_it_must() -> None:
    assert raw_controls("ok \x1b[1mbold\x1b[0m\n\t") == []
    assert raw_controls("a\x1b]0;x\x07b\u202ec\x9b") == ["\x07", "\x1b", "\x9b", "\u202e"]
