"""``deepsent promote`` on the command line, the champion as a pyfunc in a fresh process, search on the champion."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deepsent.cli import main
from encoders.model.loading import load_encoder
from pipeline.core.config import Settings
from tests.conftest import copy_pairs
from tests.gate_sets import train_gate_set

TEXTS = ["cordless drill", "Behr premium plus ultra paint 1 gal.", "", "x" * 40]
CHAMPION = "models:/deepsent-ranker@champion"


def cli(capsys: pytest.CaptureFixture[str], settings: Settings, *argv: str) -> tuple[int, dict[str, Any], str]:
    """Exit code, the one JSON object on stdout, and stderr of ``deepsent --json ARGV`` on ``settings``' store."""
    capsys.readouterr()
    code = main(["--json", *argv, "--store", settings.store, "--data-dir", str(settings.data_dir)])
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1, out
    return code, json.loads(out), err


def _renamed_reordered_copy(path: Path, target: Path) -> Path:
    """``path`` (a Home Depot CSV) with its rows in reverse order, under another name."""
    header, *rows = path.read_text(encoding="iso-8859-1").splitlines()
    target.write_text("\n".join([header, *reversed(rows)]) + "\n", encoding="iso-8859-1")
    return target


def test_bad_input_is_one_line(registry: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path,
                               judged_slice: Path) -> None:
    missing_run = "0123456789abcdef0123456789abcdef"
    copy = _renamed_reordered_copy(registry.dev_judgments, tmp_path / "team-gate.csv")
    reported = f"pairs are judgments of {registry.dev_judgments}, the set deepsent compare reports"
    lstm = ("--model-uri", "models:/deepsent-lstm/1")
    gate = ("--gate-judgments", str(train_gate_set(registry, tmp_path / "gate.csv")))
    cases = {
        ("--model-uri", f"runs:/{missing_run}/model", *gate): f"cannot promote runs:/{missing_run}/model: ",
        ("--model-uri", "models:/deepsent-lstm/99", *gate): "cannot promote models:/deepsent-lstm/99: ",
        ("--model-uri", "no-such-model", *gate): "cannot promote no-such-model: ",
        ("--model-uri", "models:/deepsent-lstm/1", "--gate-judgments", "clicks"): "no feature shards in ",  # none yet
        ("--model-uri", "models:/deepsent-lstm/1", "--gate-judgments", str(tmp_path / "nope.csv")): str(tmp_path / "nope.csv"),
        ("--model-uri", "models:/deepsent-lstm/1", "--metric", "map"): "gate metric 'map' is not one of",
        ("--version", "3"): "no version 3 of deepsent-ranker",
        ("--version", "0"): "--version: '0' is not a positive integer",
        (): "one of the arguments --status --model-uri --version is required",
        ("--model-uri", "x", "--version", "1"): "argument --version: not allowed with argument --model-uri",
        # the gate never decides on the reported set, whatever its name, order or part
        (*lstm, "--gate-judgments", str(registry.dev_judgments)): "5,481 of its 5,481 judged (query, title) " + reported,
        (*lstm, "--gate-judgments", str(copy)): f"--gate-judgments {copy}: 5,481 of its",
        (*lstm, "--gate-judgments", str(judged_slice)): reported,
        # a flag the mode would ignore names both
        ("--status", "--force"): "--force cannot be used with --status",
        ("--status", "--gate-judgments", "x.csv"): "--gate-judgments cannot be used with --status",
        ("--version", "1", "--metric", "ndcg@3"): "--metric cannot be used with --version",
        ("--model-uri", "x", "--last", "3"): "--last cannot be used with --model-uri",
        ("--model-uri", "x", "--gate-judgments", "a.csv", "--gate-features", "b"):
            "argument --gate-features: not allowed with argument --gate-judgments",
        ("--status", "--last", "1001"): "--last: '1001' is not a whole number from 1 to 1,000",
    }
    for flags, message in cases.items():
        code, result, err = cli(capsys, registry, "promote", *flags)
        assert code == 2 and message in result["error"], (flags, result)
        assert err.splitlines() == [f"deepsent: error: {result['error']}"], (flags, err)
    from mlflow import MlflowClient

    assert MlflowClient(registry.mlflow_tracking_uri).search_registered_models("name = 'deepsent-ranker'") == []


def test_champion_is_a_pyfunc_that_serves_in_a_fresh_process(registry: Settings, promotion_registry: dict[str, Any],
                                                              capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trained = promotion_registry["trained"]
    gate = ("--gate-judgments", str(train_gate_set(registry, tmp_path / "gate.csv")))
    code, result, _ = cli(capsys, registry, "promote", "--model-uri", trained.model_uri, *gate)
    assert code == 0 and result["decision"] == "promoted" and result["model_uri"] == "models:/deepsent-ranker/1"
    assert main(["promote", "--model-uri", trained.run_id, *gate, "--store", registry.store]) == 0
    assert "already is the champion" in capsys.readouterr().out
    script = (
        "import json, sys, mlflow\n"
        f"model = mlflow.pyfunc.load_model({CHAMPION!r})\n"
        "texts = json.loads(sys.argv[1])\n"
        "query, doc = model.predict(texts), model.predict(texts, params={'side': 'doc'})\n"
        "import encoders\n"
        "refused = {}\n"
        "import pandas\n"
        "assert model.predict(pandas.Series(texts)).shape == model.predict(pandas.DataFrame({'t': texts})).shape\n"
        "for name, bad in (('none', [None]), ('number', ['drill', 5]), ('bytes', [b'drill']), ('dict', [{'q': 1}]),\n"
        "                  ('nan', [float('nan')]), ('text', 'drill'), ('set', {'drill', 'fan'}),\n"
        "                  ('two columns', pandas.DataFrame({'a': ['x'], 'b': ['y']}))):\n"
        "    try:\n"
        "        model.predict(bad)\n"
        "    except Exception as exc:\n"
        "        refused[name] = str(exc).splitlines()[0][:200]\n"
        "print(json.dumps({'query': query.tolist(), 'doc': doc.tolist(), 'dtype': str(query.dtype), 'refused': refused,\n"
        "                  'code': encoders.__file__, 'signature': model.metadata.signature.to_dict()}))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only the model's own code on the path
    env["MLFLOW_TRACKING_URI"] = registry.mlflow_tracking_uri
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(TEXTS)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = json.loads(proc.stdout.splitlines()[-1])
    assert served["dtype"] == "float32" and "/artifacts/code/encoders/" in served["code"]
    # nothing but texts is embedded: no "None", "5", "b'drill'" vectors
    assert sorted(served["refused"]) == ["bytes", "dict", "nan", "none", "number", "set", "text", "two columns"], \
        served["refused"]
    assert "got a set: a set has no order" in served["refused"]["set"]  # rows in hash order would match no text
    assert "expected one column of texts, got 2 columns" in served["refused"]["two columns"]
    assert served["signature"]["inputs"] is None  # the model checks its input itself (MLflow would drop columns)
    assert json.loads(served["signature"]["outputs"])[0]["tensor-spec"] == {"dtype": "float32", "shape": [-1, 16]}
    encoder = load_encoder(CHAMPION, registry)
    assert encoder.run_id == trained.run_id
    for side in ("query", "doc"):
        np.testing.assert_allclose(np.asarray(served[side], dtype=np.float32), encoder.encode(TEXTS, side),
                                   rtol=1e-6, atol=1e-7)
    from mlflow.artifacts import download_artifacts

    folder = Path(download_artifacts(CHAMPION, dst_path=str(tmp_path / "champion")))
    requirements = (folder / "requirements.txt").read_text().split()
    assert "torch==2.13.0" in requirements and not any("+" in r for r in requirements)
    assert json.loads((folder / "input_example.json").read_text())
    assert sorted(p.name for p in (folder / "artifacts" / "saved_model").iterdir()) == ["config.json", "vocab.json",
                                                                                        "weights.pt"]


def test_search_defaults_to_the_champion(registry: Settings, promotion_registry: dict[str, Any],
                                         capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:

    trained = promotion_registry["trained"]
    copy_pairs(Path(trained.checkpoint).parents[3], Path(registry.store))
    code, result, _ = cli(capsys, registry, "search", "drill")
    assert code == 2 and result["error"].startswith("no champion: models:/deepsent-ranker@champion is not set")
    assert main(["promote", "--model-uri", promotion_registry["uris"]["lexical"], "--gate-judgments",
                 str(train_gate_set(registry, tmp_path / "gate.csv")), "--store", registry.store]) == 0
    code, built, _ = cli(capsys, registry, "index")
    assert code == 0 and built["version"] == "1" and built["root"].endswith("/indexes/dssm/deepsent-ranker-1")
    code, found, _ = cli(capsys, registry, "search", "cordless drill", "--k", "3")
    assert code == 0 and found["model_uri"] == CHAMPION and found["version"] == "1" and len(found["hits"]) == 3
    code, by_version, _ = cli(capsys, registry, "search", "cordless drill", "--k", "3", "--model-uri",
                              "models:/deepsent-ranker/1")
    assert code == 0 and by_version["hits"] == found["hits"] and by_version["index"] == found["index"]
