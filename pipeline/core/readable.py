"""Numbers written as people read them, in messages and help: sizes in their unit, bounds with thousands separators."""
from __future__ import annotations

#: Decimal size units, as disks and ``df -H`` count.
_SIZE_UNITS = ("kB", "MB", "GB", "TB", "PB")


def readable_bytes(count: float) -> str:
    """``count`` bytes in the unit that shows them: ``512 bytes``, ``65.5 kB``, ``3.2 MB``, ``1.5 GB`` (a few kB is
    never "0.00 GB")."""
    if count < 1000:
        return f"{int(count):,} bytes"
    value, unit = count / 1000, _SIZE_UNITS[0]
    for bigger in _SIZE_UNITS[1:]:
        if value < 999.95:
            break
        value, unit = value / 1000, bigger
    return f"{value:,.1f} {unit}"


def readable_number(value: float) -> str:
    """A bound as text: ``1,000`` for a whole number, else as written."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"
