"""The one way a page shows a number (points, scores, rewards, rates).

Every template filter and every table builder goes through `format_number`, so that a check's
points read the same in the dry run, the grade page, the preview and the review page.
"""

from __future__ import annotations

import math

MISSING = "–"


def format_number(value, digits: int = 2, *, fixed: bool = False) -> str:
    """`value` rounded to `digits` decimals: trailing zeros dropped (2.50 → "2.5", 3.0 → "3")
    unless `fixed`; never "-0" (an unmatched penalty awards -8 × 0 = -0.0); None or "" → "–"."""
    if value is None or value == "":
        return MISSING
    number = float(value)
    if not math.isfinite(number):
        return str(number)
    digits = max(0, int(digits))
    # Adding 0.0 turns -0.0 (and anything that rounds to it) into 0.0.
    rounded = round(number, digits) + 0.0
    if abs(rounded) >= 1e15:
        return f"{rounded:.3g}"
    text = f"{rounded:.{digits}f}"
    if not fixed and "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def format_percent(value, digits: int = 0) -> str:
    """A fraction in [0, 1] as a percentage: 0.25 → "25 %"."""
    if value is None or value == "":
        return MISSING
    return f"{format_number(100 * float(value), digits, fixed=True)} %"
