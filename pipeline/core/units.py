"""Sizes as people read them: in the unit that shows them (a few KB is never "0.00 GB")."""
from __future__ import annotations

#: Decimal units, as disks and ``df -H`` count.
_UNITS = ("kB", "MB", "GB", "TB", "PB")


def readable_bytes(count: float) -> str:
    """``count`` bytes as ``512 bytes``, ``65.5 kB``, ``3.2 MB``, ``1.5 GB`` ... (one decimal, decimal units)."""
    if count < 1000:
        return f"{int(count):,} bytes"
    value, unit = count / 1000, _UNITS[0]
    for bigger in _UNITS[1:]:
        if value < 999.95:
            break
        value, unit = value / 1000, bigger
    return f"{value:,.1f} {unit}"
