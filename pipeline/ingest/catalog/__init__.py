"""Catalogue ingestion: ``landing/catalog/dt=D/*`` -> the catalogue as of D and the day's changes.

Files (CSV, TSV, JSON Lines or Parquet, read in bounded pieces with the click ingest's rules: :mod:`.stream`) hold
one product a row:
``product_id``, ``title`` and an optional ``op`` (``upsert``, the default, or ``retire``; a retire row needs no
title); any other column is kept as an attribute (:data:`pipeline.storage.schemas.CATALOG_LANDING_COLUMNS`).

**Snapshot or delta, by file name**: a file whose name starts with ``snapshot`` (``snapshot.csv``,
``snapshot-1.parquet``) is part of the day's *snapshot*, the whole live catalogue: a live product it leaves
out is retired. Any other data file is a *delta*: its rows are applied to the catalogue of the day before,
file after file in path order. A day holds snapshot files or delta files, never both.

Rows are checked (:mod:`.rows`), applied (:mod:`.apply`) and written (:mod:`.days`): bad rows go to
``quarantine/catalog/dt=D/`` with their reason, ``rows_in = kept + quarantined``, and re-running a day gives
the same bytes. A day without a file keeps the catalogue of the latest earlier day (said in the log and the
manifest); a snapshot that would retire more than :data:`.apply.MAX_RETIRE_SHARE` of the live catalogue is
refused unless the operator allows it (``deepsent ingest --allow-mass-retire``).

A day's catalogue is held in memory, not its files: a file is read a chunk at a time, a line over the click
readers' bound is quarantined unread, and a day's files are read within :data:`.rows.CATALOG_DAY` (its bytes, its
rows), past which the day is refused with one line. A ``product_id`` is written one way only (no hidden character,
no space around it, Unicode NFKC form) and a title must show something (:mod:`.rows`). Days come in date order: a
run that would leave a later day built on another catalogue than its own is refused (:func:`.days.check_order`).
"""
