"""The store on both backends: atomic writes, Parquet round trips, dataset replacement."""
from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError, DeepsentError
from pipeline.core.store import Store


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
