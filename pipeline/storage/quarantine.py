"""The quarantine: every rejected row of a stage, with its source file, line and reason.

Stored per stage and partition at ``quarantine/<stage>/dt=YYYY-MM-DD/part-0.parquet``
(QUARANTINE_SCHEMA) and replaced as a whole when the stage re-runs, so a retry leaves no
duplicates. A partition with no rejected row holds an empty file: its presence says the
stage ran and rejected nothing.
"""
from __future__ import annotations

from collections import Counter

import pyarrow as pa

from pipeline.storage.schemas import QUARANTINE_SCHEMA
from pipeline.storage.store import Store

RAW_LIMIT_BYTES = 4096


class Quarantine:
    """Collects rejected rows of one stage run, then writes them as one Parquet partition."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self._rows: list[tuple[str, int, str, str]] = []

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, source_file: str, source_line: int, reason: str, raw: str) -> None:
        """Record one rejected row (``raw`` is truncated to 4 KiB of UTF-8)."""
        self._rows.append((source_file, source_line, reason, truncate_utf8(raw, RAW_LIMIT_BYTES)))

    def reasons(self) -> dict[str, int]:
        """Counts per kind of reason (the text before the first colon), sorted by kind."""
        kinds = Counter(reason.split(":", 1)[0] for _, _, reason, _ in self._rows)
        return dict(sorted(kinds.items()))

    def to_table(self) -> pa.Table:
        """The rejected rows as a QUARANTINE_SCHEMA table, in the order they were added."""
        columns = list(zip(*self._rows)) if self._rows else [(), (), (), ()]
        return pa.table(
            {
                "stage": [self.stage] * len(self._rows),
                "source_file": list(columns[0]),
                "source_line": list(columns[1]),
                "reason": list(columns[2]),
                "raw": list(columns[3]),
            },
            schema=QUARANTINE_SCHEMA,
        )

    def write(self, store: Store, partition: str) -> str:
        """Replace ``quarantine/<stage>/<partition>/`` with these rows; returns the file's URI."""
        return store.replace_dataset(quarantine_prefix(self.stage, partition), [("part-0.parquet", self.to_table())])[0]


def quarantine_prefix(stage: str, partition: str) -> str:
    """Relative folder of a stage's quarantine partition, e.g. ``quarantine/ingest/dt=2026-01-01``."""
    return f"quarantine/{stage}/{partition}"


def truncate_utf8(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes without splitting a character."""
    if len(text) <= limit and text.isascii():  # within the limit as it is: the same string, not a copy
        return text
    return text.encode("utf-8", "backslashreplace")[:limit].decode("utf-8", "ignore")
