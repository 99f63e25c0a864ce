"""``deepsent index`` and ``deepsent search`` end to end on a tiny trained LSTM and the real corpus titles."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow.parquet as pq
import pytest

from deepsent.cli import main
from encoders.model.loading import load_encoder
from encoders.search.bm25 import BM25Index
from encoders.search.index_builds import live_folder
from encoders.training.results import TrainResult
from pipeline.core.config import Settings
from pipeline.storage.store import Store
from tests.conftest import private_copy


@pytest.fixture(scope="module")
def indexed(trained_run: tuple[Settings, TrainResult], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A private copy of the trained run's store and MLflow database, indexed once through the CLI, exactly (the exact
    bound raised above its corpus, so searches compare with brute force; the IVF: ``test_approximate_index_...``)."""
    from encoders.search import vector_index as vi

    shared, trained = trained_run
    settings = private_copy(shared, tmp_path_factory.mktemp("search"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", settings.mlflow_tracking_uri)
        mp.setattr(vi, "EXACT_MAX", 10**9)
        yield {"settings": settings, "trained": trained, "argv": ["--store", settings.store, "--data-dir",
                                                                 str(settings.data_dir)]}


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    """Exit code, the one JSON object printed on stdout, and stderr of ``deepsent --json ARGV``."""
    capsys.readouterr()
    code = main(["--json", *argv])
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1
    return code, json.loads(out), err


def test_index_then_search_equals_brute_force(indexed: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    settings, trained, argv = indexed["settings"], indexed["trained"], indexed["argv"]
    store = Store.from_settings(settings)
    code, built, _ = cli(capsys, "index", "--model-uri", trained.registry_uri, *argv)
    assert code == 0 and 0 < built["encoded"] <= built["count"] and built["version"] == trained.registered_version
    assert built["index_type"] == "IndexFlatIP" and built["run_id"] == trained.run_id
    root, build = f"indexes/lstm/{trained.registered_version}", store.relpath(built["build"])
    assert store.relpath(built["root"]) == root and build.startswith(f"{root}/builds/")
    bm25_files = [f"{build}/bm25/{name}" for name in ("data.csc.index.npy", "indices.csc.index.npy",
                                                      "indptr.csc.index.npy", "params.index.json", "vocab.index.json")]
    assert sorted(store.list_files(root)) == [*bm25_files, f"{build}/ids.parquet", f"{build}/index.faiss",
                                              f"{build}/manifest.json", f"{root}/current.json"]
    assert live_folder(store, root, "") == build  # the pointer names the one build there is
    manifest = store.read_json(f"{build}/manifest.json")
    titles = store.read_table(f"{build}/ids.parquet")
    assert manifest["count"] == titles.num_rows == built["count"] == manifest["titles"]["rows"]
    assert manifest["dim"] == 16 and manifest["model_uri"] == trained.registry_uri
    assert [store.exists(f"vectors/{key}") for key in manifest["vectors"]] == [True]  # read from the stored vectors
    # indexing again encodes nothing (the vectors are in the store) and gives the same bytes
    code, again, _ = cli(capsys, "index", "--model-uri", trained.registry_uri, *argv)
    assert code == 0 and again["encoded"] == 0 and again["count"] == built["count"]
    rebuilt = store.relpath(again["build"])
    assert all(store.read_bytes(f"{rebuilt}/{name}") == store.read_bytes(f"{build}/{name}")
               for name in ("index.faiss", "ids.parquet", *(f[len(build) + 1:] for f in bm25_files)))
    # the top 5 of a query are the numpy top 5 of the stored title vectors by cosine
    query = "cordless drill"
    code, found, _ = cli(capsys, "search", query, "--k", "5", "--mode", "dense", "--model-uri", trained.registry_uri,
                         *argv)
    assert code == 0 and [h["rank"] for h in found["hits"]] == [1, 2, 3, 4, 5]
    plain = load_encoder(trained.registry_uri, settings)  # brute force with the model itself, not the store
    vectors = plain.encode(titles["title"].to_pylist(), "doc")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    q = plain.encode([query], "query")[0]
    scores = vectors @ (q / np.linalg.norm(q))
    best = np.argsort(-scores, kind="stable")[:5]
    assert [h["doc_id"] for h in found["hits"]] == titles["doc_id"].take(best).to_pylist()
    assert [h["title"] for h in found["hits"]] == titles["title"].take(best).to_pylist()
    np.testing.assert_allclose([h["score"] for h in found["hits"]], scores[best], atol=1e-5)
    # BM25 as served (loaded from the index folder) ranks like a BM25 fitted afresh on the same titles
    code, lexical, _ = cli(capsys, "search", query, "--k", "5", "--mode", "bm25", "--model-uri", trained.registry_uri,
                           *argv)
    fresh = BM25Index()
    fresh.fit_corpus(titles["title"].to_pylist())
    fresh_scores = fresh.corpus_scores(query)
    fresh_best = np.argsort(-fresh_scores, kind="stable")[:5]
    assert code == 0 and [h["doc_id"] for h in lexical["hits"]] == titles["doc_id"].take(fresh_best).to_pylist()
    np.testing.assert_allclose([h["score"] for h in lexical["hits"]], fresh_scores[fresh_best])
    assert manifest["bm25"]["documents"] == titles.num_rows and {h["found_by"] for h in lexical["hits"]} <= {"bm25", "dense+bm25"}
    # the readable summary lists the hits
    assert main(["search", query, "--k", "5", "--mode", "dense", "--model-uri", trained.registry_uri, *argv]) == 0
    printed = capsys.readouterr().out
    assert found["hits"][0]["doc_id"] in printed and printed.count("\n") == 7  # the title line, 5 hits, the timing
    assert "deepsent serve loads them once" in printed.splitlines()[-1]


def test_batch_search_writes_parquet(indexed: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    settings, trained, argv = indexed["settings"], indexed["trained"], indexed["argv"]
    if not Store.from_settings(settings).exists(f"indexes/lstm/{trained.registered_version}/current.json"):
        assert main(["index", "--model-uri", trained.registry_uri, *argv]) == 0
    queries = tmp_path / "my queries.txt"
    queries.write_text("cordless drill\n\n  ceiling fan  \nwasher\n", encoding="utf-8")
    code, result, _ = cli(capsys, "search", "--queries", str(queries), "--k", "3", "--model-uri",
                          trained.registry_uri, *argv)
    assert code == 0 and result["queries"] == 3 and result["rows"] == 9
    assert result["out"] == str(Path(settings.store) / "search" / "my queries.parquet")
    table = pq.read_table(result["out"])
    assert table.column_names == ["query", "rank", "doc_id", "title", "score", "found_by"]
    assert table["query"].to_pylist() == ["cordless drill"] * 3 + ["ceiling fan"] * 3 + ["washer"] * 3
    assert table["rank"].to_pylist() == [1, 2, 3] * 3
    single = cli(capsys, "search", "ceiling fan", "--k", "3", "--model-uri", trained.registry_uri, *argv)[1]
    assert table["doc_id"].to_pylist()[3:6] == [h["doc_id"] for h in single["hits"]]
    outside = tmp_path / "outside.parquet"
    for flags, message in (((str(queries), "--out", "../../outside.parquet"), "a path with '..' is refused"),
                           ((str(queries), "--out", str(outside)), "is not under the store root"),
                           ((str(tmp_path),), "a directory, not a file of queries"),
                           ((str(queries), "--out", "pairs/train.parquet"), "is not a deepsent search result"),
                           ((str(queries), "--out", "search/x.csv"), "give a .parquet file name")):
        code, refused, err = cli(capsys, "search", "--queries", *flags, "--model-uri", trained.registry_uri, *argv)
        assert code == 2 and message in refused["error"] and "Traceback" not in err, flags
    assert not outside.exists() and not (Path(settings.store).parents[1] / "outside.parquet").exists()
    code, again, _ = cli(capsys, "search", "--queries", str(queries), "--k", "3", "--model-uri", trained.registry_uri,
                         *argv)
    assert code == 0 and again["out"] == result["out"]  # an earlier search result is overwritten
    code, refused, _ = cli(capsys, "search", "  ", "--model-uri", trained.registry_uri, *argv)
    assert code == 2 and refused["error"] == "the query is empty: give a query with at least one word"


def test_missing_champion_index_and_alias(indexed: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    settings, trained, argv = indexed["settings"], indexed["trained"], indexed["argv"]
    for command in (["search", "drill"], ["index"]):
        code, result, err = cli(capsys, *command, *argv)
        assert code == 2 and result == {"error": "no champion: models:/deepsent-ranker@champion is not set; "
                                                 "pass --model-uri or run deepsent promote"}
        assert err.strip() == f"deepsent: error: {result['error']}"
    runs_uri = trained.model_uri  # runs:/<id>/model: version = run id, never indexed
    code, result, err = cli(capsys, "search", "drill", "--model-uri", runs_uri, *argv)
    assert code == 2 and result["error"].startswith(f"no index for lstm version {trained.run_id} at ")
    assert result["error"].endswith(f": run deepsent index --model-uri {runs_uri}") and len(err.splitlines()) == 1
    code, result, _ = cli(capsys, "search", "drill", "--k", "0", *argv)
    assert code == 2 and "--k: '0' is not a whole number from 1 to 10,000" in result["error"]
    # an alias resolves to its registry version, hence to the same index folder
    from mlflow import MlflowClient

    if not Store.from_settings(settings).exists(f"indexes/lstm/{trained.registered_version}/current.json"):
        assert main(["index", "--model-uri", trained.registry_uri, *argv]) == 0
    name = trained.registered_name
    MlflowClient(settings.mlflow_tracking_uri).set_registered_model_alias(name, "champion", trained.registered_version)
    code, result, _ = cli(capsys, "search", "drill", "--k", "2", "--model-uri", f"models:/{name}@champion", *argv)
    assert code == 0 and result["version"] == trained.registered_version and len(result["hits"]) == 2


def test_approximate_index_from_the_store(indexed: dict[str, Any]) -> None:
    """Above the exact threshold: IVF over fp16 codes tuned on training click queries (never judged ones), searching
    like brute force."""
    from encoders.search.served_index import ServedIndex

    settings, trained = indexed["settings"], indexed["trained"]
    store = Store.from_settings(settings)
    uri = trained.model_uri  # runs:/<id>/model: its own folder, indexes/lstm/<run id>
    try:
        built = ServedIndex.build(settings, uri, seed=3, exact_max=1000)
        manifest = store.read_json(store.relpath(built.manifest))
        assert built.index_type == manifest["index_type"] == "IndexIVFScalarQuantizer" and built.version == trained.run_id
        params = manifest["params"]
        assert params["codes"] == "fp16" and params["tune_recall_at_10"] >= 0.95 and params["nlist"] == round(4 * manifest["count"] ** 0.5)
        train_queries = set(store.read_table("pairs/train.parquet", columns=["query"])["query"].to_pylist())
        assert params["tune_queries"] == min(1000, len(train_queries))  # the training click queries, not judged ones
        searcher = ServedIndex.open(settings, uri)
        valid = store.read_table("pairs/valid.parquet", columns=["query"])["query"].to_pylist()
        queries = sorted(set(valid))[:200]  # held-out click queries: never the ones nprobe was tuned on
        found = searcher.search(queries, 10, "dense")
        titles = store.read_table(f"{store.relpath(built.build)}/ids.parquet")
        vectors = load_encoder(uri, settings).encode(titles["title"].to_pylist(), "doc")
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        q = searcher.encoder.encode(queries, "query")
        best = np.argsort(-(q / np.linalg.norm(q, axis=1, keepdims=True)) @ vectors.T, axis=1, kind="stable")[:, :10]
        doc_ids, by_query = np.asarray(titles["doc_id"].to_pylist()), {}
        for query, doc in zip(found["query"].to_pylist(), found["doc_id"].to_pylist()):
            by_query.setdefault(query, set()).add(doc)
        hits = sum(len(by_query.get(query, set()) & set(doc_ids[b])) for query, b in zip(queries, best))
        assert hits / (10 * len(queries)) >= 0.9  # tuned to 0.97 on training queries; a margin for unseen ones
    finally:
        store.delete(f"indexes/lstm/{trained.run_id}")


def test_rrf_search_fuses_the_index_with_bm25(indexed: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    from encoders.search.bm25 import BM25Index
    from encoders.search.fusion import fuse_ranked

    settings, trained, argv = indexed["settings"], indexed["trained"], indexed["argv"]
    store = Store.from_settings(settings)
    root = f"indexes/lstm/{trained.registered_version}"
    if not store.exists(f"{root}/current.json"):
        assert main(["index", "--model-uri", trained.registry_uri, *argv]) == 0
    query = "cordless drill"
    code, dense, _ = cli(capsys, "search", query, "--k", "100", "--mode", "dense", "--model-uri", trained.registry_uri,
                         *argv)
    code, rrf, _ = cli(capsys, "search", query, "--k", "5", "--mode", "rrf", "--model-uri", trained.registry_uri, *argv)
    assert code == 0 and rrf["mode"] == "rrf" and [h["rank"] for h in rrf["hits"]] == [1, 2, 3, 4, 5]
    ids = store.read_table(f"{live_folder(store, root, '')}/ids.parquet")
    row_of = {d: i for i, d in enumerate(ids["doc_id"].to_pylist())}
    bm25 = BM25Index()
    bm25.fit_corpus(ids["title"].to_pylist())
    lexical = bm25.corpus_scores(query)
    top = [int(r) for r in np.argsort(-lexical, kind="stable")[:100] if lexical[r] > 0]
    expected = fuse_ranked([[row_of[h["doc_id"]] for h in dense["hits"]], top])[:5]
    assert [row_of[h["doc_id"]] for h in rrf["hits"]] == [r for r, _ in expected]
    np.testing.assert_allclose([h["score"] for h in rrf["hits"]], [s for _, s in expected])
    assert any("drill" in h["title"] for h in rrf["hits"])  # BM25's word match reaches the top 5


def test_rerank_and_the_default_mode_chosen_on_the_gate_set(indexed: dict[str, Any],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from encoders.search.modes import MODES

    settings, trained, argv = indexed["settings"], indexed["trained"], indexed["argv"]
    store = Store.from_settings(settings)
    root = f"indexes/lstm/{trained.registered_version}"
    if not store.exists(f"{root}/current.json"):
        assert main(["index", "--model-uri", trained.registry_uri, *argv]) == 0
    choice = store.read_json(f"{live_folder(store, root, '')}/manifest.json")["search"]
    assert choice["default_mode"] in MODES and set(choice["ndcg_at_10"]) == set(MODES)
    assert choice["queries"] > 10 and choice["chosen_on"].startswith("gate set gate-slice")
    # the better single first stage, unless the best fused mode beats it by a bootstrap CI above zero
    assert choice["reference_mode"] in ("dense", "bm25") and choice["default_mode"] in (choice["reference_mode"],
                                                                                      choice["best_fused_mode"])
    assert (choice["default_mode"] == choice["best_fused_mode"]) == (choice["margin"]["ci_low"] > 0)
    code, default, _ = cli(capsys, "search", "cordless drill", "--model-uri", trained.registry_uri, *argv)
    assert code == 0 and default["mode"] == choice["default_mode"]  # what is served is what was measured best

    query = "cordless drill"
    code, rerank, _ = cli(capsys, "search", query, "--k", "20", "--mode", "rerank", "--model-uri", trained.registry_uri,
                          *argv)
    code, dense, _ = cli(capsys, "search", query, "--k", "100", "--mode", "dense", "--model-uri",
                         trained.registry_uri, *argv)
    assert code == 0 and rerank["mode"] == "rerank" and len(rerank["hits"]) == 20
    encoder = load_encoder(trained.registry_uri, settings)
    q = encoder.encode([query], "query")[0]
    t = encoder.encode([h["title"] for h in rerank["hits"]], "doc")
    cosines = (t / np.linalg.norm(t, axis=1, keepdims=True)) @ (q / np.linalg.norm(q))
    np.testing.assert_allclose([h["score"] for h in rerank["hits"]], cosines, rtol=1e-4, atol=1e-5)  # the model's cosine
    assert [h["score"] for h in rerank["hits"]] == sorted((h["score"] for h in rerank["hits"]), reverse=True)
    dense_ids = {h["doc_id"] for h in dense["hits"]}
    assert all(("dense" in h["found_by"]) == (h["doc_id"] in dense_ids) for h in rerank["hits"])
    assert all("bm25" in h["found_by"] for h in rerank["hits"]) and all({"cordless", "drill"} & set(h["title"].split()) for h in rerank["hits"])


def test_ann_negatives_are_the_models_dense_top_of_the_split(indexed: dict[str, Any]) -> None:
    """``featurize --negative-source ann`` mines the champion's index: its dense top titles of the split, unclicked."""
    from encoders.search.served_index import ServedIndex
    from encoders.search.mining import DEPTH, mine_negatives, mined_path

    settings, trained, argv = indexed["settings"], indexed["trained"], indexed["argv"]
    store = Store.from_settings(settings)
    if not store.exists(f"indexes/lstm/{trained.registered_version}/current.json"):
        assert main(["index", "--model-uri", trained.registry_uri, *argv]) == 0
    manifest = mine_negatives(settings, "ann", trained.registry_uri)
    assert manifest["model_uri"] == trained.registry_uri and manifest["counts"]["train"]["mined"] > 0
    pairs = {s: store.read_table(f"pairs/{s}.parquet") for s in ("train", "valid")}
    clicked = {(q, t) for p in pairs.values() for q, t in zip(p["query"].to_pylist(), p["title"].to_pylist())}
    pool = set(pairs["train"]["title"].to_pylist())
    mined = store.read_table(mined_path("ann", "train"))
    rows = list(zip(mined["query"].to_pylist(), mined["title"].to_pylist()))
    assert not set(rows) & clicked and set(mined["title"].to_pylist()) <= pool and len(rows) == len(set(rows))
    searcher = ServedIndex.open(settings, trained.registry_uri)
    for query in sorted(set(mined["query"].to_pylist()))[:10]:
        dense = [searcher.titles[r] for r, _, _ in searcher.hits([query], DEPTH * 5, "dense")[0]]
        expected = [t for t in dict.fromkeys(dense) if t in pool][:DEPTH]
        assert [t for q, t in rows if q == query] == [t for t in expected if (query, t) not in clicked]
