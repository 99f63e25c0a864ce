"""The store on both backends: atomic writes, Parquet round trips, dataset replacement."""
from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError, DeepsentError
from pipeline.storage.store import Store


def _table(n: int) -> pa.Table:
    return pa.table({"a": list(range(n)), "b": [f"x{i}" for i in range(n)]})


@pytest.fixture(params=["local", "s3"])
def any_store(request: pytest.FixtureRequest) -> Store:
    name = "settings" if request.param == "local" else "s3_settings"
    return Store.from_settings(request.getfixturevalue(name))


def test_parquet_round_trip_and_listing(any_store: Store) -> None:
    any_store.write_table("clicks/dt=2026-01-01/part-0.parquet", _table(5))
    any_store.write_table("clicks/dt=2026-01-02/part-0.parquet", _table(3))
    assert any_store.read_table("clicks/dt=2026-01-01/part-0.parquet").equals(_table(5))
    assert any_store.read_table("clicks").num_rows == 8
    assert any_store.list_dirs("clicks") == ["dt=2026-01-01", "dt=2026-01-02"]
    assert any_store.exists("clicks/dt=2026-01-02")
    assert not any_store.exists("clicks/dt=2026-01-03")


def test_check_of_a_usable_store_leaves_nothing_behind(any_store: Store) -> None:
    any_store.check()  # the probe is a ".tmp-" file, which list_files() would hide: list raw
    root = any_store.uri("")[len("s3://"):] if any_store.is_s3 else any_store.uri("")
    assert any_store.fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True)) == []


def test_replace_dataset_leaves_only_new_files(any_store: Store) -> None:
    any_store.replace_dataset("x/dt=1", [("part-0.parquet", _table(2)), ("part-1.parquet", _table(2))])
    any_store.replace_dataset("x/dt=1", [("part-0.parquet", _table(4))])
    assert any_store.list_files("x/dt=1") == ["x/dt=1/part-0.parquet"]
    assert any_store.read_table("x/dt=1").num_rows == 4


def test_same_table_gives_same_bytes(any_store: Store) -> None:
    any_store.write_table("t/a.parquet", _table(10))
    first = any_store.read_bytes("t/a.parquet")
    any_store.write_table("t/a.parquet", _table(10))
    assert any_store.read_bytes("t/a.parquet") == first


def test_json_bytes_delete(any_store: Store) -> None:
    any_store.write_json("m/manifest.json", {"b": 1, "a": [1, 2]})
    assert any_store.read_json("m/manifest.json") == {"a": [1, 2], "b": 1}
    any_store.delete("m")
    assert not any_store.exists("m/manifest.json")
    with pytest.raises(DeepsentError, match="not found"):
        any_store.read_bytes("m/manifest.json")


def test_uri_relpath_round_trip(any_store: Store) -> None:
    uri = any_store.uri("features/v1/vocab.json")
    assert any_store.relpath(uri) == "features/v1/vocab.json"
    with pytest.raises(ConfigError):
        any_store.relpath("s3://some-other-bucket/x")


@pytest.mark.parametrize("path", ["../x.parquet", "search/../../x.parquet", "a/../../../etc/x", ".."])
def test_a_path_with_dotdot_never_leaves_the_store(any_store: Store, path: str) -> None:
    with pytest.raises(ConfigError, match="a path with '..' is refused"):
        any_store.write_bytes(path, b"x")
    with pytest.raises(ConfigError, match="a path with '..' is refused"):
        any_store.read_bytes(path)


def test_a_symlink_out_of_the_store_is_refused(settings: Settings, tmp_path: Path) -> None:
    store = Store.from_settings(settings)
    secret = tmp_path / "secret.txt"
    secret.write_text("first line of a file nobody named\n")
    store.write_bytes("landing/dt=2026-01-01/ok.jsonl", b"{}\n")
    link = store.local_path("landing/dt=2026-01-01") / "events.jsonl"
    link.symlink_to(secret)
    outside_dir = tmp_path / "elsewhere"
    outside_dir.mkdir()
    store.local_path("search").symlink_to(outside_dir)
    for action in (lambda: store.read_bytes("landing/dt=2026-01-01/events.jsonl"),
                   lambda: store.write_bytes("search/hits.parquet", b"x")):
        with pytest.raises(ConfigError, match="a symlink leads out of the store") as caught:
            action()
        assert "nobody named" not in str(caught.value)
    assert list(outside_dir.iterdir()) == [] and secret.read_text().startswith("first line")
    assert store.read_bytes("landing/dt=2026-01-01/ok.jsonl") == b"{}\n"  # inside: as before


def test_a_killed_writes_temporary_file_is_swept_by_the_next_write(settings: Settings) -> None:
    import os
    import time

    store = Store.from_settings(settings)
    store.write_bytes("features/v1/a.bin", b"1")
    folder = store.local_path("features/v1")
    old, fresh = folder / ".tmp-killed", folder / ".tmp-in-progress"
    old.write_bytes(b"half")
    fresh.write_bytes(b"half")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    Store.from_settings(settings).write_bytes("features/v1/b.bin", b"2")  # the next run of the stage
    assert not old.exists() and fresh.exists()  # a write in progress elsewhere is left alone


def test_a_full_or_read_only_disk_is_one_line_and_leaves_nothing(tiny_disk: Path) -> None:
    import subprocess

    store = Store(str(tiny_disk / "store"))
    store.write_bytes("clicks/a.bin", b"1")
    with pytest.raises(DeepsentError, match=r"clicks/b.bin: cannot write \(no space left on the device\)"):
        store.write_bytes("clicks/b.bin", b"2" * 200_000)
    assert sorted(p.name for p in store.local_path("clicks").iterdir()) == ["a.bin"]  # no temporary file left
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_disk)], check=True)
    with pytest.raises(DeepsentError, match=r"clicks/c.bin: cannot write \(the file system is read-only\)"):
        store.write_bytes("clicks/c.bin", b"3")
    assert store.read_bytes("clicks/a.bin") == b"1"


def test_local_write_is_atomic_no_temp_left(settings: Settings) -> None:
    store = Store.from_settings(settings)
    store.write_bytes("a/b.bin", b"123")
    leftovers = [p for p in store.local_path("a").iterdir() if p.name.startswith(".tmp-")]
    assert leftovers == []


def test_no_credentials_in_repr_or_logs(s3_settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    store = Store.from_settings(s3_settings)
    store.write_json("c.json", {"ok": True})
    text = repr(store) + repr(s3_settings) + str(s3_settings.public_dict()) + caplog.text
    assert "testing-secret-key" not in text
    assert "testing-key-id" not in text
