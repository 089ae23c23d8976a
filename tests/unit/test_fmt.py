"""The one number formatter (mapshard/fmt.py): hand-written expected strings over a range of
magnitudes, zero, negatives where a quantity can be negative, and inf/NaN/None, so no
report prints `1e+03 MiB`, `0.000733 B`, `x4.7e+02` or `1.77572e+07 $`."""

from __future__ import annotations

import math

import pytest

from mapshard.fmt import (
    fmt_bytes,
    fmt_money,
    fmt_pct,
    fmt_ratio,
    fmt_si,
    fmt_time,
    kernel_class_label,
    sig,
)

MISSING = (None, math.inf, -math.inf, math.nan)


@pytest.mark.parametrize(
    ("x", "want"),
    [
        (0.0, "0"),
        (4.7, "4.7"),
        (470.0, "470"),
        (999.4, "999"),
        (999.6, "1,000"),
        (1234.5, "1,234"),  # whole numbers past three digits keep every digit
        (17757184.0, "17,757,184"),
        (0.00123, "0.00123"),
        (0.0000123, "0.0000123"),
        (-4.71, "-4.71"),
        (-1234.0, "-1,234"),
    ],
)
def test_sig_is_positional(x: float, want: str) -> None:
    assert sig(x) == want


@pytest.mark.parametrize(
    ("seconds", "want"),
    [
        (0.0, "0 s"),
        (7.32e-3, "7.32 ms"),
        (5.82e-6, "5.82 us"),
        (45.2e-9, "45.2 ns"),
        (1.0, "1 s"),
        (74.4, "74.4 s"),
        (999.4, "999 s"),
        (8892.0, "8,892 s"),
        (1.2e7, "12,000,000 s"),
        (-2.5e-3, "-2.5 ms"),
    ],
)
def test_time(seconds: float, want: str) -> None:
    assert fmt_time(seconds) == want


@pytest.mark.parametrize(
    ("b", "want"),
    [
        (0, "0 B"),
        (0.000733, "<1 B"),  # a byte is not divided
        (0.6, "1 B"),
        (723.4, "723 B"),
        (1023.4, "1023 B"),
        (1024, "1 KiB"),
        (2.08 * 2**20, "2.08 MiB"),
        (1000 * 2**20, "0.977 GiB"),  # never 1e+03 MiB
        (1023.9 * 2**20, "1 GiB"),
        (2**30, "1 GiB"),
        (16 * 2**30, "16 GiB"),
        (80e9, "74.5 GiB"),
        (1.5 * 2**50, "1.5 PiB"),
        (-3 * 2**20, "-3 MiB"),
    ],
)
def test_bytes_are_binary_and_whole(b: float, want: str) -> None:
    assert fmt_bytes(b) == want


@pytest.mark.parametrize(
    ("x", "unit", "want"),
    [
        (0, "tokens/s", "0 tokens/s"),
        (8160.0, "tokens/s", "8.16 ktokens/s"),
        (1.09e3, "", "1.09 k"),
        (989e12, "FLOP/s", "989 TFLOP/s"),
        (999.7e3, "B/s", "1 MB/s"),
        (3.35e12, "B/s", "3.35 TB/s"),
        (124.4e9, "FLOP", "124 GFLOP"),
        (3.85e19, "FLOP", "38.5 EFLOP"),
        (3.85e22, "FLOP", "38,500 EFLOP"),
        (700.0, "W", "700 W"),
        (0.0168, "J", "16.8 mJ"),
        (4.55, "J", "4.55 J"),
        (0.5, "tokens/s", "0.5 tokens/s"),
        (0.0000123, "", "0.0000123"),
        (-2500.0, "W", "-2.5 kW"),
    ],
)
def test_si_rates_and_sizes(x: float, unit: str, want: str) -> None:
    assert fmt_si(x, unit) == want


@pytest.mark.parametrize(
    ("usd", "want"),
    [
        (116_800.0, "$116,800"),
        (17_757_184.0, "$17.8 M"),  # never 1.77572e+07 $
        (999.4, "$999"),
        (35.0, "$35"),
        (1_250_000_000.0, "$1.25 B"),
        (-1200.0, "-$1,200"),
        (0.0, "not priced"),
    ],
)
def test_money(usd: float, want: str) -> None:
    assert fmt_money(usd) == want


@pytest.mark.parametrize(
    ("x", "want"),
    [
        (4.71, "x4.7"),
        (1.0, "x1"),
        (0.5, "x0.5"),
        (47.2, "x47"),
        (470.3, "x470"),  # never x4.7e+02
        (1700.0, "x1,700"),
        (0.0, "x0"),
    ],
)
def test_ratio(x: float, want: str) -> None:
    assert fmt_ratio(x) == want


@pytest.mark.parametrize(
    ("x", "want"),
    [(0.0, "0.0%"), (0.199, "19.9%"), (0.0001, "<0.1%"), (-0.0001, ">-0.1%"), (12.5, "1,250.0%")],
)
def test_pct(x: float, want: str) -> None:
    assert fmt_pct(x) == want


@pytest.mark.parametrize("x", MISSING)
def test_missing_values_read_as_such(x: float | None) -> None:
    assert fmt_time(x) == "-" and fmt_bytes(x) == "-" and fmt_si(x, "W") == "-"
    assert fmt_pct(x) == "-" and fmt_ratio(x) == "-"
    assert fmt_money(x) == "not priced"


def test_moe_routing_kernels_are_not_elementwise() -> None:
    # dispatch/combine are element-wise by their operands (Va_Va), MoE routing by kind
    assert kernel_class_label("Va_Va", "ROUTER").startswith("MoE routing")
    assert kernel_class_label("Va_Va", "NORM") == "elementwise / norm"
    assert kernel_class_label("Ma_Mw", "BATCHED_GEMM") == "GEMM (activations x weights)"
    assert kernel_class_label("Va_Mw", "BATCHED_GEMM").startswith("GEMV")
    assert kernel_class_label("Xyz") == "Xyz"
    assert kernel_class_label("", "GEMM") == "GEMM"  # a DFModel graph's kernels: no code
