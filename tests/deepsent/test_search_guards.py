"""What ``deepsent search`` trusts is checked, and what it is asked is answered or refused, never ignored.

Every value ``search`` reads back from the index manifest is checked like a flag (type, finite, range) and
every description against the files it describes: one line naming the file, the field and the reason,
exit 2, no traceback. Flags that conflict or would be ignored are refused naming both; ``--k`` is served
as asked (each first stage goes ``max(k, 100)`` deep) and a shortfall is said.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from deepsent.cli import main
from encoders.search.bm25 import BM25Index
from pipeline.storage.store import Store


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    capsys.readouterr()
    code = main(["--json", "search", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _build(copy: dict[str, Any]) -> Path:
    home = copy["store"] / copy["home"]
    return home / "builds" / json.loads((home / "current.json").read_text())["build"]


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change of the manifest: ``key`` (dotted for nested objects) set to ``value``."""
    def change(manifest: dict[str, Any]) -> None:
        *parents, last = key.split(".")
        for part in parents:
            manifest = manifest[part]
        manifest[last] = value
    return change


MANIFEST_CASES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "linear weight a text": (_set("search.linear_weight", "abc"), 'linear_weight is "abc", not a number from 0 to 1'),
    "linear weight NaN": (_set("search.linear_weight", float("nan")), "linear_weight is NaN, not a number from 0 to 1"),
    "linear weight 7.5": (_set("search.linear_weight", 7.5), "search.linear_weight is 7.5, not a number from 0 to 1"),
    "linear weight true": (_set("search.linear_weight", True), "search.linear_weight is true, not a number"),
    "default mode unknown": (_set("search.default_mode", "sparse"), 'default_mode is "sparse", not one of dense'),
    "count a text": (_set("count", "abc"), 'count is "abc", not a positive whole number'),
    "count another number": (_set("count", 12), "count is 12 where index.faiss holds "),
    "dim a text": (_set("dim", "abc"), 'dim is "abc", not a positive whole number'),
    "dim another number": (_set("dim", 32), "dim is 32 where index.faiss holds 16"),
    "index type another": (_set("index_type", "IndexIVFFlat"), 'index_type is "IndexIVFFlat" where index.faiss holds '
                                                                '"IndexFlatIP"'),
    "nprobe a text": (_set("params.nprobe", "x"), 'params.nprobe is "x", not a positive whole number'),
    "bm25 k1 another": (_set("bm25.k1", 2.0), "bm25.k1 is 2.0 where bm25/params.index.json holds 1.5"),
    "bm25 documents another": (_set("bm25.documents", 7), "bm25.documents is 7 where bm25/params.index.json holds "),
    "bm25 method another": (_set("bm25.method", "bm25l"), 'bm25.method is "bm25l" where bm25/params.index.json'),
    "bm25 block missing": (lambda m: m.pop("bm25"), "the manifest lacks bm25"),
    "a file's record a text": (lambda m: m["files"].update({"ids.parquet": "abc"}),
                               'ids.parquet: its record in the manifest is "abc", not its bytes and sha256'),
}


@pytest.mark.parametrize("case", list(MANIFEST_CASES))
def test_every_manifest_value_is_checked_before_search_trusts_it(indexed_copy: dict[str, Any], case: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    change, reason = MANIFEST_CASES[case]
    path = _build(indexed_copy) / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))
    for mode in ((), ("--mode", "linear")):
        code, result, err = _cli(capsys, "drill", *mode, *indexed_copy["argv"])
        assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
        assert reason in result["error"] and result["error"].startswith(str(path.parent)), result["error"]
        assert result["error"].endswith(f"rebuild it with `deepsent index --model-uri {indexed_copy['model_uri']}`")


FLAG_CASES = {
    "--hybrid (gone: --mode hybrid)": (("drill", "--mode", "dense", "--hybrid"), "unrecognized arguments: --hybrid"),
    "--out for a single query": (("drill", "--out", "search/f.parquet"), "--out 'search/f.parquet' is for --queries"),
    "--out empty": (("--queries", "{queries}", "--out", ""), "--out '': give a .parquet file name"),
    "--out name too long": (("--queries", "{queries}", "--out", "search/" + "a" * 300 + ".parquet"),
                            "a name of 308 bytes, where a file system takes at most 255; give a shorter --out"),
    "--k above its cap": (("drill", "--k", "10001"), "--k: '10001' is not a whole number from 1 to 10,000"),
}


@pytest.mark.parametrize("case", list(FLAG_CASES))
def test_conflicting_or_ignored_flags_are_refused(indexed_copy: dict[str, Any], case: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    queries = tmp_path / "q.txt"
    queries.write_text("drill\n")
    flags, message = FLAG_CASES[case]
    code, result, err = _cli(capsys, *(f.format(queries=queries) for f in flags), *indexed_copy["argv"])
    assert code == 2 and message in result["error"] and len(err.splitlines()) == 1, (result, err)
    assert not (indexed_copy["store"] / "search").exists()  # nothing written


def test_k_is_served_as_asked_and_a_shortfall_is_said(indexed_copy: dict[str, Any],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    query = "cordless drill"
    titles = Store(str(indexed_copy["store"])).read_table(str(_build(indexed_copy) / "ids.parquet"))["title"]
    bm25 = BM25Index()
    bm25.fit_corpus(titles.to_pylist())
    matching = int((bm25.corpus_scores(query) > 0).sum())
    assert 100 < matching < 10_000  # more than one first stage's old depth, fewer than asked
    lexical = "BM25 ranks only the titles that share a word with the query"
    for mode, k, hits, note in (("bm25", 10_000, matching, lexical), ("rerank", 10_000, matching, lexical),
                                ("bm25", 110, 110, None), ("rrf", 150, 150, None), ("dense", 300, 300, None),
                                ("linear", 10_000, titles.length(), f"the index holds {titles.length():,} titles")):
        code, result, _ = _cli(capsys, query, "--mode", mode, "--k", str(k), *indexed_copy["argv"])
        assert code == 0 and result["k"] == k and len(result["hits"]) == hits, (mode, k, len(result["hits"]))
        assert [h["rank"] for h in result["hits"]] == list(range(1, hits + 1))
        assert result.get("note") == (note and f"1 of 1 queries got fewer than {k:,} hits: {note}"), mode
