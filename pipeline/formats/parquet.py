"""Reader for Parquet landing files: columns named as LANDING_FIELDS, one row per shown result."""
from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import InputError
from pipeline.formats.records import RawRecord, require_bytes
from pipeline.schemas import LANDING_FIELDS


def read_parquet(data: bytes, source: str, partition_date: dt.date | None = None) -> list[RawRecord]:
    """Every row of a Parquet file as a record (line = 1-based row number).

    Column types are not trusted: each value goes through the same validation as text formats,
    so a wrong type quarantines the affected rows. A missing column or an unreadable file stops
    with an error naming the file.
    """
    require_bytes(source, data)
    try:
        schema = pq.read_schema(pa.BufferReader(data))
        missing = [name for name in LANDING_FIELDS if name not in schema.names]
        if missing:
            raise InputError(source, f"missing column(s) {', '.join(missing)}; columns are {schema.names}")
        rows = pq.read_table(pa.BufferReader(data), columns=list(LANDING_FIELDS)).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise InputError(source, f"unreadable Parquet: {exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(source, f"wrong encoding: a string column is not valid UTF-8 ({exc.reason})") from None
    return [RawRecord(number, json.dumps(row, default=str), row) for number, row in enumerate(rows, start=1)]
