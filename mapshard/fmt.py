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


def _scaled(x: float, units: tuple[tuple[float, str], ...], unit: str) -> str:
    ax = abs(x)
    for scale, prefix in units:
        if ax >= scale * 0.9995:
            return f"{x / scale:.3g} {prefix}{unit}"
    scale, prefix = units[-1]
    return f"{x / scale:.3g} {prefix}{unit}"


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
        return f"{seconds:.0f} s"
    units = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))
    for scale, name in units:
        if abs(seconds) >= scale * 0.9995:
            return f"{seconds / scale:.3g} {name}"
    return f"{seconds / 1e-9:.3g} ns"


def fmt_bytes(b: float | None) -> str:
    """Bytes in binary units (GiB etc.), as capacities are quoted."""
    if b is None or not math.isfinite(b):
        return "-"
    if b == 0:
        return "0 B"
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
        return f"{x:.3g} {unit}".strip()
    return _scaled(x, _SI, unit)


def fmt_pct(x: float | None) -> str:
    """A fraction in percent, one decimal; a small non-zero share reads "<0.1%", not 0.0%."""
    if x is None or not math.isfinite(x):
        return "-"
    if 0 < abs(x) < 0.0005:
        return "<0.1%" if x > 0 else ">-0.1%"
    return f"{100 * x:.1f}%"


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


def kernel_class_label(code: str) -> str:
    """A kernel class for people: "GEMV (token vectors x weights)"; unknown codes as given."""
    return KERNEL_CLASS_WORDS.get(code, code)


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
