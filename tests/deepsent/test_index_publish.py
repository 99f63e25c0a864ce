"""A killed ``deepsent index`` never takes search down, and a rebuild gives the same bytes.

A tiny trained LSTM indexes a small corpus once through the CLI (``small_index``); each test searches a
copy. ``deepsent index`` runs as a real subprocess (its own hash seed, as in production) and is killed with
SIGKILL at several moments of a rebuild (a test per moment): while it starts, once its build folder appears, once its
ids, its BM25 files and its manifest are written, once it has switched ``current.json``, and after a timed delay.
After every kill ``deepsent search`` must answer exit 0 from a complete build: the old one, or the new one
once the switch happened, with the same hits as before (the builds are byte-identical).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from deepsent.cli import main
from encoders.search import index_builds
from pipeline.core.config import PROJECT_ROOT
from pipeline.storage.store import Store

QUERY = "cordless drill"
Moment = Callable[[Path, str], bool]  # (index home, the build served before) -> has the moment come


def _index(copy: dict[str, Any], hash_seed: str) -> subprocess.Popen:
    """``deepsent index`` of the model on the copy's store, as a real subprocess."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": copy["tracking"], "PYTHONHASHSEED": hash_seed, "DEEPSENT_DEVICE": "cpu"}
    return subprocess.Popen([sys.executable, "-m", "deepsent.cli", "--json", "index", *copy["argv"]], cwd=PROJECT_ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _search(capsys: pytest.CaptureFixture[str], copy: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["--json", "search", QUERY, *copy["argv"]])
    return code, json.loads(capsys.readouterr().out)


def _live(home: Path) -> str:
    return json.loads((home / "current.json").read_text())["build"]


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_rebuild_gives_the_same_bytes_and_keeps_the_build_it_replaced(indexed_copy: dict[str, Any],
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    home = indexed_copy["store"] / indexed_copy["home"]
    first = _live(home)
    proc = _index(indexed_copy, hash_seed="1")  # another process, another hash seed than the fixture's build
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()[-2000:]
    second = _live(home)
    assert second != first and json.loads(out)["build"].endswith(second)
    assert sorted(p.name for p in (home / "builds").iterdir()) == sorted([first, second])  # the replaced one stays
    old, new = _files(home / "builds" / first), _files(home / "builds" / second)
    assert len(old) == 8 and set(old) == set(new)
    old.pop("manifest.json"), new.pop("manifest.json")
    assert old == new  # index.faiss, ids.parquet and every BM25 file, byte for byte
    manifests = [json.loads((home / "builds" / b / "manifest.json").read_text()) for b in (first, second)]
    assert manifests[1]["refresh"] == {"since": first, "added": 0, "dropped": 0, "retitled": 0}  # the same corpus
    for manifest in manifests:
        del manifest["build_seconds"], manifest["refresh"]  # the time taken, what changed since: all else the same
    assert manifests[0] == manifests[1]
    code, found = _search(capsys, indexed_copy)
    assert code == 0 and found["index"].endswith(second)


def _appeared(relpath: str) -> Moment:
    """The moment ``relpath`` exists in the new build folder (any build but the one served before)."""
    def moment(home: Path, old: str) -> bool:
        builds = home / "builds"
        return builds.exists() and any((b / relpath).exists() for b in builds.iterdir() if b.name != old)
    return moment


def _after(seconds: float) -> Moment:
    began = time.monotonic()
    return lambda home, old: time.monotonic() - began >= seconds


def _switched(home: Path, old: str) -> bool:
    try:
        return _live(home) != old
    except (OSError, ValueError):
        return False


#: When each kill lands (a factory each, so that a timed moment starts with its own subprocess).
MOMENTS: dict[str, Callable[[], Moment]] = {
    "1.5 s after the start (importing)": lambda: _after(1.5),
    "4 s after the start (loading the model)": lambda: _after(4.0),
    "the build folder appears (index.faiss)": lambda: _appeared("index.faiss"),
    "ids.parquet written": lambda: _appeared("ids.parquet"),
    "BM25 files written (choosing the mode)": lambda: _appeared("bm25/vocab.index.json"),
    "the build's manifest written": lambda: _appeared("manifest.json"),
    "current.json switched (removing old builds)": lambda: _switched,
}


#: The moments at which a kill must leave the old build served (the new one cannot be switched in yet), and the one
#: after which the new one must be.
OLD_SERVED, NEW_SERVED = "1.5 s after the start (importing)", "current.json switched (removing old builds)"


@pytest.mark.parametrize("moment_name", list(MOMENTS))
def test_search_answers_after_index_is_killed_at_any_moment(moment_name: str, indexed_copy: dict[str, Any],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """One ``deepsent index`` subprocess killed at the moment (a test per moment: each a few seconds)."""
    home = indexed_copy["store"] / indexed_copy["home"]
    code, before = _search(capsys, indexed_copy)
    assert code == 0
    old, moment = _live(home), MOMENTS[moment_name]()
    proc = _index(indexed_copy, hash_seed=str(list(MOMENTS).index(moment_name) + 2))
    while not moment(home, old) and proc.poll() is None:
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    code, found = _search(capsys, indexed_copy)
    assert code == 0, found
    live = _live(home)
    assert found["index"].endswith(f"builds/{live}") and found["hits"] == before["hits"]
    served = "new build" if live != old else "old build"
    with capsys.disabled():  # shown with -s
        print(f"\nserved after the kill at {moment_name}: {served}" + (" (it had exited)" if proc.returncode == 0 else ""))
    if moment_name in (OLD_SERVED, NEW_SERVED):
        assert served == ("old build" if moment_name == OLD_SERVED else "new build")
    # a later rebuild removes what the kill left: superseded builds at once, half-written ones once stale
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(index_builds, "STALE_BUILD_S", 0)
        index_builds.publish(Store(str(indexed_copy["store"])), indexed_copy["home"],
                             f"{indexed_copy['home']}/builds/{_live(home)}")
    assert os.listdir(home / "builds") == [_live(home)] and _search(capsys, indexed_copy)[0] == 0


def test_an_index_written_before_builds_serves_until_rebuilt(indexed_copy: dict[str, Any],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    home = indexed_copy["store"] / indexed_copy["home"]
    for item in (home / "builds" / _live(home)).iterdir():  # the old layout: files in the home, no pointer
        item.rename(home / item.name)
    shutil.rmtree(home / "builds")
    (home / "current.json").unlink()
    code, found = _search(capsys, indexed_copy)
    assert code == 0 and found["index"] == str(home)
    assert _index(indexed_copy, hash_seed="3").wait(timeout=600) == 0
    assert sorted(p.name for p in home.iterdir()) == ["builds", "current.json"]  # the old files removed
    code, again = _search(capsys, indexed_copy)
    assert code == 0 and again["hits"] == found["hits"] and again["index"].endswith(_live(home))


def test_a_damaged_pointer_is_one_line(indexed_copy: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    pointer = indexed_copy["store"] / indexed_copy["home"] / "current.json"
    for text, reason in (('{"build": ', "not a readable manifest"), ('{"build": "../x"}', "names no build"),
                         ('{"build": "20260101T000000Z-0123abcd"}', "which has no manifest.json")):
        pointer.write_text(text)
        code, result = _search(capsys, indexed_copy)
        assert code == 2 and result["error"].startswith(f"{pointer}: ") and reason in result["error"], result
        assert result["error"].endswith(f"rebuild it with `deepsent index --model-uri {indexed_copy['model_uri']}`")
