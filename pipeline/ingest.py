"""Ingestion: ``landing/clicks/dt=D/*`` -> ``clicks/dt=D/part-0.parquet``, one date at a time.

For each landing file of the date (sorted by path; names starting with ``_`` or ``.`` such as
``_SUCCESS`` are markers, not data) the reader of its format yields records, and each row is

1. validated against LANDING_FIELDS, its ``ts`` within the landing date ± 1 day (a rejected row
   goes to the quarantine with file, line and reason: see :mod:`pipeline.formats.records` for
   the timestamp, position, encoding and size policies);
2. normalised as the paper does (lower case, whitespace tokens, numbers kept, no stemming),
   keeping the raw text beside it; a text that normalises to nothing is quarantined;
3. given an ``event_id`` (a hash of all its landing fields) and dropped when the same event
   was already seen in this date's partition (exact duplicates from retried log writes);
4. dropped with every other row of its user when that user is a bot (:mod:`pipeline.bots`).

The counts always satisfy ``rows_read = accepted + quarantined + duplicates + bot_rows``. The
clicks partition, the quarantine partition and the manifest ``clicks/_manifests/dt=D.json``
(counts, files, bot users, the bot rule; written last) are replaced as a whole, so re-running
a date gives the same bytes and never duplicates. A date without landing files, an unreadable
file, a missing column or a wrong encoding stops with an InputError naming the file.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import logging
import posixpath
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.bots import BOT_RULE, find_bots
from pipeline.config import Settings
from pipeline.errors import ConfigError, DeepsentError, InputError
from pipeline.formats import LandingRow, RowError, reader_for, to_landing_row
from pipeline.quarantine import Quarantine, quarantine_prefix
from pipeline.schemas import CLICKS_SCHEMA
from pipeline.store import Store
from pipeline.textnorm import normalize

LANDING_ROOT = "landing/clicks"
CLICKS_ROOT = "clicks"
STAGE = "ingest"
COUNT_KEYS = ("rows_read", "accepted", "quarantined", "duplicates", "bot_rows")
log = logging.getLogger(__name__)


def partition(day: dt.date) -> str:
    """Partition folder name of a date, e.g. ``dt=2026-01-01``."""
    return f"dt={day.isoformat()}"


def landing_prefix(day: dt.date) -> str:
    """Landing folder of a date."""
    return f"{LANDING_ROOT}/{partition(day)}"


def clicks_path(day: dt.date) -> str:
    """The clicks file of a date."""
    return f"{CLICKS_ROOT}/{partition(day)}/part-0.parquet"


def manifest_path(day: dt.date) -> str:
    """The ingest manifest of a date (underscore folder: skipped by Parquet dataset readers)."""
    return f"{CLICKS_ROOT}/_manifests/{partition(day)}.json"


def ingest_dates(settings: Settings, dates: Iterable[dt.date]) -> dict[str, Any]:
    """Ingest every date (each replaces its partition); per-date and total counts.

    All landing partitions are checked first, so a missing one fails before anything is written.
    """
    days = sorted(set(dates))
    if not days:
        raise ConfigError("no dates to ingest")
    store = Store.from_settings(settings)
    files = {day: landing_files(store, day) for day in days}
    per_date = {day.isoformat(): ingest_partition(store, day, files[day]) for day in days}
    totals = {key: sum(counts[key] for counts in per_date.values()) for key in COUNT_KEYS}
    return {
        "dates": [day.isoformat() for day in days],
        **totals,
        "bot_users": sum(len(counts["bot_users"]) for counts in per_date.values()),
        "bot_rule": BOT_RULE,
        "partitions": [store.uri(clicks_path(day)) for day in days],
        "per_date": per_date,
    }


def landing_files(store: Store, day: dt.date) -> list[str]:
    """Data files of a date's landing partition; an InputError naming it when there are none."""
    prefix = landing_prefix(day)
    found = [f for f in store.list_files(prefix) if not posixpath.basename(f).startswith(("_", "."))]
    if not found:
        raise InputError(store.uri(prefix), f"missing landing partition: no landing files for {day.isoformat()}")
    return found


def ingest_partition(store: Store, day: dt.date, files: list[str]) -> dict[str, Any]:
    """Read, validate, normalise, de-duplicate and de-bot one date; write its three outputs."""
    quarantine = Quarantine(STAGE)
    columns = _ClickColumns()
    seen: set[str] = set()
    file_rows: dict[str, int] = {}
    duplicates = 0
    for path in files:
        try:
            records = reader_for(path)(store.read_bytes(path), path, day)
        except InputError as exc:  # name the file by its full URI (which store, which bucket)
            raise InputError(store.uri(path), exc.reason, exc.row) from None
        file_rows[path] = len(records)
        for record in records:
            if record.error is not None or record.values is None:
                quarantine.add(path, record.line, record.error or "no values", record.raw)
                continue
            try:
                row = to_landing_row(record.values, day)
                query, title = columns.normalise(row)
            except RowError as exc:
                quarantine.add(path, record.line, str(exc), record.raw)
                continue
            key = event_id(row)
            if key in seen:
                duplicates += 1
                continue
            seen.add(key)
            columns.add(key, row, query, title, path, record.line)
    table = columns.to_table()
    rows = table.num_rows
    bots = find_bots(*(table.column(name).to_pylist() for name in ("user_id", "impression_id")), table.column("ts").cast(pa.int64()).to_numpy())
    if bots:
        bot_ids = pa.array(sorted(b.user_id for b in bots))
        table = table.filter(pc.invert(pc.is_in(table.column("user_id"), value_set=bot_ids)))
    counts = {
        "rows_read": sum(file_rows.values()),
        "accepted": table.num_rows,
        "quarantined": len(quarantine),
        "duplicates": duplicates,
        "bot_rows": rows - table.num_rows,
    }
    _check_identity(day, counts)
    manifest = {
        "date": day.isoformat(),
        **counts,
        "files": file_rows,
        "quarantine_reasons": quarantine.reasons(),
        "bot_rule": BOT_RULE,
        "bot_users": [b.as_dict() for b in bots],
        "outputs": {"clicks": clicks_path(day), "quarantine": f"{quarantine_prefix(STAGE, partition(day))}/part-0.parquet"},
    }
    store.replace_dataset(f"{CLICKS_ROOT}/{partition(day)}", [("part-0.parquet", table)])
    quarantine.write(store, partition(day))
    store.write_json(manifest_path(day), manifest)
    log.info("ingest %s: %s", day.isoformat(), ", ".join(f"{k}={counts[k]}" for k in COUNT_KEYS))
    return manifest


def event_id(row: LandingRow) -> str:
    """Stable id of a landing event: a hash of all its fields (same event, same id, any format)."""
    key = "\x1f".join(str(value) for value in row)
    return hashlib.blake2b(key.encode("utf-8"), digest_size=16).hexdigest()


def _check_identity(day: dt.date, counts: dict[str, int]) -> None:
    if counts["rows_read"] != sum(counts[k] for k in COUNT_KEYS[1:]):
        raise DeepsentError(f"ingest {day}: count identity broken {counts} (a bug, please report)")


class _ClickColumns:
    """Accepted rows of a partition in file and line order, as CLICKS_SCHEMA tuples."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self._normal: dict[str, str] = {}

    def normalise(self, row: LandingRow) -> tuple[str, str]:
        """Normalised query and title of ``row``; RowError when one normalises to nothing."""
        query, title = self._norm(row.query), self._norm(row.title)
        if not query or not title:
            raise RowError(f"field {'query' if not query else 'title'}: empty after normalisation")
        return query, title

    def _norm(self, text: str) -> str:
        cached = self._normal.get(text)
        if cached is None:
            cached = self._normal[text] = normalize(text)
        return cached

    def add(self, key: str, row: LandingRow, query: str, title: str, source: str, line: int) -> None:
        """Append one accepted row."""
        ts, user, session, impression, query_raw, doc_id, title_raw, position, clicked = row
        self.rows.append((key, ts, user, session, impression, query_raw, query, doc_id, title_raw, title,
                          position, clicked, source, line))

    def to_table(self) -> pa.Table:
        """The rows as a CLICKS_SCHEMA table."""
        columns = list(zip(*self.rows)) if self.rows else [() for _ in CLICKS_SCHEMA.names]
        return pa.table([pa.array(col, type=f.type) for col, f in zip(columns, CLICKS_SCHEMA)], schema=CLICKS_SCHEMA)
