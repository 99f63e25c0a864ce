"""Files a user names are read within bounds, streamed, and a signal stops the read.

``deepsent search --queries /dev/zero`` used to read until the OOM killer ended it, deaf to SIGTERM. Now every
file a command reads for a user (``search --queries``, a judged set of ``--judgments`` or ``--gate-judgments``) is
read in chunks through :func:`pipeline.text.bounded_files.bounded_lines`: past its size, line count or line length it
stops with one line naming the file and the bound, SIGTERM or SIGINT ends the read at once (exit 143 or 130),
and a byte-order mark does not end up in the first query.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from deepsent.cli import main
from pipeline.core.config import PROJECT_ROOT, Settings
from pipeline.text.bounded_files import QUERY_FILE
from tests.tiny_chain import TinyChain, copy_of


def _cli(capsys: pytest.CaptureFixture[str], settings: Settings, *argv: str) -> tuple[int, dict[str, Any], str]:
    capsys.readouterr()
    code = main(["--json", *argv, "--store", settings.store, "--data-dir", str(settings.data_dir)])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _feed(fifo: Path, line: bytes, stop: threading.Event) -> None:
    """Write ``line`` into ``fifo`` again and again until the reader goes or ``stop`` is set."""
    try:
        with open(fifo, "wb") as fh:
            while not stop.is_set():
                fh.write(line)
    except BrokenPipeError:
        pass


def test_endless_or_oversized_files_stop_at_their_bound(settings: Settings, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "endless-queries"
    os.mkfifo(fifo)
    long_lines = b"q" * (QUERY_FILE.max_line_bytes - 1) + b"\n"  # each line within its bound: the size stops it
    one_line = tmp_path / "one-line.csv"  # 50 MB and no line break (a judged set must be a regular file)
    with open(one_line, "wb") as fh:
        fh.truncate(50_000_000)
    cases = [(["search", "--queries", "/dev/zero"], "/dev/zero, row 1: a line longer than 4,000 bytes, the longest "
                                                    "deepsent reads in a file of queries", None),
             (["search", "--queries", str(fifo)], f"{fifo}: more than 100.0 MB, the most deepsent reads of a file of "
                                                  "queries; split it", long_lines),
             (["search", "--queries", str(fifo)], f"{fifo}, row 1000001: more than 1,000,000 lines, the most deepsent "
                                                  "reads of a file of queries; split it", b"drill\n"),
             (["promote", "--model-uri", "x", "--gate-judgments", str(one_line)],
              f"{one_line}, row 1: a line longer than 100,000 bytes, the longest deepsent reads in a judged set", None),
             (["compare", "--judgments", str(one_line)], f"{one_line}, row 1: a line longer than 100,000 bytes", None)]
    for argv, message, feed in cases:
        stop = threading.Event()
        feeder = threading.Thread(target=_feed, args=(fifo, feed, stop), daemon=True)
        if feed:
            feeder.start()
        started = time.monotonic()
        code, result, err = _cli(capsys, settings, *argv)
        stop.set()
        assert code == 2 and result["error"].startswith(message), (argv, result)
        assert err.splitlines() == [f"deepsent: error: {result['error']}"]
        assert time.monotonic() - started < 20, argv
        feeder.join(timeout=5) if feed else None


def test_a_signal_ends_the_read_at_once(settings: Settings, tmp_path: Path) -> None:
    fifo = tmp_path / "slow-queries"
    os.mkfifo(fifo)
    env = {**os.environ, "DEEPSENT_STORE": settings.store, "DEEPSENT_DATA_DIR": str(settings.data_dir)}
    for sig, status in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
        proc = subprocess.Popen([sys.executable, "-m", "deepsent.cli", "search", "--queries", str(fifo)],
                                cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        with open(fifo, "wb") as writer:  # opens once the command opened the file for reading
            writer.write(b"cordless drill\n" * 1000)
            writer.flush()
            time.sleep(0.5)  # reading, and waiting for more
            sent = time.monotonic()
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=30)
        assert proc.returncode == status, err.decode()[-2000:]
        assert time.monotonic() - sent < 5
        assert err.decode().splitlines()[-1] == f"deepsent: error: {'terminated (SIGTERM)' if status == 143 else 'interrupted'}"


def test_a_byte_order_mark_is_dropped(tiny_chain: TinyChain, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    settings = copy_of(tiny_chain, tiny_chain.settings.with_overrides(store=str(tmp_path / "store")))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri)  # not what an earlier test left set
    queries = tmp_path / "excel queries.txt"
    queries.write_bytes("\ufeffcordless drill\r\nwasher\r\n".encode("utf-8"))
    code, result, err = _cli(capsys, settings, "search", "--queries", str(queries), "--k", "2")
    assert code == 0, err
    assert pq.read_table(result["out"])["query"].to_pylist() == ["cordless drill"] * 2 + ["washer"] * 2
