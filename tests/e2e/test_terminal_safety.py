"""Control characters in what the user wrote (a scenario name, a chip name, a CSV cell)
reach the terminal as visible escapes, never as escape sequences (which could clear the
screen or set the window title); MapShard's own bold headings stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from mapshard.cli import main
from mapshard.fmt import terminal_safe

EVIL = "evil\x1b]0;pwned\x07\x1b[2J\u202e"


def test_terminal_safe_escapes_every_control_but_its_own() -> None:
    assert (
        terminal_safe("a\x1b[2Jb\x07c\x9bd\u202ee\r\n\tf")
        == "a\\x1b[2Jb\\x07c\\x9bd\\u202ee\\r\n\tf"
    )
    own = "\x1b[1mMapShard plan\x1b[0m\r 1.0 s"
    assert terminal_safe(own, own_controls=True) == own
    assert terminal_safe("\x1b[1mx\x1b[2J", own_controls=True) == "\x1b[1mx\\x1b[2J"


@pytest.mark.parametrize("where", ["name", "chip"])
def test_a_setup_string_never_reaches_the_terminal_raw(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = EVIL if where == "name" else "ok"
    chip = EVIL if where == "chip" else "H100-SXM5-80GB"
    setup = tmp_path / "setup.txt"
    setup.write_text(
        f'name: "{name}"\nworkload {{ gemm {{ M: 64 K: 64 N: 64 }} }}\n'
        f'system {{ chip: "{chip}" num_chip: 1 }}\n',
        encoding="utf-8",
    )
    code = main(["run", str(tmp_path), "--out", str(tmp_path / "out"), "--no-sensitivity"])
    out, err = capsys.readouterr()
    assert code == (0 if where == "name" else 2)
    for text in (out, err):
        assert "\x1b]" not in text and "\x07" not in text and "\x1b[2J" not in text
        assert "\u202e" not in text
    assert "evil\\x1b]0;pwned\\x07\\x1b[2J\\u202e" in out + err
