"""What a command reads back (pairs, a feature set's vocabulary, a judged file) is checked like a flag: one line
``deepsent: error: <file>: <reason>`` and exit 2, never a library's traceback or the file's contents echoed."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from deepsent.cli import main
from encoders.training.results import TrainResult
from pipeline.core.config import Settings
from pipeline.storage.store import Store


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one error line of ``deepsent ARGV`` (exit 2, nothing else on stderr, nothing on stdout)."""
    capsys.readouterr()
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("deepsent: error: "), err
    return err.strip()


@pytest.fixture()
def pairs_store(settings: Settings, tiny_features_store: Path) -> Settings:
    """``settings`` whose store holds the tiny pairs (both splits), with an empty MLflow registry."""
    shutil.copytree(tiny_features_store / "pairs", Path(settings.store) / "pairs")
    return settings


def test_mining_refuses_an_empty_split_naming_its_pairs_file(pairs_store: Settings,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    store = Store.from_settings(pairs_store)
    valid = store.read_table("pairs/valid.parquet")
    store.write_table("pairs/valid.parquet", valid.slice(0, 0))
    err = _error(capsys, ["featurize", "--negative-source", "bm25", "--store", pairs_store.store])
    assert err == (f"deepsent: error: {store.uri('pairs/valid.parquet')}: no valid pairs: --negative-source bm25 mines "
                   "negatives for the queries of each split; run deepsent pairs with a --valid-fraction that leaves "
                   "pairs in both")  # was bm25s' "max() arg is an empty sequence" traceback
    assert not store.exists("mined/bm25/train.parquet")


def test_ann_mining_without_a_champion_names_its_own_flag(pairs_store: Settings,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, ["featurize", "--negative-source", "ann", "--store", pairs_store.store])
    assert "no champion: models:/deepsent-ranker@champion is not set" in err
    assert "pass --mine-model-uri URI or run deepsent promote" in err and "pass --model-uri" not in err


def test_a_damaged_features_vocabulary_is_one_line(train_settings: Settings, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", train_settings.mlflow_tracking_uri)
    store = Store.from_settings(train_settings)
    version = store.read_text("features/LATEST").strip()
    vocab, manifest_path = Path(store.uri(f"features/{version}/vocab.json")), f"features/{version}/manifest.json"
    manifest = store.read_json(manifest_path)
    recorded = manifest["vocab"]
    assert len(recorded["sha256"]) == 64 and recorded["bytes"] == vocab.stat().st_size  # featurize records them
    train = ["train", "--model", "lstm", "--ncell", "8", "--epochs", "1", "--store", train_settings.store]
    good = json.loads(vocab.read_text())
    vocab.write_text("not JSON\n")
    assert _error(capsys, train) == (f"deepsent: error: {vocab}: 9 bytes where {recorded['bytes']:,} were written "
                                     "(truncated or replaced); rebuild it with `deepsent featurize`")
    for key in ("sha256", "bytes"):  # a manifest written before the vocabulary's checksum was recorded
        del manifest["vocab"][key]
    store.write_json(manifest_path, manifest)
    assert _error(capsys, train) == f"deepsent: error: {vocab}: not a JSON vocabulary (JSONDecodeError)"
    for field, bad, reason in (("counts", ["many"], "counts: not a list of"), ("min_count", 0, "min_count: 0 is not a "
                               "positive integer"), ("trigrams", "abc", "trigrams: not a list of non-empty texts")):
        vocab.write_text(json.dumps({**good, field: bad}))
        assert _error(capsys, train) == f"deepsent: error: {vocab}: {reason}" + (
            f" {len(good['trigrams']):,} non-negative integers" if field == "counts" else ""), field


def test_embed_names_what_is_wrong_with_a_judged_file_without_echoing_it(
        trained_copy: tuple[Settings, TrainResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings, trained = trained_copy
    judged = tmp_path / "notes.csv"
    judged.write_text("private-first-line,with a secret,of the file\nsecond line\n")
    err = _error(capsys, ["embed", "--model-uri", trained.model_uri, "--judgments", str(judged),
                          "--out", str(tmp_path / "exported"), "--store", settings.store])
    assert err == (f"deepsent: error: {judged}, row 1: not a Home Depot judgment file: its header of 3 field(s) lacks "
                   "column(s) id, product_uid, product_title, search_term, relevance; expected "
                   "id,product_uid,product_title,search_term,relevance")
    assert "private" not in err and "secret" not in err
