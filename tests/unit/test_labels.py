"""Labels a reader can trust (#17): one formatter per unit, EP that says where its chips
are, "<0.1%" instead of a rounded-away 0.0%."""

from __future__ import annotations

import dataclasses

from report_fixtures import inference_plan

from mapshard.fmt import fmt_bytes, fmt_pct, fmt_si, fmt_time
from mapshard.report.summary import parallelism_text
from mapshard.report.terminal import format_summary


def test_units_by_one_helper() -> None:
    assert fmt_bytes(2.01) == "2 B"  # a byte is not divided (#38)
    assert fmt_bytes(3 * 2**20) == "3 MiB"  # never "1.91e-06 MiB"
    assert fmt_bytes(16.7 * 2**30) == "16.7 GiB"
    assert fmt_time(6.78e-3) == "6.78 ms" and fmt_time(6e-6) == "6 us"
    assert fmt_si(0.0168427520, "J") == "16.8 mJ"  # 500 W x 33.69 us
    assert fmt_si(4.74, "J") == "4.74 J" and fmt_si(7710, "J") == "7.71 kJ"
    assert fmt_si(0.5, "tokens/s") == "0.5 tokens/s"  # counts keep no milli prefix
    assert fmt_pct(0.0002) == "<0.1%" and fmt_pct(0.0) == "0.0%" and fmt_pct(0.199) == "19.9%"


def test_ep_over_the_tp_chips_is_not_a_copy_of_tp() -> None:
    plan = dataclasses.replace(
        inference_plan(), parallelism={"tp": 8, "pp": 1, "dp": 1, "ep": 8}, placement={}
    )
    text = parallelism_text(plan)
    assert text == "TP 8 PP 1 DP 1 EP 8 (experts over the TP chips) CP 1"
    assert "EP 8 (experts over the TP chips)" in format_summary(plan, color=False)
    own_level = dataclasses.replace(
        plan, parallelism={"tp": 2, "ep": 4}, placement={"ep": "scale_up:4", "tp": "x:2"}
    )
    assert parallelism_text(own_level, "", skip_ones=True) == "TP2 EP4"
