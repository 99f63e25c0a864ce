"""Damaged stored vectors and indexes are one line naming the file and the command that rebuilds it.

A tiny trained LSTM encodes and indexes the real corpus once; each case copies that store, damages one
file the way a crash, a full disk or a careless copy would, and runs the real ``deepsent search`` or
``deepsent index``: exit code 2, one line, no traceback, and never a result from damaged data.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable, Iterator

import faiss
import numpy as np
import pytest

from deepsent.cli import main
from encoders.training.results import TrainResult
from pipeline.core.config import Settings
from tests.conftest import private_copy


@pytest.fixture(scope="module")
def built(trained_run: tuple[Settings, TrainResult], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A store with the tiny LSTM's stored title vectors and index, built through the CLI once, exactly (the exact
    bound raised above the corpus), so that an index of other vectors has the same bytes and only its checksum tells."""
    from encoders.search import vector_index as vi

    shared, trained = trained_run
    settings = private_copy(shared, tmp_path_factory.mktemp("verified"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri)
        mp.setattr(vi, "EXACT_MAX", 10**9)
        assert main(["index", "--model-uri", trained.registry_uri, "--store", settings.store,
                     "--data-dir", str(shared.data_dir)]) == 0
        yield {"store": Path(settings.store), "data_dir": shared.data_dir, "model_uri": trained.registry_uri,
               "run_id": trained.run_id}


def _run(capsys: pytest.CaptureFixture[str], built: dict[str, Any], store: Path, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main([*argv, "--model-uri", built["model_uri"], "--store", str(store), "--data-dir", str(built["data_dir"])])
    out, err = capsys.readouterr()
    return code, err


def _snapshot(store: Path) -> dict[str, str]:
    """Every file of the store and its SHA-256: what a refused command must leave exactly as it was."""
    import hashlib

    return {str(p.relative_to(store)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(store.rglob("*")) if p.is_file()}


def _index_folder(store: Path) -> Path:
    """The build the index's ``current.json`` names: the folder search serves."""
    home = next((store / "indexes").glob("*/*"))
    return home / "builds" / json.loads((home / "current.json").read_text())["build"]


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _another_index(path: Path) -> None:
    """A valid FAISS index of the same dimension, of other vectors (an index copied from another model)."""
    index = faiss.read_index(str(path))
    other = faiss.IndexFlatIP(index.d)
    other.add(np.random.default_rng(0).standard_normal((index.ntotal, index.d)).astype(np.float32))
    faiss.write_index(other, str(path))


def _edit_manifest(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        manifest = json.loads(path.read_text())
        change(manifest)
        path.write_text(json.dumps(manifest))
    return edit


def _legacy_truncated(folder: Path) -> None:
    """An index written before checksums were recorded, then truncated: FAISS's own read error, as one line."""
    _edit_manifest(lambda m: m.pop("files"))(folder / "manifest.json")
    _truncate(folder / "index.faiss")


SEARCH_CASES = {
    "truncated index.faiss": (lambda f: _truncate(f / "index.faiss"), "index.faiss: ", "bytes where"),
    "index.faiss of other vectors": (lambda f: _another_index(f / "index.faiss"), "index.faiss: ", "checksum differs"),
    "ids.parquet not Parquet": (lambda f: (f / "ids.parquet").write_bytes(b"PAR1 not really"), "ids.parquet: ", ""),
    "manifest.json not JSON": (lambda f: (f / "manifest.json").write_text("{\"run_id\": "), "manifest.json: ",
                               "not a readable manifest (JSONDecodeError)"),
    "manifest of another run": (lambda f: _edit_manifest(lambda m: m.update(run_id="0" * 32))(f / "manifest.json"),
                                "manifest.json: ", "an index of run 00000000"),
    "index.faiss missing": (lambda f: (f / "index.faiss").unlink(), "index.faiss: ", "missing"),
    "BM25 vocabulary replaced": (lambda f: (f / "bm25" / "vocab.index.json").write_text('{"drill": 0}'),
                                 "bm25/vocab.index.json: ", "bytes where"),
    "BM25 scores missing": (lambda f: (f / "bm25" / "data.csc.index.npy").unlink(), "bm25/data.csc.index.npy: ",
                            "missing"),
    "old index, truncated": (_legacy_truncated, "index.faiss: ", "not a readable FAISS index"),
}


@pytest.mark.parametrize("case", list(SEARCH_CASES))
def test_a_damaged_index_is_one_line_and_no_hits(built: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 case: str) -> None:
    damage, where, reason = SEARCH_CASES[case]
    store = tmp_path / "store"
    shutil.copytree(built["store"], store)
    damage(_index_folder(store))
    before = _snapshot(store)
    code, err = _run(capsys, built, store, "search", "cordless drill")
    assert _snapshot(store) == before  # the store unchanged
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert where in err and reason in err and f"rebuild it with `deepsent index --model-uri {built['model_uri']}`" in err


VECTOR_CASES = {
    "a vector part missing": (lambda f: next(f.glob("*.parquet")).unlink(), ".parquet: ",
                              "the vector part its record names is unreadable ("),
    "a vector part truncated": (lambda f: _truncate(next(f.glob("*.parquet"))), ".parquet: ",
                                "its checksum differs from the one recorded when it was written"),
    "a record that is not JSON": (lambda f: next(f.glob("*.json")).write_text("{not json"), ".json: ",
                                  "an unreadable vector part record ("),
}


@pytest.mark.parametrize("case", list(VECTOR_CASES))
def test_damaged_vectors_never_become_an_index(built: dict[str, Any], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str], case: str) -> None:
    damage, where, reason = VECTOR_CASES[case]
    store = tmp_path / "store"
    shutil.copytree(built["store"], store)
    shutil.rmtree(store / "indexes")
    folder = max((store / "vectors").iterdir(),  # the titles' tower (the other holds held-out click queries)
                 key=lambda f: sum(p.stat().st_size for p in f.glob("*.parquet")))
    damage(folder)
    before = _snapshot(store)
    code, err = _run(capsys, built, store, "index")
    assert _snapshot(store) == before  # the store unchanged: no index over a partial set, nothing encoded around it
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert where in err and reason in err and f"rebuild it with `rm -f {folder}/part-" in err, err  # that part only
    assert not (store / "indexes").exists()


def test_an_intact_store_still_searches(built: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(capsys, built, built["store"], "search", "cordless drill")
    assert code == 0, err
    manifest = json.loads((_index_folder(built["store"]) / "manifest.json").read_text())
    bm25_files = ["bm25/data.csc.index.npy", "bm25/indices.csc.index.npy", "bm25/indptr.csc.index.npy",
                  "bm25/params.index.json", "bm25/vocab.index.json"]
    assert sorted(manifest["files"]) == [*bm25_files, "ids.parquet", "index.faiss"]
    assert manifest["run_id"] == built["run_id"] and manifest["bm25"]["library"] == "bm25s"
