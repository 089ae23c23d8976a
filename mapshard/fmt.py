"""Number formatting shared by every report, so the same quantity reads the same everywhere.

Files meant for machines (CSV, JSON) keep full precision (`num`); text meant for people uses
engineering units with three significant digits.
"""

from __future__ import annotations

import math
import re


def finite(x: float | None) -> float | None:
    """The value, or None when missing or not finite (JSON has no NaN/inf)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def num(x: float | int | None) -> str:
    """Lossless, deterministic text for a CSV cell: ints as ints, floats as shortest repr."""
    if x is None:
        return ""
    if isinstance(x, bool):
        return str(int(x))
    if isinstance(x, int):
        return str(x)
    x = float(x)
    if not math.isfinite(x):
        return ""
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def sig(x: float, digits: int = 3) -> str:
    """`x` to `digits` significant digits in plain positional notation, never `1e+03` or
    `1e-05`: 4.7, 470, 1,234 (whole numbers past `digits` digits keep every digit), 0.00123."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    ax = abs(x)
    if ax >= 10**digits - 0.5:
        return f"{x:,.0f}"
    text = f"{x:.{digits}g}"
    if "e" not in text:
        return text
    places = min(digits - 1 - math.floor(math.log10(ax)), 15)
    return f"{x:.{places}f}"


def _scaled(x: float, units: tuple[tuple[float, str], ...], unit: str) -> str:
    """`x` in the largest unit it reaches (1000 of one unit reads as the next one up)."""
    ax = abs(x)
    for i, (scale, prefix) in enumerate(units):
        if ax >= scale * 0.9995 or i == len(units) - 1:
            value = x / scale
            if i > 0 and abs(value) >= 999.5:  # 1,000 MiB reads 0.977 GiB, never 1e+03 MiB
                scale, prefix = units[i - 1]
                value = x / scale
            return f"{sig(value)} {prefix}{unit}"
    raise AssertionError("unreachable: the last unit always matches")


_SI = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
_BIN = (
    (2.0**50, "Pi"),
    (2.0**40, "Ti"),
    (2.0**30, "Gi"),
    (2.0**20, "Mi"),
    (2.0**10, "Ki"),
    (1.0, ""),
)


#: Physical units that read better as 16.8 mJ than 0.0168 J (not counts such as tokens/s).
SMALL_PREFIXED = ("J", "W")
_SI_SMALL = ((1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"))


def fmt_time(seconds: float | None) -> str:
    """Seconds in s / ms / us / ns."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds == 0:
        return "0 s"
    if abs(seconds) >= 999.5:
        return f"{seconds:,.0f} s"
    units = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))
    for scale, name in units:
        if abs(seconds) >= scale * 0.9995:
            return f"{sig(seconds / scale)} {name}"
    return f"{sig(seconds / 1e-9)} ns"


def fmt_bytes(b: float | None) -> str:
    """Bytes in binary units (GiB etc.), as capacities are quoted; under 1 KiB whole bytes
    (a byte is not divided: an average below one reads "<1 B")."""
    if b is None or not math.isfinite(b):
        return "-"
    if abs(b) < 1023.5:
        if 0 < abs(b) < 0.5:
            return "<1 B" if b > 0 else ">-1 B"
        return f"{b:.0f} B"
    return _scaled(b, _BIN, "B")


def fmt_si(x: float | None, unit: str = "") -> str:
    """Decimal engineering notation: 1.23 TFLOP/s, 4.5 kW."""
    if x is None or not math.isfinite(x):
        return "-"
    if x == 0:
        return f"0 {unit}".strip()
    if abs(x) < 1 and unit in SMALL_PREFIXED:
        return _scaled(x, _SI_SMALL, unit)
    if abs(x) < 1:
        return f"{sig(x)} {unit}".strip()
    return _scaled(x, _SI, unit)


def fmt_money(usd: float | None) -> str:
    """Dollars for people: "$116,800" below a million, "$17.8 M" / "$1.2 B" above; a price
    the library does not know (None, 0) reads "not priced"."""
    if usd is None or not math.isfinite(usd) or usd == 0:
        return "not priced"
    sign, ax = ("-" if usd < 0 else ""), abs(usd)
    if ax >= 999.5e6:
        return f"{sign}${sig(ax / 1e9)} B"
    if ax >= 999_999.5:
        return f"{sign}${sig(ax / 1e6)} M"
    return f"{sign}${ax:,.0f}"


def fmt_ratio(x: float | None) -> str:
    """A ratio as a multiplier: "x4.7", "x47", "x470", "x1,700"; "-" when undefined."""
    if x is None or not math.isfinite(x):
        return "-"
    return f"x{sig(x, 2)}"


def fmt_pct(x: float | None) -> str:
    """A fraction in percent, one decimal; a small non-zero share reads "<0.1%", not 0.0%."""
    if x is None or not math.isfinite(x):
        return "-"
    if 0 < abs(x) < 0.0005:
        return "<0.1%" if x > 0 else ">-0.1%"
    return f"{100 * x:,.1f}%"


#: The DFModel notebook's kernel-class codes (M/V: matrix or vector operand; a/w/qa:
#: activation, weight, attention query/KV) in words, for chart labels.
KERNEL_CLASS_WORDS = {
    "Ma_Mw": "GEMM (activations x weights)",
    "Va_Mw": "GEMV (token vectors x weights)",
    "Ma_Ma": "GEMM (activations x activations)",
    "Ma_Mqa": "attention (prefill)",
    "Va_Mqa": "attention (decode)",
    "Va_Va": "elementwise / norm",
    "Vw_Va": "embedding / weighted elementwise",
    "Async_KVCache": "KV-cache write",
}
#: kernel kinds whose class says less than the kind (generator.graph.KernelKind): MoE
#: top-k, dispatch and combine read as element-wise by their operands but are the routing
#: (dispatch and combine carry the expert-parallel all-to-all)
KIND_WORDS = {"ROUTER": "MoE routing (top-k, dispatch / combine all-to-all)"}


def kernel_class_label(code: str, kind: str = "") -> str:
    """A kernel class for people: "GEMV (token vectors x weights)", the MoE routing
    kernels by their kind; unknown codes as given, no code (a DFModel graph's kernels) the
    kind."""
    return KIND_WORDS.get(kind) or KERNEL_CLASS_WORDS.get(code, code) or kind


#: the only escape sequences MapShard itself prints (report/terminal.py's bold headings)
BOLD_ON, BOLD_OFF = "\033[1m", "\033[0m"
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_OWN = re.compile(f"({re.escape(BOLD_ON)}|{re.escape(BOLD_OFF)}|\r)")


def terminal_safe(text: str, own_controls: bool = False) -> str:
    """`text` with every control character (escape sequences, bells, bidi overrides)
    written as a visible escape, so a name in a setup (a chip, a kernel) cannot clear the
    screen or set the window title. Newlines and tabs stay; with `own_controls` so do the
    controls MapShard itself prints (bold headings, the progress line's carriage return)."""
    if own_controls:
        return "".join(p if _OWN.fullmatch(p) else terminal_safe(p) for p in _OWN.split(text))
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
