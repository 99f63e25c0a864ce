"""A stored vector part is bound to its key, and a title's vector is the same bytes whatever batch encoded it.

The hostile operator's cases of issue #45, each on a copy of the tiny chain's store (its champion indexed) and
through the real ``deepsent index``: a part of another model copied into the champion's key folder, a part of
another dimension, a 0-byte part, a part without its vector column, NaN vectors (each with a matching record), an
old record, and a file where the key folder should be are each exit 2 and one line naming the file and the
command that removes it, the store left as it was. Then: removing the key folder (the fix the lines suggest)
and indexing again gives the same ``index.faiss`` bytes; titles encoded in another order and shard split are the
same bytes; a model giving NaN stores nothing; and a Dask worker killed in the middle of an encode task still
leaves every title encoded exactly once.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import shutil
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from deepsent.cli import main
from encoders.model.loading import load_encoder
from encoders.model.text_encoder import TextEncoder, part_key
from encoders.model.vector_parts import NonFiniteVectors
from encoders.model.vector_store import PartVectors, StoredEncoder
from encoders.search.corpus_shards import corpus_texts, shard_count, shard_of
from encoders.towers.twotower import TwoTowerModel
from pipeline.core.config import Settings
from pipeline.storage.store import Store
from tests.tiny_chain import TinyChain, copy_of

CHAMPION = "models:/deepsent-ranker@champion"


@pytest.fixture()
def chain_copy(tiny_chain: TinyChain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A copy of the tiny chain's store, its champion's encoder, and the folder of its first document part's
    vectors (a trigram tower or an ensemble's LSTM-RNN half)."""
    settings = copy_of(tiny_chain, tiny_chain.settings.with_overrides(store=str(tmp_path / "store")))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri)
    PartVectors._memo.clear()  # a new process would have read nothing yet
    encoder = load_encoder(CHAMPION, settings)
    part = encoder.parts("doc")[0]
    folder = Path(settings.store) / "vectors" / part_key(part, encoder)
    assert sorted(folder.glob("*.json")), "the chain stored the champion's title vectors"
    return {"settings": settings, "encoder": encoder, "folder": folder, "dim": part.module.out_dim}


def _index(capsys: pytest.CaptureFixture[str], settings: Settings) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["index", "--model-uri", CHAMPION, "--store", settings.store, "--data-dir", str(settings.data_dir)])
    return code, capsys.readouterr().err


def _snapshot(store: Path) -> dict[str, str]:
    return {str(p.relative_to(store)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(store.rglob("*")) if p.is_file()}


def _largest_record(folder: Path) -> Path:
    return max(folder.glob("*.json"), key=lambda r: json.loads(r.read_text())["rows"])


def _rewrite(record: Path, table: pa.Table | None = None, data: bytes | None = None, **fields: Any) -> None:
    """Replace the part ``record`` names with ``table`` (or raw ``data``) and make its record match it again."""
    if data is None:
        sink = io.BytesIO()
        pq.write_table(table, sink)
        data = sink.getvalue()
    part = record.with_suffix(".parquet")
    part.write_bytes(data)
    facts = json.loads(record.read_text())
    facts.update(size=len(data), sha256=hashlib.sha256(data).hexdigest(), **fields)
    record.write_text(json.dumps(facts))


def _part_table(record: Path) -> pa.Table:
    return pq.read_table(record.with_suffix(".parquet"))


def _with_vectors(table: pa.Table, vectors: np.ndarray) -> pa.Table:
    flat = pa.array(vectors.astype(np.float32).reshape(-1), pa.float32())
    return pa.table({"text": table["text"], "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])})


def _vectors(table: pa.Table) -> np.ndarray:
    return np.stack(table["vector"].to_numpy(zero_copy_only=False)).astype(np.float32)


def _foreign(case: dict[str, Any], tmp_path: Path) -> Path:
    """A part of another model (a random LSTM-RNN of the same dimension) copied with its record into the folder."""
    champion = case["encoder"]
    torch.manual_seed(3)
    other = TextEncoder(TwoTowerModel("lstm", champion.vocab.size, {"ncell": case["dim"]}), champion.vocab,
                        champion.max_words)
    scratch = Store(str(tmp_path / "elsewhere"))
    titles = [t for t, _ in zip(corpus_texts(case["settings"], scratch), range(50))]
    StoredEncoder(other, scratch).encode(titles, "doc")
    record = next((tmp_path / "elsewhere" / "vectors").rglob("*.json"))
    for found in (record, record.with_suffix(".parquet")):
        shutil.copy(found, case["folder"] / found.name)
    return case["folder"] / record.name


def _other_dimension(case: dict[str, Any], tmp_path: Path) -> Path:
    record = _largest_record(case["folder"])
    table = _part_table(record)
    vectors = _vectors(table)
    _rewrite(record, _with_vectors(table, np.hstack([vectors, vectors[:, :1]])), dim=case["dim"] + 1)
    return record


def _empty(case: dict[str, Any], tmp_path: Path) -> Path:
    record = _largest_record(case["folder"])
    _rewrite(record, data=b"")
    return record.with_suffix(".parquet")


def _no_vector_column(case: dict[str, Any], tmp_path: Path) -> Path:
    record = _largest_record(case["folder"])
    _rewrite(record, _part_table(record).select(["text"]))
    return record.with_suffix(".parquet")


def _nan(case: dict[str, Any], tmp_path: Path) -> Path:
    record = _largest_record(case["folder"])
    table = _part_table(record)
    vectors = _vectors(table)
    vectors[len(vectors) // 2, 0] = np.nan
    _rewrite(record, _with_vectors(table, vectors))
    return record.with_suffix(".parquet")


def _old_record(case: dict[str, Any], tmp_path: Path) -> Path:
    record = _largest_record(case["folder"])
    facts = json.loads(record.read_text())
    record.write_text(json.dumps({k: v for k, v in facts.items() if k not in ("format", "key", "part", "run_id")}))
    return record


def _file_for_folder(case: dict[str, Any], tmp_path: Path) -> Path:
    shutil.rmtree(case["folder"])
    case["folder"].write_text("not a folder")
    return case["folder"]


#: case -> (damage returning the file the line must name, words of the reason, removal command: part or folder)
CASES: dict[str, tuple[Callable[[dict[str, Any], Path], Path], str, str]] = {
    "a part of another model copied in": (_foreign, "a vector part of key ", "part"),
    "a part of another dimension": (_other_dimension, "-dimensional vectors where this encoder part gives", "part"),
    "a 0-byte part": (_empty, "not readable Parquet", "part"),
    "a part without its vector column": (_no_vector_column, "its columns are (text string), not", "part"),
    "NaN vectors": (_nan, "1 vector(s) with a NaN or infinite value", "part"),
    "a record of the old format": (_old_record, "recorded by format 1", "folder"),
    "a file where the key folder should be": (_file_for_folder, "a file where the folder of stored vectors should be",
                                              "file"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_vector_part_not_bound_to_its_folder_is_one_line_and_no_index(chain_copy: dict[str, Any], tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str],
                                                                          case: str) -> None:
    damage, reason, removal = CASES[case]
    named = damage(chain_copy, tmp_path)
    store = Path(chain_copy["settings"].store)
    before = _snapshot(store)
    code, err = _index(capsys, chain_copy["settings"])
    assert _snapshot(store) == before  # nothing indexed, nothing encoded around the bad part
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"deepsent: error: {named}: ") and reason in err, err
    record = named.with_suffix(".json")
    command = {"part": f"rm -f {record} {record.with_suffix('.parquet')}", "folder": f"rm -r {chain_copy['folder']}",
               "file": f"rm {named}"}[removal]
    assert f"rebuild it with `{command}`" in err, err


def test_removing_the_key_folder_and_indexing_again_gives_the_same_index_bytes(
        chain_copy: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """The chain stored the part's vectors over several stages (other batches); encoded again in one go, the same."""
    store = Path(chain_copy["settings"].store)
    home = next(p.parent for p in (store / "indexes").rglob("current.json"))
    served = home / "builds" / json.loads((home / "current.json").read_text())["build"] / "index.faiss"
    assert len(list(chain_copy["folder"].glob("*.json"))) > 1  # encoded in more than one batch split first
    shutil.rmtree(chain_copy["folder"])
    code, err = _index(capsys, chain_copy["settings"])
    assert code == 0, err
    rebuilt = home / "builds" / json.loads((home / "current.json").read_text())["build"] / "index.faiss"
    assert rebuilt != served and rebuilt.read_bytes() == served.read_bytes()


def test_titles_encoded_in_another_order_and_shard_split_are_the_same_bytes(tiny_chain: TinyChain,
                                                                           chain_copy: dict[str, Any],
                                                                           tmp_path: Path) -> None:
    """The chain's ensemble, whatever shipped: its LSTM-RNN half reads trigrams, its MiniLM half text."""
    encoder = load_encoder(tiny_chain.result["ensemble"]["model_uri"], chain_copy["settings"])
    assert [part.inputs for part in encoder.parts("doc")] == ["trigrams", "text"]
    titles = corpus_texts(chain_copy["settings"], Store(chain_copy["settings"].store))[::80]
    whole, split = Store(str(tmp_path / "whole")), Store(str(tmp_path / "split"))
    at_once = StoredEncoder(encoder, whole).encode(titles, "doc")
    shards = shard_count(len(titles), len(titles) // 3)
    for shard in reversed(range(shards)):  # other shards, other batches, in another order
        StoredEncoder(encoder, split).encode([t for t in titles[::-1] if shard_of(t, shards) == shard], "doc")
    PartVectors._memo.clear()
    assert StoredEncoder(encoder, split).encode(titles, "doc").tobytes() == at_once.tobytes()
    for part in encoder.parts("doc"):  # each part's vectors, byte for byte, alone in a batch as among all titles
        stored = PartVectors(whole, part, encoder).known()
        alone = [encoder.run_tower(part.module, part.inputs, [title]) for title in titles[:3]]
        assert [vector.tobytes() for vector in alone] == [stored[title].tobytes() for title in titles[:3]]


def test_a_model_giving_nan_stores_nothing(chain_copy: dict[str, Any], tmp_path: Path) -> None:
    champion = chain_copy["encoder"]
    model = TwoTowerModel("lstm", champion.vocab.size, {"ncell": 4})
    with torch.no_grad():
        model.towers()["doc"].cell.bias.fill_(float("nan"))
    broken = StoredEncoder(TextEncoder(model, champion.vocab, champion.max_words), Store(str(tmp_path / "s")))
    with pytest.raises(NonFiniteVectors, match=r"gave a NaN or infinite value in 2 of 2 vectors \(the first of "
                                               r"'cordless drill'\); none was stored"):
        broken.encode(["cordless drill", "led bulb"], "doc")
    assert not (tmp_path / "s" / "vectors").exists() or not list((tmp_path / "s" / "vectors").rglob("*.*"))


def test_a_dask_worker_killed_mid_task_leaves_each_title_encoded_once(trained_run, tmp_path: Path) -> None:  # noqa: ANN001
    """A real local cluster of two spawned workers; one is killed (SIGKILL) while it encodes a task; its nanny starts
    another, the task runs again, and the store holds exactly one vector per title, no part without its record."""
    import dask
    from dask.distributed import Client, LocalCluster

    from encoders.search.corpus_shards import encode_corpus

    shared, trained = trained_run
    shutil.copytree(shared.store, tmp_path / "store", ignore=shutil.ignore_patterns("vectors"))
    with dask.config.set({"distributed.worker.multiprocessing-method": "spawn"}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=":0")
    try:
        with Client(cluster, set_as_default=False) as client:
            settings = dataclasses.replace(shared, store=str(tmp_path / "store"),
                                           dask_address=cluster.scheduler_address)
            outcome: dict[str, Any] = {}
            worker = threading.Thread(target=lambda: outcome.update(result=encode_corpus(settings, trained.model_uri,
                                                                                       shard_titles=4_000)))
            worker.start()
            killed = _kill_a_worker_while_it_encodes(client)
            worker.join(timeout=120)
            restarted = set(client.run(os.getpid).values())
    finally:
        cluster.close()
    assert "result" in outcome and killed not in restarted
    store = tmp_path / "store"
    parts = sorted(store.glob("vectors/*/*.parquet"))
    assert sorted(p.with_suffix(".json") for p in parts) == sorted(store.glob("vectors/*/*.json"))  # no orphan part
    texts = Counter(t for p in parts for t in pq.read_table(p, columns=["text"])["text"].to_pylist())
    assert set(texts.values()) == {1} and set(texts) == set(corpus_texts(settings, Store.from_settings(settings)))


def _kill_a_worker_while_it_encodes(client: Any) -> int:
    """SIGKILL the process of a worker that is running a task; its pid."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        busy = client.run(lambda dask_worker: len(dask_worker.state.executing))
        pids = client.run(os.getpid)
        running = [address for address, count in busy.items() if count]
        if running and len(pids) == 2:
            os.kill(pids[running[0]], signal.SIGKILL)
            return pids[running[0]]
        time.sleep(0.05)
    raise AssertionError("no worker ran an encode task within 90 s")
