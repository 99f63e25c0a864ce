"""Reader for Parquet landing files: columns named as LANDING_FIELDS (or those a caller requires), one record per row."""
from __future__ import annotations

import datetime as dt
import json
from typing import Any, Iterable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.errors import InputError
from pipeline.ingest.formats.records import LANDING_NAMES, RawRecord, require_bytes


class _Unreadable:
    """A stored value that Python cannot hold (e.g. a timestamp or date past the year 9999)."""

    def __init__(self, scalar: pa.Scalar, exc: Exception) -> None:
        self.text = f"<{scalar.type} {getattr(scalar, 'value', '?')}>"
        self.reason = f"unreadable {self.text[1:-1]} ({exc})"

    def __str__(self) -> str:
        return self.text


def read_parquet(data: bytes, source: str, partition_date: dt.date | None = None,
                 required: Sequence[str] = LANDING_NAMES, every_column: bool = False) -> list[RawRecord]:
    """Every row of a Parquet file as a record (line = 1-based row number).

    Column types are not trusted: each value goes through the same validation as text formats,
    so a wrong type quarantines the affected rows, and a value Python cannot hold (a timestamp,
    date or duration out of its range) quarantines its row. A missing column or an unreadable
    file stops with an error naming the file. ``every_column`` keeps the columns beyond ``required`` too.
    """
    table = read_landing_table(data, source, required, every_column)
    return table_records(table, range(1, table.num_rows + 1), source)


def read_landing_table(data: bytes, source: str, required: Sequence[str] = LANDING_NAMES,
                       every_column: bool = False) -> pa.Table:
    """The ``required`` columns of a Parquet file (all of them with ``every_column``); an InputError naming it when
    unreadable or incomplete."""
    require_bytes(source, data)
    try:
        schema = pq.read_schema(pa.BufferReader(data))
        missing = [name for name in required if name not in schema.names]
        if missing:
            raise InputError(source, f"missing column(s) {', '.join(missing)}; columns are {schema.names}")
        return pq.read_table(pa.BufferReader(data), columns=None if every_column else list(required))
    except (pa.ArrowException, OSError) as exc:
        raise InputError(source, f"unreadable Parquet: {exc}") from None


def table_records(table: pa.Table, numbers: Iterable[int], source: str) -> list[RawRecord]:
    """The rows ``numbers`` (1-based, ascending) of a landing table as records (keys: its columns)."""
    numbers = list(numbers)
    if len(numbers) != table.num_rows:
        table = table.take(pa.array([n - 1 for n in numbers], pa.int64()))
    try:
        columns = [_values(column) for column in table.columns]
    except UnicodeDecodeError as exc:
        raise InputError(source, f"wrong encoding: a string column is not valid UTF-8 ({exc.reason})") from None
    except (pa.ArrowException, OSError) as exc:
        raise InputError(source, f"unreadable Parquet: {exc}") from None
    records = []
    for number, values in zip(numbers, zip(*columns)):
        row = dict(zip(table.column_names, values))
        raw = json.dumps(row, default=str)
        unreadable = [f"field {name}: {v.reason}" for name, v in row.items() if isinstance(v, _Unreadable)]
        records.append(RawRecord(number, raw, None, unreadable[0]) if unreadable else RawRecord(number, raw, row))
    return records


def _values(column: pa.ChunkedArray) -> list[Any]:
    """The column as Python values; one by one when some value cannot convert (it becomes _Unreadable)."""
    try:
        return column.to_pylist()
    except UnicodeDecodeError:
        raise
    except (OverflowError, ValueError):
        return [_value(scalar) for scalar in column]


def _value(scalar: pa.Scalar) -> Any:
    try:
        return scalar.as_py()
    except UnicodeDecodeError:
        raise
    except (OverflowError, ValueError) as exc:
        return _Unreadable(scalar, exc)
