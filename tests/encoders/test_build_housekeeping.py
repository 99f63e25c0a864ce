"""Index build housekeeping that no folder name, clock or full disk can wedge.

Through ``deepsent index`` on a copy of the tiny chain's store (its champion already indexed): folders in
``builds/`` that are no build of ours (a build id with an impossible date, any other name) are left alone with a
warning and never fail a rebuild, before or after ``current.json`` switches; half-written builds left by killed
runs go whatever the time in their id (an hour old, or from the future); on a full disk (the conftest's 64 KiB
tmpfs under ``builds/``) a failed build is removed and the error says so, so a retry starts from an empty disk.
And ``current.json`` is never torn: a publishing process killed with SIGKILL in the middle of writing it leaves
the old pointer or the new one.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deepsent.cli import main
from encoders.search import index_builds as builds
from pipeline.core.config import PROJECT_ROOT, Settings
from pipeline.storage.store import Store
from tests.tiny_chain import TinyChain, copy_of


def _indexed_copy(chain: TinyChain, tmp_path: Path) -> tuple[Settings, Path]:
    """A copy of the chain's store and the home of its champion's index."""
    settings = copy_of(chain, chain.settings.with_overrides(store=str(tmp_path / "store")))
    (pointer,) = Path(settings.store).glob(f"indexes/*/*/{builds.POINTER}")
    return settings, pointer.parent


def _cli(capsys: pytest.CaptureFixture[str], settings: Settings, *argv: str) -> tuple[int, dict[str, Any], str]:
    capsys.readouterr()
    code = main(["--json", *argv, "--store", settings.store, "--data-dir", str(settings.data_dir)])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _live(home: Path) -> str:
    return json.loads((home / builds.POINTER).read_text())["build"]


def test_strange_folders_are_left_alone_and_half_written_builds_go_whatever_their_time(
        tiny_chain: TinyChain, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    settings, home = _indexed_copy(tiny_chain, tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri)
    served = _live(home)
    strange = ["20261399T999999Z-deadbeef", "notes"]  # an id's shape with month 13, and any other name
    half_written = ["29990101T000000Z-0000000f", "20200101T000000Z-0000000e"]  # from the future; years old
    for name in strange + half_written:
        (home / "builds" / name).mkdir()
        (home / "builds" / name / "index.faiss").write_bytes(b"partial")
    for _ in range(2):  # every later rebuild too
        caplog.clear()
        code, result, err = _cli(capsys, settings, "index")
        assert code == 0 and "Traceback" not in err, err[-3000:]
        warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        for name in strange:  # the CLI shows the project's warnings on stderr
            assert f"{home / 'builds' / name}: not a build of deepsent index (a build is named" in "\n".join(warned)
        assert result["build"].endswith(_live(home)) and _live(home) != served
        kept = sorted(p.name for p in (home / "builds").iterdir())
        assert kept == sorted([served, _live(home), *strange]), kept
        served = _live(home)
    code, found, _ = _cli(capsys, settings, "search", "cordless drill")
    assert code == 0 and found["index"].endswith(served)


def test_a_build_that_fills_the_disk_is_removed_and_said_so(tiny_chain: TinyChain, tmp_path: Path, tiny_disk: Path,
                                                            capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    settings, home = _indexed_copy(tiny_chain, tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri)
    for item in (home / "builds" / _live(home)).iterdir():  # the layout before builds: it serves with no builds/
        item.rename(home / item.name)
    shutil.rmtree(home / "builds")
    (home / builds.POINTER).unlink()
    (home / "builds").mkdir()
    mounted = subprocess.run(["mount", "--bind", str(tiny_disk), str(home / "builds")], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot bind the small tmpfs under builds/: {mounted.stderr.strip()}")
    try:
        for _ in range(2):  # the retry meets the same empty disk, not the first try's leftovers
            code, result, err = _cli(capsys, settings, "index")
            error = result["error"]
            assert code == 2 and err.splitlines() == [f"deepsent: error: {error}"], err[-3000:]
            assert "cannot write (no space left on the device)" in error and "nothing was left half-written" not in error
            assert error.startswith(f"{home / 'builds'}/") and error.endswith(" was removed"), error
            assert f"; the partial build {home / 'builds'}/" in error
            assert os.listdir(home / "builds") == [] and shutil.disk_usage(home / "builds").used < 16_384
    finally:
        subprocess.run(["umount", "-l", str(home / "builds")], check=False)
    code, found, _ = _cli(capsys, settings, "search", "cordless drill")
    assert code == 0 and found["index"] == str(home)  # the old index still serves


#: A process that switches the pointer from one complete build to another and stops itself (SIGSTOP) at the
#: ``argv[3]``-th line run by the store's write of ``current.json``, for the test to kill it there.
PUBLISHER = """
import os, signal, sys
from encoders.search import index_builds
from pipeline.storage import filesystems
from pipeline.storage.store import Store
store, home, stop_at, build = Store(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
lines_run = 0
def in_the_write(frame, event, arg):
    global lines_run
    if event == "line":
        lines_run += 1
        if lines_run == stop_at:
            os.kill(os.getpid(), signal.SIGSTOP)
    return in_the_write
def calls(frame, event, arg):
    target = str(frame.f_locals.get("target", ""))
    return in_the_write if frame.f_code is filesystems.write_atomically.__code__ and target.endswith("current.json") else None
sys.settrace(calls)
index_builds.publish(store, home, f"{home}/builds/{build}")
"""


def test_sigkill_at_every_line_of_the_current_json_write_leaves_the_old_or_the_new_pointer(store: Store) -> None:
    home, (new, old) = "indexes/lstm/3", ["20260101T000000Z-0000000a", "20260102T000000Z-0000000b"]
    for name in (new, old):  # each published once, the second replacing the first (so both stay)
        store.write_bytes(f"{home}/builds/{name}/index.faiss", name.encode())
        store.write_json(f"{home}/builds/{name}/manifest.json", {"build": name})
        builds.publish(store, home, f"{home}/builds/{name}")
    folder, outcomes = Path(store.uri(home)), []
    for stop_at in range(1, 100):
        store.write_json(f"{home}/{builds.POINTER}", {"build": old})  # back to the old pointer, both builds kept
        proc = subprocess.Popen([sys.executable, "-c", PUBLISHER, store.root, home, str(stop_at), new], cwd=PROJECT_ROOT)
        _, status = os.waitpid(proc.pid, os.WUNTRACED)
        if not os.WIFSTOPPED(status):  # past the write's last line: it ran to the end
            assert os.WEXITSTATUS(status) == 0 and _live(folder) == new
            break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        outcomes.append(_live(folder))  # whole JSON, naming a complete build
        assert builds.live_folder(store, home, "deepsent index") == f"{home}/builds/{outcomes[-1]}"
        assert outcomes[-1] in (old, new) and store.exists(f"{home}/builds/{outcomes[-1]}/manifest.json")
    assert len(outcomes) >= 4 and outcomes[0] == old and outcomes[-1] == new, outcomes  # killed before and after the rename
    assert outcomes == sorted(outcomes, key=[old, new].index)  # old until the rename, new from then on
