"""``deepsent search``: queries -> the top-k titles of the champion's (or a model's) index."""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from encoders.model.ranker_registry import CHAMPION_URI as CHAMPION
from encoders.search import modes
from pipeline.core import validators as v
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError, InputError
from pipeline.core.readable import readable_bytes
from pipeline.text.bounded_files import QUERY_FILE, bounded_lines
from pipeline.text.textnorm import visible

#: The most titles one query may ask for (--k).
MAX_K = 10_000
#: The longest file or folder name a file system takes, in bytes.
NAME_MAX = 255


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``search`` to the CLI."""
    se = subparsers.add_parser(
        "search", parents=[common], help="the top-k corpus titles of a query (or a file of queries) by cosine",
        description="Encode QUERY with the model's query tower and search its index (built by deepsent index). "
        "With --queries FILE (one query per line, UTF-8) every query is searched and the results written as "
        "Parquet (query, rank, doc_id, title, score) to search/<file name>.parquet in the store, or --out.",
    )
    se.add_argument("query", nargs="?", help="the query text")
    se.add_argument("--k", type=v.up_to(MAX_K), default=10, help=f"titles per query, 1 to {MAX_K:,} (default 10)")
    se.add_argument("--model-uri", default=CHAMPION, help=f"the model whose index to search (default {CHAMPION})")
    se.add_argument("--queries", type=Path, help=f"a UTF-8 file of queries, one per line (batch search; at most "
                    f"{QUERY_FILE.max_lines:,} lines of {QUERY_FILE.max_line_bytes:,} bytes, "
                    f"{readable_bytes(QUERY_FILE.max_bytes)})")
    se.add_argument("--out", help="with --queries: where to write the results (a .parquet path in the store; default "
                    "search/<name>.parquet)")
    se.add_argument("--mode", choices=modes.MODES, help=modes.modes_help() + " (default: the mode chosen on the decision "
                    "set when the index was built)")
    se.set_defaults(handler=run_search, reads_only=lambda args: args.queries is None)  # --queries writes its hits


def read_queries(path: Path) -> list[str]:
    """Non-blank lines of a UTF-8 file, stripped, read within :data:`~pipeline.text.bounded_files.QUERY_FILE`'s bounds
    (a byte-order mark dropped; a signal stops the read)."""
    try:
        queries = [line.strip() for line in bounded_lines(path, QUERY_FILE) if line.strip()]
    except FileNotFoundError:
        raise InputError(str(path), "no such file") from None
    except IsADirectoryError:
        raise InputError(str(path), "a directory, not a file of queries") from None
    except PermissionError:
        raise InputError(str(path), "not readable (permission denied)") from None
    if not queries:
        raise InputError(str(path), "no queries (one per line expected)")
    return queries


def writable_result(store: Any, path: str) -> str:
    """``path`` in the store, when a search result may be written there: a ``.parquet`` name, and no file there
    yet or an earlier search result (never landing logs, features or anything else)."""
    from pipeline.storage.schemas import SEARCH_RESULTS_SCHEMA

    relpath = store.relpath(path)
    if not relpath.endswith(".parquet"):
        raise ConfigError(f"--out {path!r}: give a .parquet file name")
    long = next((name for name in relpath.split("/") if len(name.encode("utf-8")) > NAME_MAX), None)
    if long is not None:
        raise ConfigError(f"--out {long[:40]}...: a name of {len(long.encode('utf-8')):,} bytes, where a file system "
                          f"takes at most {NAME_MAX}; give a shorter --out")
    if store.exists(relpath):
        try:
            schema = store.parquet_file(relpath).schema_arrow
        except Exception:  # noqa: BLE001 (not Parquet at all: not ours to overwrite)
            schema = None
        if schema is None or schema.names[:5] != SEARCH_RESULTS_SCHEMA.names[:5]:  # an earlier result, or not ours
            raise ConfigError(f"--out {store.uri(relpath)}: a file that is not a deepsent search result is there; "
                              "refusing to overwrite it")
    return relpath


def checked_flags(args: argparse.Namespace) -> str | None:
    """The mode asked for (None: the index's default), once the flags are known not to conflict or be ignored."""
    if (args.query is None) == (args.queries is None):
        raise ConfigError("give either a QUERY or --queries FILE")
    if args.out is not None and args.queries is None:
        raise ConfigError(f"--out {args.out!r} is for --queries FILE only: the hits of a single QUERY are printed, "
                          "not written; drop --out or give --queries")
    return args.mode


def run_search(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Search one query (printed) or a file of queries (written as Parquet)."""
    asked_mode = checked_flags(args)
    if args.query is not None and not args.query.strip():
        raise ConfigError("the query is empty: give a query with at least one word")
    queries = read_queries(args.queries) if args.queries else [args.query]
    from encoders.search.corpus_index import SEARCH_ROOT
    from encoders.search.served_index import ServedIndex
    from pipeline.storage.store import Store

    default_out = f"{SEARCH_ROOT}/{args.queries.stem}.parquet" if args.queries else ""
    out = None if args.queries is None else writable_result(Store.from_settings(settings),  # checked before searching
                                                            default_out if args.out is None else args.out)

    began = time.perf_counter()
    searcher = ServedIndex.open(settings, args.model_uri)
    opened = time.perf_counter()
    mode = asked_mode or searcher.default_mode
    table = searcher.search(queries, args.k, mode)
    timing = {"load_s": round(opened - began, 2), "search_s": round(time.perf_counter() - opened, 3)}
    note = searcher.shortfall(mode, args.k, table, len(queries))
    where = {"model_uri": args.model_uri, "version": searcher.version, "index": searcher.store.uri(searcher.root),
             "index_type": searcher.manifest["index_type"], "mode": mode,
             **({"note": note} if note else {})}
    if args.queries is None:
        hits = [modes.Hit(**row) for row in table.select(modes.Hit.field_names()).to_pylist()]
        lines = [f"{h.rank:>3}. {h.score:.4f}  {visible(h.doc_id)}  {visible(h.title)}  [{h.found_by}]"
                 for h in hits]  # a hidden character (a line break, NUL) printed as its escape: one line a hit
        summary = "\n".join([f"top {len(hits)} for {args.query!r} ({searcher.manifest['model']}, "
                             f"version {searcher.version}, {mode} search):", *lines, *([note] if note else []),
                             served_note(timing)])
        return {"query": args.query, "k": args.k, **where, "hits": [hit.to_json() for hit in hits], **timing,
                "summary": summary}
    written = searcher.store.write_table(out, table)
    summary = (f"searched {len(queries):,} queries (top {args.k}) -> {written} ({table.num_rows:,} rows)"
               + (f"; {note}" if note else ""))
    return {"queries": len(queries), "k": args.k, "rows": table.num_rows, **where, "out": written, **timing,
            "summary": summary}


def served_note(timing: dict[str, float]) -> str:
    """Where a single query's time went, and the faster way to ask many: a running ``deepsent serve``."""
    return (f"(loading the model and its index took {timing['load_s']:.1f} s, the search {timing['search_s'] * 1000:.0f} ms; "
            "deepsent serve loads them once and answers each query over HTTP in milliseconds)")
