"""``deepsent serve`` swaps what it serves without a dropped request, refuses a damaged build, follows a promotion,
and answers the same after SIGKILL and a restart: real uvicorn subprocesses, real ``deepsent index`` builds.

Clients are threads with httpx on loopback, each in a bounded loop; every answer names its version and build, and its
hits must be that build's hits for the query (collected from the server before and after the swap), never a mix.
"""
from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from encoders.search import index_builds
from tests.deepsent.conftest import first_rows_data_dir
from tests.deepsent.serve_load import Clients, build_answers, publish_index, wait_until
from tests.deepsent.serve_process import Served, metric, private_index, start

pytestmark = [pytest.mark.services, pytest.mark.slow]  # real uvicorn servers and deepsent index subprocesses


@pytest.fixture()
def index(small_index: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """A private copy of the small index."""
    return private_index(small_index, tmp_path)


def _metric(served: Served, name: str) -> float:
    with served.client() as client:
        return metric(client.get("/metrics").text, name)


def test_a_new_build_swaps_in_under_load_without_a_failed_or_mixed_answer(index: dict[str, Any], tmp_path: Path
                                                                          ) -> None:
    served = start(index, "--poll-seconds", "0.5")
    try:
        old, before = build_answers(served)
        other_corpus = first_rows_data_dir(index["data_dir"], tmp_path / "data-1500", rows=1500)
        with Clients(served, 4) as clients:
            publish_index(index, index["model_uri"], other_corpus)
            wait_until(lambda: len(clients.builds()) == 2, "no answer from the new build")
            time.sleep(1.0)  # answers of the new build for a while
        new, after = build_answers(served)
        swaps = _metric(served, "deepsent_serve_swaps_total")
    finally:
        assert served.stop() == 0
    assert new != old and after != before and swaps == 1
    expected = {old: before, new: after}
    answers = [answer for client in clients.seen for answer in client]
    assert len(answers) > 100 and {status for status, *_ in answers} == {200}, {a[0]: a[4] for a in answers if a[0] != 200}
    for status, build, query, mode, hits in answers:
        assert hits == expected[build][(query, mode)], (build, query, mode)
    assert min(Counter(build for _, build, *_ in answers).values()) >= 10  # the swap came in the middle of the load
    for client in clients.seen:  # each client sees the old build, then the new one, never back
        order = [build for _, build, *_ in client]
        assert order == sorted(order, key=[old, new].index)


def _copy_build(store: Path, home: str, build: str) -> str:
    """A copy of ``build`` under a new build id (the id alone differs); the copy's id."""
    import shutil

    copy = index_builds.new_build(home).rsplit("/", 1)[-1]
    shutil.copytree(store / home / "builds" / build, store / home / "builds" / copy)
    return copy


def _point(store: Path, home: str, text: str) -> None:
    """Rewrite ``current.json`` at once (a rename, as a publish does)."""
    pointer = store / home / "current.json"
    pointer.with_suffix(".tmp").write_text(text)
    pointer.with_suffix(".tmp").replace(pointer)


def test_a_damaged_build_is_refused_while_the_old_one_keeps_serving(index: dict[str, Any]) -> None:
    store, home = index["store"], index["home"]
    served = start(index, "--poll-seconds", "0.3")
    try:
        old, before = build_answers(served)
        _point(store, home, "{not json")  # a damaged pointer: the poll fails, the old build serves
        wait_until(lambda: _metric(served, "deepsent_serve_poll_errors_total") >= 1, "no failed poll")
        damaged = _copy_build(store, home, old)
        faiss = store / home / "builds" / damaged / "index.faiss"
        data = bytearray(faiss.read_bytes())
        data[len(data) // 2] ^= 0xFF
        faiss.write_bytes(bytes(data))
        _point(store, home, json.dumps({"build": damaged}))
        wait_until(lambda: _metric(served, "deepsent_serve_swaps_refused_total") == 1, "the damaged build not refused")
        time.sleep(1.5)  # five more polls: a refused build is not tried again while the pointer stays
        still = build_answers(served)
        refused = _metric(served, "deepsent_serve_swaps_refused_total")
        repaired = _copy_build(store, home, old)  # the pointer moves on to a good build: that one swaps in
        _point(store, home, json.dumps({"build": repaired}))
        wait_until(lambda: _metric(served, "deepsent_serve_swaps_total") == 1, "the good build not swapped in")
        now, after = build_answers(served)
    finally:
        assert served.stop() == 0
    assert still == (old, before) and refused == 1
    assert now == repaired and after == before  # the same bytes under another id: the same answers
    log = served.log_text()
    assert f"refused version 1 build {damaged}:" in log and "index.faiss" in log and "still serving" in log
    assert "could not look for a new index" in log and log.count("could not look for a new index") == 1


def test_a_promotion_swaps_in_the_new_version_once_its_index_is_published(index: dict[str, Any],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import mlflow
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=index["tracking"])
    first = client.get_model_version("deepsent-lstm", "1")
    client.set_registered_model_alias("deepsent-lstm", "champion", "1")
    # MLflow checks a new version's source (a logged model) in the process's tracking store, not the client's: point
    # it at this copy (another test of this worker may have left it on its own database)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", index["tracking"])
    mlflow.set_tracking_uri(index["tracking"])
    try:
        second = str(client.create_model_version("deepsent-lstm", first.source, first.run_id).version)
    finally:
        mlflow.set_tracking_uri(None)
    champion = {**index, "model_uri": "models:/deepsent-lstm@champion"}
    served = start(champion, "--poll-seconds", "0.3")
    try:
        _, before = build_answers(served)
        client.set_registered_model_alias("deepsent-lstm", "champion", second)  # promoted before it is indexed
        wait_until(lambda: "which has no index yet" in served.log_text(), "the new version's missing index not seen")
        waiting = build_answers(served)
        publish_index(index, f"models:/deepsent-lstm/{second}", index["data_dir"])
        wait_until(lambda: _metric(served, "deepsent_serve_swaps_total") == 1, "the promoted version not swapped in")
        with served.client() as http:
            ready = http.get("/readyz").json()
        refused = _metric(served, "deepsent_serve_swaps_refused_total")
    finally:
        assert served.stop() == 0
    assert waiting[1] == before and refused == 0
    assert ready["version"] == second and ready["model_uri"] == "models:/deepsent-lstm@champion"


def test_a_server_killed_with_sigkill_answers_the_same_after_a_restart(index: dict[str, Any]) -> None:
    served = start(index)
    before = build_answers(served)
    assert served.stop(signal.SIGKILL) == -signal.SIGKILL
    again = start(index)
    try:
        after = build_answers(again)
    finally:
        assert again.stop() == 0
    assert after == before
