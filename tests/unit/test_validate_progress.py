"""`mapshard validate` says which row it is predicting (issue #38: it printed nothing for
minutes): validate_cases calls back before every row, in order, and the heartbeat line names
the row, its kind and how many there are."""

from __future__ import annotations

import io
import time
from pathlib import Path

from mapshard.fidelity.cases import Case
from mapshard.progress import Progress
from mapshard.validate_cases import row_progress, validate_cases


def case(row_id: str) -> Case:
    # usable=0: validate_case returns at once with the skip reason, no prediction
    return Case({"id": row_id, "kind": "gemm", "usable": "0", "notes": "reference only."})


def test_the_callback_sees_every_row_in_order():
    seen: list[tuple[int, str]] = []
    cases = [case("A1"), case("A2"), case("A3")]
    outcomes = validate_cases(cases, Path("."), lambda i, c: seen.append((i, c.id)))
    assert seen == [(0, "A1"), (1, "A2"), (2, "A3")]
    assert [o.id for o in outcomes] == ["A1", "A2", "A3"]
    assert outcomes[0].reason == "skipped: usable=0 (reference only)"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_heartbeat_names_the_row_and_the_count(monkeypatch):
    err = Tty()
    monkeypatch.setattr("sys.stderr", err)
    want = "predicting row 12 of 327: M-H200-L012 (gemm)"
    with Progress(delay_s=0.0) as progress:
        row_progress(progress, 327, "predicting")(11, case("M-H200-L012"))
        # the heartbeat writes every 0.5 s: wait for it (however loaded the machine), only
        # the line's text is checked
        deadline = time.monotonic() + 60
        while want not in err.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert want in err.getvalue()
