"""Typed, range-checked settings, shared by the CLI flags (argparse ``type=``), the environment and the baseline
options.

Each validator takes the text a user typed and returns the value, or raises :class:`BadValue`
whose message says what was expected; argparse prints it as ``argument --flag: <message>``.
"""
from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import re
from typing import Any, Callable, Mapping

from pipeline.core.errors import ConfigError
from pipeline.core.readable import readable_number

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
    # the upper bound as a flag's help states it (None: unbounded)
    check.cap = None if high is None else f"{'below' if high_open else 'at most'} {readable_number(high)}"  # type: ignore[attr-defined]
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
#: The longest wait a flag may ask for: one day (a sleep or timeout past it is a typo, and 1e10 s overflows).
MAX_SECONDS = 86_400


def seconds(what: str = "a number of seconds") -> Validator:
    """A validator of a duration above 0 and at most :data:`MAX_SECONDS`."""
    return number(float, f"{what} above 0 and at most {MAX_SECONDS:,}", 0, MAX_SECONDS, low_open=True)


#: This machine's cores: the bound of every thread and process count.
CORES = os.cpu_count() or 1


def up_to(high: int, what: str = "a whole number") -> Validator:
    """A validator of an integer from 1 to ``high`` (a documented hard limit or the machine's)."""
    return number(int, f"{what} from 1 to {high:,}", 1, high)


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


#: Tracking-store schemes MLflow accepts (a path without a scheme is a local file store).
MLFLOW_SCHEMES = ("sqlite", "file", "http", "https", "postgresql", "mysql", "mssql", "databricks")


def tracking_uri(text: Any) -> str:
    """An MLflow tracking URI: one of :data:`MLFLOW_SCHEMES`, or a local path."""
    value = str(text).strip()
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", value)
    if not value or (scheme and scheme.group(1).split("+")[0].lower() not in MLFLOW_SCHEMES):
        raise BadValue(f"{text!r} is not an MLflow tracking URI ({', '.join(s + '://' for s in MLFLOW_SCHEMES)} "
                       "or a local path)")
    return value


def store_root(text: Any) -> str:
    """A store root: a local directory, or ``s3://bucket[/prefix]`` with a valid bucket name (anything else
    starting ``s3:`` is refused, never taken for a local folder named ``s3:``)."""
    value = str(text).strip()
    if value.lower().startswith("s3:"):
        bucket = value[len("s3://"):].split("/", 1)[0] if value.startswith("s3://") else ""
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
            raise BadValue(f"{text!r} is not an S3 store: write s3://bucket[/prefix], the bucket 3-63 lowercase "
                           "letters, digits, dots or hyphens")
    elif not value:
        raise BadValue(f"{text!r} is not a store (a directory or s3://bucket[/prefix])")
    return value


def scheduler_address(text: Any) -> str:
    """A Dask scheduler address: ``[tcp|tls|ucx|inproc]://host:port`` or ``host:port`` (empty = a local cluster)."""
    value = str(text).strip()
    if value and not re.fullmatch(r"((tcp|tls|ucx|inproc)://)?[\w.\-\[\]:]+:\d{1,5}", value):
        raise BadValue(f"{text!r} is not a Dask scheduler address (tcp://host:port)")
    return value


def name_text(what: str) -> Validator:
    """A validator of a non-blank name of at most 250 characters without control characters."""

    def check(text: Any) -> str:
        value = str(text)
        if not value.strip() or len(value) > 250 or any(ord(c) < 32 for c in value):
            raise BadValue(f"{text!r} is not {what} (1-250 printable characters)")
        return value

    check.__name__ = what
    return check


port = number(int, "a port number from 1 to 65535", 1, 65535)


def checked(label: str, validator: Validator, text: Any) -> Any:
    """``validator(text)``, or a :class:`ConfigError` ``"<label>: <what was expected>"``."""
    try:
        return validator(text)
    except BadValue as exc:
        raise ConfigError(f"{label}: {exc}") from None


def env_setting(name: str, default: str, validator: Validator, env: Mapping[str, str] | None = None) -> Any:
    """The environment variable ``name`` (``default`` when unset) through ``validator``; a bad value is one
    :class:`ConfigError` line naming the variable, never a traceback where it is read (a DAG file, a rank)."""
    return checked(name, validator, (os.environ if env is None else env).get(name, default).strip())


def cron_or_empty(text: Any) -> str:
    """A five-field cron expression (``0 3 * * 1``), or empty for none."""
    from croniter import croniter  # installed with Airflow, which reads the expression

    value = str(text).strip()
    if value and not croniter.is_valid(value):
        raise BadValue(f"{text!r} is not a cron expression (five fields, e.g. '0 3 * * 1') nor empty")
    return value


def dist_init(text: Any) -> str:
    """A torch.distributed init method: ``env://``, ``tcp://host:port`` or ``file:///path``."""
    value = str(text).strip()
    if not re.fullmatch(r"env://|tcp://[\w.\-\[\]:]+:\d{1,5}|file:///\S+", value):
        raise BadValue(f"{text!r} is not an init method (env://, tcp://host:port or file:///path)")
    return value


def date_range(first: dt.date, last: dt.date, first_name: str = "start", last_name: str = "end") -> list[dt.date]:
    """Every day from ``first`` to ``last``, both included; a ConfigError naming both when ``last`` is earlier."""
    if last < first:
        raise ConfigError(f"{last_name} {last} is before {first_name} {first}")
    return [first + dt.timedelta(days=k) for k in range((last - first).days + 1)]


#: The runtimes of MiniLM's CPU inference (``DEEPSENT_MINILM_RUNTIME``; empty: OpenVINO when installed, else torch).
MINILM_RUNTIMES = ("openvino", "torch")


def minilm_runtime(text: Any) -> str:
    """A MiniLM inference runtime, lower-cased: one of :data:`MINILM_RUNTIMES`, or empty for the default."""
    value = str(text or "").strip().lower()
    if value and value not in MINILM_RUNTIMES:
        raise BadValue(f"{text!r} is not one of {', '.join(MINILM_RUNTIMES)} (or empty for the default)")
    return value
