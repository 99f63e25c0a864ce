"""``deepsent compare --retrieval`` end to end on a synthetic corpus, and its one-line errors."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from eval.model_scorer import ModelScorer
from eval.retrieval.compare import Corpus, retrieval_compare

WORDS = ["drill", "hose", "lamp", "paint", "brush", "saw", "tile", "door", "rake", "fan", "pipe", "sink"]


class HashedWords:
    """A stand-in text encoder: a bag of hashed words (what load_encoder's TextEncoder provides)."""

    label, config, param_count, run_id = "hashed words", {"dim": 32}, 0, "0" * 32

    def encode(self, texts: list[str], side: str) -> np.ndarray:
        vectors = np.zeros((len(texts), 32), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.split():
                vectors[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % 32] += 1.0
        return vectors


def _corpus_and_judgments(tmp_path: Path) -> tuple[Corpus, Path]:
    """1,200 titles of three words; three queries judged on a few titles each (one query has no positive grade)."""
    rng = np.random.default_rng(0)
    titles = [" ".join(rng.choice(WORDS, 3)) + f" model{i}" for i in range(1200)]
    corpus = Corpus([str(i) for i in range(1200)], titles)
    lines = ["query,title,label,doc_id"]
    for query, docs in (("red drill", (5, 17, 900)), ("garden hose", (3, 44)), ("lamp", (8,))):
        lines += [f"{query},{titles[d]},{2 if (d % 2) else 0},{d}" for d in docs]
    path = tmp_path / "judged.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return corpus, path


def test_bm25_and_a_model_search_the_whole_corpus(settings, tmp_path: Path) -> None:
    corpus, path = _corpus_and_judgments(tmp_path)
    result = retrieval_compare(settings, judgments=path, baselines=["bm25"], models=["stand-in"], corpus=corpus,
                               model_scorer=lambda uri: ModelScorer(uri, loader=lambda u, s: HashedWords()))
    assert (result.queries, result.corpus_titles, result.depth, result.reference) == (2, 1200, 100, "BM25")
    bm25, model, rrf, rerank, linear = result.rows
    assert bm25["reference"] and bm25["approximate"] is None and model["name"] == "hashed words"
    assert (rrf["name"], rerank["name"]) == ("hashed words · rrf: reciprocal-rank fusion with BM25",
                                             "hashed words · BM25 top 100 re-ranked")
    assert rrf["key"] == "stand-in#rrf" and rerank["approximate"] is None and linear["key"] == "stand-in#linear"
    for row in result.rows:  # per-query latency as served, every row
        assert 0 < row["latency"]["p50_ms"] <= row["latency"]["p99_ms"]
    assert rrf["latency"]["p50_ms"] >= bm25["latency"]["p50_ms"]  # rrf runs BM25's scoring and more
    assert "Latency p50 / p99 (ms)" in result.table_markdown
    assert model["approximate"] is None and model["approx_recall@10"] is None  # 1,200 titles: served exactly
    for row in result.rows:
        assert all(0 <= row[m] <= 1 for m in ("recall@10", "recall@100", "ndcg@10"))
    assert model["p:ndcg@10"] is not None and bm25["p:ndcg@10"] is None
    assert "| BM25 | — |" in result.table_markdown  # no held-out clicks: the index's rule serves dense
    assert "| hashed words (served default) |" in result.table_markdown and model["served_default"]
    assert Path(result.report["retrieval.md"]).read_text() == result.table_markdown


def test_past_the_exact_bound_every_row_searches_the_index_that_is_served(settings, tmp_path: Path, monkeypatch) -> None:
    """What is served is what is measured: past the exact bound the model's rows search the IVF ``deepsent index`` would
    build for this corpus (its recall@10 against exact reported), and the served modes read that same index."""
    from encoders.search import vector_index as vi
    from encoders.search.served_index import ServedIndex

    monkeypatch.setattr(vi, "EXACT_MAX", 1000)
    corpus, path = _corpus_and_judgments(tmp_path)
    result = retrieval_compare(settings, judgments=path, baselines=["bm25"], models=["stand-in"], corpus=corpus,
                               model_scorer=lambda uri: ModelScorer(uri, loader=lambda u, s: HashedWords()))
    model = next(row for row in result.rows if row["key"] == "stand-in")
    assert model["approximate"]["type"] == "IndexIVFScalarQuantizer" and model["approximate"]["params"]["codes"] == "fp16"
    assert 0.5 < model["approx_recall@10"] <= 1 and model["approximate"]["params"]["nprobe"] >= 1
    assert "exact IndexFlatIP up to 1,000 titles, IVF above" in result.table_markdown
    vectors = HashedWords().encode(corpus.titles, "doc")
    served = ServedIndex.in_memory(HashedWords(), vectors, corpus.doc_ids, corpus.titles, None, seed=3)
    assert served.manifest["index_type"] == "IndexIVFScalarQuantizer"
    query = HashedWords().encode(["red drill"], "query")
    hits = served.hits(["red drill"], 5, "linear", query)[0]  # the fused modes read title vectors back from the IVF
    assert len(hits) == 5 and all(0 <= row < len(corpus.doc_ids) for row, _, _ in hits)


def test_model_rows_are_judged_against_minilms_same_mode(settings, tmp_path: Path) -> None:
    """Does the click training pay where it is served: each model row beside MiniLM's row of the same mode."""
    corpus, path = _corpus_and_judgments(tmp_path)
    result = retrieval_compare(settings, judgments=path, baselines=["bm25", "minilm"], models=["runs:/0/model"], corpus=corpus,
                               model_scorer=lambda uri: ModelScorer(uri, loader=lambda u, s: HashedWords()))
    rows = {row["key"]: row for row in result.rows}
    for mode in ("", "#rrf", "#rerank", "#linear"):
        model, minilm = rows[f"runs:/0/model{mode}"], rows[f"minilm{mode}"]
        assert "vs_minilm" not in minilm and "vs_minilm" not in rows["bm25"]
        for metric in ("recall@10", "recall@100", "ndcg@10"):
            assert model["vs_minilm"][metric]["diff"] == pytest.approx(model[metric] - minilm[metric])
    assert "vs MiniLM's same mode" in result.table_markdown and "'vs MiniLM's same mode'" in result.table_markdown


class OtherRun(HashedWords):
    run_id = "1" * 32


def test_two_runs_of_one_model_type_get_rows_told_apart(settings, tmp_path: Path) -> None:
    corpus, path = _corpus_and_judgments(tmp_path)
    encoders = {"runs:/a/model": HashedWords(), "runs:/b/model": OtherRun()}
    result = retrieval_compare(settings, judgments=path, baselines=["bm25"], models=list(encoders), corpus=corpus,
                               model_scorer=lambda uri: ModelScorer(uri, loader=lambda u, s: encoders[u]))
    names = [row["name"] for row in result.rows]
    assert len(set(names)) == len(names) == 9
    assert "hashed words (run 00000000) · rrf: reciprocal-rank fusion with BM25" in names and "hashed words (run 11111111)" in names


def _cli(settings, *args: str) -> list[str]:
    return ["compare", "--retrieval", "--store", settings.store, "--data-dir", str(settings.data_dir), *args]


@pytest.mark.parametrize(("args", "message"), [
    (["--baselines", "bm25,ulm"], "--retrieval supports the baselines bm25, minilm; got ulm"),
    (["--judgments", "missing.csv"], "missing.csv: file not found"),
    (["--baselines", "bm25:k1=-1"], "baseline bm25: option k1"),
])
def test_bad_input_is_one_line_with_exit_code_2(settings, tmp_path: Path, capsys, args: list[str], message: str) -> None:
    from deepsent.cli import main

    args = [str(tmp_path / a) if a.endswith(".csv") else a for a in args]
    assert main(_cli(settings, *args)) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1 and message in captured.err
    assert main(_cli(settings, "--json", *args)) == 2
    assert message in json.loads(capsys.readouterr().out)["error"]


def test_ungraded_judgments_and_an_unloadable_model_are_one_line(settings, tmp_path: Path, capsys,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from deepsent.cli import main
    from eval import model_scorer as model

    few = tmp_path / "few.csv"
    few.write_text("query,title,label\nq1,a,2\nq1,b,0\nq2,a,0\n", encoding="utf-8")
    assert main(_cli(settings, "--judgments", str(few))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1 of 2 queries have a title with a positive grade" in err[0]

    def unloadable(uri: str, settings: object) -> None:
        raise OSError("weights.pt: truncated file")

    monkeypatch.setattr(model, "_load_encoder", unloadable)  # as a broken artifact would fail inside MLflow/torch
    _, path = _corpus_and_judgments(tmp_path)
    assert main(_cli(settings, "--judgments", str(path), "--baselines", "bm25", "--models", "runs:/nope/model")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["deepsent: error: model runs:/nope/model: cannot be loaded (OSError: weights.pt: truncated file)"]


def test_the_served_rows_are_the_served_search(settings, tmp_path: Path) -> None:
    """The rrf, rerank and linear rows rank exactly as ``deepsent search --mode rrf|rerank|linear`` would: through
    the served object (``ServedIndex.in_memory``), checked here against each formula written out."""
    from encoders.search.bm25 import BM25Index
    from encoders.search.fusion import fuse_ranked
    from encoders.search.served_index import ServedIndex
    from eval.judgments import load_judged_set
    from eval.retrieval.compare import query_texts
    from eval.retrieval.served import SystemRun, lexical_candidates, served_mode_runs
    from eval.retrieval.metrics import evaluate_rankings, qrels_of

    corpus, path = _corpus_and_judgments(tmp_path)
    judged = load_judged_set(path)
    bm25 = BM25Index()
    bm25.fit_corpus(corpus.titles)
    queries = query_texts(judged)
    found = lexical_candidates(bm25, queries)
    lexical, seconds = found.top, found.seconds
    assert all(len(c) <= 100 and all(score > 0 for _, score in c) for c in lexical) and any(lexical)
    assert len(seconds) == len(queries) and (seconds > 0).all()
    rng = np.random.default_rng(0)
    titles = rng.standard_normal((len(corpus.titles), 8)).astype(np.float32)
    query_vectors = rng.standard_normal((len(queries), 8)).astype(np.float32)
    unit_titles = titles / np.linalg.norm(titles, axis=1, keepdims=True)
    ranked = np.argsort(-(unit_titles @ query_vectors.T).T, axis=1, kind="stable")[:, :100]
    seen: list[np.ndarray] = []
    qrels = qrels_of(judged, corpus.row_of())

    def evaluate(rows: np.ndarray):  # noqa: ANN202
        seen.append(rows)
        return evaluate_rankings(rows, qrels, len(corpus.doc_ids))

    searcher = ServedIndex.in_memory(None, titles, corpus.doc_ids, corpus.titles, bm25)
    runs = served_mode_runs(SystemRun("m", "m", "model", evaluate(ranked), {}), searcher, queries, query_vectors,
                            evaluate, linear_weight=0.3)
    assert [run.key for run in runs] == ["m#rrf", "m#rerank", "m#linear"] and runs[2].details["linear_weight"] == 0.3
    rrf, rerank, linear = seen[1], seen[2], seen[3]
    for q in range(len(queries)):
        expected = [r for r, _ in fuse_ranked([list(ranked[q]), [r for r, _ in lexical[q]]])[:100]]
        assert list(rrf[q][:len(expected)]) == expected
        candidates = sorted(r for r, _ in lexical[q])
        cos = unit_titles[candidates] @ (query_vectors[q] / np.linalg.norm(query_vectors[q]))
        by_cosine = [candidates[i] for i in sorted(range(len(candidates)), key=lambda i: (-cos[i], candidates[i]))]
        assert list(rerank[q][:len(by_cosine)]) == by_cosine and (rerank[q][len(by_cosine):] == -1).all()
        union = sorted(set(ranked[q].tolist()) | {r for r, _ in lexical[q]})
        cos_u = unit_titles[union] @ (query_vectors[q] / np.linalg.norm(query_vectors[q]))
        bm = found.scores[q][union]
        scale = lambda v: (v - v.min()) / (v.max() - v.min()) if v.max() > v.min() else np.zeros_like(v)  # noqa: E731
        mixed = 0.3 * scale(cos_u) + 0.7 * scale(bm)
        by_mix = [union[i] for i in sorted(range(len(union)), key=lambda i: (-mixed[i], union[i]))][:100]
        assert list(linear[q][:len(by_mix)]) == by_mix
