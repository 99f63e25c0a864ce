"""A read-only store serves the commands that only read it.

``deepsent search QUERY`` and ``deepsent promote --status`` used to be refused on a store mounted read-only (the
CLI wrote a probe file first). The store is now checked for reading only when the command only reads; commands
that write (``index``, ``search --queries``) still stop with one line. The store here is a copy of the tiny
chain's (its champion indexed), bind-mounted read-only: a real read-only file system, MLflow's database included.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from deepsent.cli import main
from pipeline.core.config import Settings
from tests.tiny_chain import TinyChain, copy_of


@pytest.fixture()
def read_only_store(tiny_chain: TinyChain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """Settings on a read-only mount of a copy of the tiny chain's store (its MLflow database inside)."""
    writable = copy_of(tiny_chain, tiny_chain.settings.with_overrides(store=str(tmp_path / "store")))
    mount = tmp_path / "read-only"
    mount.mkdir()
    for flags in (["--bind", writable.store, str(mount)], ["-o", "remount,bind,ro", str(mount)]):
        done = subprocess.run(["mount", *flags], capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], check=False)
            pytest.skip(f"cannot mount the store read-only here: {done.stderr.strip()}")
    settings = writable.with_overrides(store=str(mount), mlflow_tracking_uri=f"sqlite:///{mount / 'mlflow.db'}")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri)
    try:
        yield settings
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _cli(capsys: pytest.CaptureFixture[str], settings: Settings, *argv: str) -> tuple[int, dict[str, Any], str]:
    capsys.readouterr()
    code = main(["--json", *argv, "--store", settings.store, "--data-dir", str(settings.data_dir)])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_read_only_commands_serve_a_read_only_store(read_only_store: Settings, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    store = Path(read_only_store.store)
    with pytest.raises(OSError, match="Read-only file system"):
        (store / "probe").write_text("")
    code, found, err = _cli(capsys, read_only_store, "search", "cordless drill", "--k", "3")
    assert code == 0 and len(found["hits"]) == 3 and found["index"].startswith(str(store)), err[-3000:]
    code, status, err = _cli(capsys, read_only_store, "promote", "--status")
    assert code == 0 and status["champion"], err[-3000:]
    queries = tmp_path / "queries.txt"
    queries.write_text("cordless drill\n")
    for argv in (["search", "--queries", str(queries)], ["index"]):  # these write: one line, as before
        code, result, err = _cli(capsys, read_only_store, *argv)
        assert code == 2 and "read-only" in result["error"].lower(), (argv, result)
        assert err.splitlines() == [f"deepsent: error: {result['error']}"]
