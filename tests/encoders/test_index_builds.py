"""Index builds switch in by one pointer write, on a local store and on S3 alike.

Builds here are stand-ins (a manifest and one file each): what is tested is which folder readers resolve
to, what survives a switch, and that an index written before builds stays readable until replaced.
"""
from __future__ import annotations

import pytest

from encoders.search import index_builds as builds
from pipeline.storage.artifacts import ArtifactError
from pipeline.storage.store import Store

HOME = "indexes/lstm/3"
REBUILD = "deepsent index --model-uri models:/deepsent-lstm/3"


@pytest.fixture(params=["local", "s3"])
def any_store(request: pytest.FixtureRequest) -> Store:
    name = "settings" if request.param == "local" else "s3_settings"
    return Store.from_settings(request.getfixturevalue(name))


def _build(store: Store, name: str, complete: bool = True) -> str:
    folder = f"{HOME}/{builds.BUILDS}/{name}"
    store.write_bytes(f"{folder}/index.faiss", name.encode())
    if complete:
        store.write_json(f"{folder}/manifest.json", {"build": name})
    return folder


def test_readers_follow_the_pointer_and_a_switch_keeps_the_replaced_build(any_store: Store) -> None:
    assert builds.live_folder(any_store, HOME, REBUILD) is None  # never indexed
    any_store.write_json(f"{HOME}/manifest.json", {"legacy": True})  # an index written before builds
    any_store.write_bytes(f"{HOME}/bm25/vocab.index.json", b"{}")
    assert builds.live_folder(any_store, HOME, REBUILD) == HOME
    first = _build(any_store, "20260101T000000Z-0000000a")
    assert builds.live_folder(any_store, HOME, REBUILD) == HOME  # written, not yet switched in: not served
    builds.publish(any_store, HOME, first)
    assert builds.live_folder(any_store, HOME, REBUILD) == first
    assert any_store.list_files(HOME) == [f"{first}/index.faiss", f"{first}/manifest.json", f"{HOME}/current.json"]
    old = _build(any_store, "20250101T000000Z-0000000b")  # a complete build nobody serves
    stale = _build(any_store, "20250101T000000Z-0000000c", complete=False)  # left half-written a year ago
    fresh = _build(any_store, builds.new_build(HOME).rsplit("/", 1)[1], complete=False)  # another run, writing now
    _build(any_store, "29990101T000000Z-0000000d", complete=False)  # half-written "in the future": no run writes that
    second = _build(any_store, "20260102T000000Z-0000000e")
    builds.publish(any_store, HOME, second)
    assert builds.live_folder(any_store, HOME, REBUILD) == second
    kept = any_store.list_dirs(f"{HOME}/{builds.BUILDS}")
    assert kept == sorted(name.rsplit("/", 1)[1] for name in (first, second, fresh))
    assert not any_store.exists(old) and not any_store.exists(stale)


def test_a_pointer_to_nothing_is_one_line(any_store: Store) -> None:
    any_store.write_json(f"{HOME}/current.json", {"build": "20260101T000000Z-0000000a"})
    with pytest.raises(ArtifactError, match="current.json: names build 20260101T000000Z-0000000a, which has no "
                                            "manifest.json; rebuild it with `deepsent index"):
        builds.live_folder(any_store, HOME, REBUILD)
    any_store.write_json(f"{HOME}/current.json", {"build": 7})
    with pytest.raises(ArtifactError, match=r"current.json: names no build \('7' is not a build id\)"):
        builds.live_folder(any_store, HOME, REBUILD)


def test_a_build_killed_in_its_first_write_is_removed_once_stale(settings) -> None:
    """A run killed while writing its first file leaves a build folder holding only a temporary file, which the
    store's listings skip; a later switch still finds it and removes it once stale."""
    from pathlib import Path

    from pipeline.storage.filesystems import TEMP_PREFIX

    store = Store.from_settings(settings)
    cut = Path(store.uri(f"{HOME}/{builds.BUILDS}/20250101T000000Z-0000000f"))
    cut.mkdir(parents=True)
    (cut / f"{TEMP_PREFIX}index.faiss").write_bytes(b"half")
    live = _build(store, "20260101T000000Z-0000000a")
    builds.publish(store, HOME, live)
    assert not cut.exists() and builds.live_folder(store, HOME, REBUILD) == live
