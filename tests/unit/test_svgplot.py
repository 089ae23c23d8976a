"""The report's SVG kit (mapshard/report/svgplot.py): scales and ticks by hand, and plots
that are byte-identical for the same plan."""

from __future__ import annotations

import pytest
from report_fixtures import inference_plan, training_plan

from mapshard.report import plots
from mapshard.report.svgplot import Scale, log_range, si_tick


def test_scales_map_by_hand() -> None:
    # log: 10 is one decade of two between 1 and 100 -> halfway between 0 and 200 px
    assert Scale(1, 100, 0, 200, log=True)(10) == pytest.approx(100)
    # a y axis runs upwards: 25 of 0..100 onto 300..100 px is 300 - 0.25 * 200 = 250
    assert Scale(0, 100, 300, 100)(25) == pytest.approx(250)


def test_ticks_by_hand() -> None:
    # 0..2.6: raw step 2.6 / 6 = 0.433 -> the next of 1-2-5 x 0.1 is 0.5
    assert Scale(0, 2.6, 0, 1).ticks() == pytest.approx([0, 0.5, 1.0, 1.5, 2.0, 2.5])
    # six decades: one tick per decade; under three decades 1-2-5 within each
    assert Scale(1, 1e6, 0, 1, log=True).ticks() == [10.0**d for d in range(7)]
    assert Scale(0.4, 9, 0, 1, log=True).ticks() == pytest.approx([0.5, 1, 2, 5])
    assert [si_tick(v) for v in (1e3, 2e9, 0.5, 1e15)] == ["1k", "2G", "0.5", "1P"]
    assert log_range([10, 1000], 2) == (5, 2000)


@pytest.mark.parametrize("make", [training_plan, inference_plan])
def test_plots_are_svg_and_byte_identical(make) -> None:
    plan = make()
    drawn = [plots.time_by_config_svg(plan), plots.time_by_class_svg(plan),
             plots.memory_svg(plan), plots.roofline_svg(plan, 2e12, "dram", 50e12)]  # fmt: skip
    again = [plots.time_by_config_svg(make()), plots.time_by_class_svg(make()),
             plots.memory_svg(make()), plots.roofline_svg(make(), 2e12, "dram", 50e12)]  # fmt: skip
    assert drawn == again
    assert all(s.startswith("<svg") and s.rstrip().endswith("</svg>") for s in drawn)
    assert all("nan" not in s for s in drawn)
