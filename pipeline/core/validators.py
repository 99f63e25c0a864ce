"""Typed, range-checked settings, shared by the CLI flags (argparse ``type=``) and the baseline options.

Each validator takes the text a user typed and returns the value, or raises :class:`BadValue`
whose message says what was expected; argparse prints it as ``argument --flag: <message>``.
"""
from __future__ import annotations

import argparse
import datetime as dt
import math
import re
from typing import Any, Callable

from pipeline.core.errors import ConfigError

Validator = Callable[[Any], Any]


class BadValue(argparse.ArgumentTypeError):
    """A setting's text is not of its type or outside its range."""


def number(cast: type, what: str, low: float | None = None, high: float | None = None,
           low_open: bool = False, high_open: bool = False) -> Validator:
    """A validator reading ``cast`` within ``low``..``high`` (an ``*_open`` bound is excluded)."""

    def check(text: Any) -> Any:
        try:
            value = cast(str(text).strip())
        except ValueError:
            raise BadValue(f"{text!r} is not {what}") from None
        too_low = low is not None and (value < low or (low_open and value == low))
        too_high = high is not None and (value > high or (high_open and value == high))
        if not math.isfinite(value) or too_low or too_high:
            raise BadValue(f"{text!r} is not {what}")
        return value

    check.__name__ = what
    return check


def choice(*values: str) -> Validator:
    """A validator accepting exactly one of ``values``."""

    def check(text: Any) -> str:
        if str(text) not in values:
            raise BadValue(f"{text!r} is not one of {', '.join(values)}")
        return str(text)

    check.__name__ = "one of " + ", ".join(values)
    return check


positive_int = number(int, "a positive integer", low=1)
non_negative_int = number(int, "a non-negative integer", low=0)
positive_float = number(float, "a positive number", low=0, low_open=True)
non_negative_float = number(float, "a non-negative number", low=0)
#: A share strictly between 0 and 1 (e.g. the held-out share of queries).
fraction = number(float, "a fraction between 0 and 1 (both excluded)", 0, 1, low_open=True, high_open=True)
#: A number in [0, 1] (e.g. BM25's length normalisation b).
unit_interval = number(float, "a number from 0 to 1", 0, 1)
#: A share in (0, 1] (e.g. a detection threshold).
positive_share = number(float, "a number above 0 and at most 1", 0, 1, low_open=True)
seed = non_negative_int


def features_version(text: Any) -> str:
    """A features version: 16 hex digits."""
    if not re.fullmatch(r"[0-9a-f]{16}", str(text)):
        raise BadValue(f"{text!r} is not a features version (16 hex digits)")
    return str(text)


def iso_date(text: str) -> dt.date:
    """A day written YYYY-MM-DD."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise BadValue(f"{text!r} is not a date YYYY-MM-DD") from None


def checked(label: str, validator: Validator, text: Any) -> Any:
    """``validator(text)``, or a :class:`ConfigError` ``"<label>: <what was expected>"``."""
    try:
        return validator(text)
    except BadValue as exc:
        raise ConfigError(f"{label}: {exc}") from None


def date_range(first: dt.date, last: dt.date, first_name: str = "start", last_name: str = "end") -> list[dt.date]:
    """Every day from ``first`` to ``last``, both included; a ConfigError naming both when ``last`` is earlier."""
    if last < first:
        raise ConfigError(f"{last_name} {last} is before {first_name} {first}")
    return [first + dt.timedelta(days=k) for k in range((last - first).days + 1)]
