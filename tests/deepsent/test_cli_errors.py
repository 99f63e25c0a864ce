"""Bad input and bad configuration: exit 2, one line on stderr, one JSON error with --json, no traceback.

Every case fails while the arguments, the environment or the store are checked: nothing is trained,
read or started.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from deepsent.cli import main
from pipeline.core.config import Settings
from tests.gate_sets import train_gate_set

ROOT = Path(__file__).resolve().parents[2]
SECRET = "do-not-print-this-secret"

#: (argv after the command, text the error must contain, extra environment). ``{file}`` is a plain file.
BAD = [
    (["train", "--model", "lstm", "--ncell", "0"], "--ncell: '0' is not a whole number from 1 to 4,096", {}),
    (["train", "--model", "lstm", "--lr", "-0.1"], "--lr: '-0.1' is not a positive number", {}),
    (["train", "--model", "lstm", "--gamma", "nan"], "--gamma", {}),
    (["train", "--model", "lstm", "--seed", "-1"], "--seed: '-1' is not a non-negative integer", {}),
    (["train", "--model", "nope"], "invalid choice: 'nope'", {}),
    (["train"], "required: --model", {}),
    (["train", "--model", "lstm", "--bogus"], "unrecognized arguments: --bogus", {}),
    (["embed", "--model-uri", "X"], "required: --out", {}),
    (["embed", "--model-uri", "X", "--out", "o", "--threads", "0"], "--threads: '0'", {}),
    (["featurize", "--negatives", "-1"], "--negatives", {}),
    (["featurize", "--max-words", "many"], "--max-words: 'many'", {}),
    (["featurize", "--negative-source", "hard"], "invalid choice: 'hard'", {}),
    (["compare", "--baselines", "linear:norm=rank"], "option norm: 'rank' is not one of zscore, minmax", {}),
    (["compare", "--baselines", "linear:features=latest"], "option features: 'latest' is not a features version", {}),
    (["compare", "--baselines", "rrf:model=0"], "option model: '0' is not a positive integer", {}),
    (["pairs", "--valid-fraction", "1.5"], "--valid-fraction: '1.5' is not a fraction", {}),
    (["simulate", "--days", "0"], "--days: '0'", {}),
    (["simulate", "--start", "2026-13-01"], "not a date", {}),
    (["ingest"], "one of the arguments --date --start is required", {}),
    (["compare", "--seed", "x"], "--seed: 'x'", {}),
    (["compare", "--baselines", "plsa:topics=0"], "option topics: '0' is not a positive integer", {}),
    (["compare", "--baselines", "bm25,plsa:topics=-3"], "option topics: '-3'", {}),
    (["compare", "--baselines", "ulm:mu=abc"], "option mu: 'abc' is not a positive number", {}),
    (["compare", "--baselines", "bm25:k1=-1"], "option k1: '-1' is not a non-negative number", {}),
    (["compare", "--baselines", "bm25:b=2"], "option b: '2' is not a number from 0 to 1", {}),
    (["compare", "--baselines", "bm25:kk=1"], "unknown option(s) kk; known: b, delta, idf_method, k1, method", {}),
    (["compare", "--baselines", "doc2vec:epochs=0"], "option epochs", {}),
    (["compare", "--baselines", "random:seed=-2"], "option seed", {}),
    (["analyze", "--model-uri", "X", "--examples", "0"], "--examples: '0'", {}),
    (["analyze", "--model-uri", "X", "--threshold", "0"], "--threshold: '0'", {}),
    (["run", "--seed", "-1"], "--seed: '-1'", {}),
    (["run", "--profile", "huge"], "invalid choice: 'huge'", {}),
    (["stack", "status", "--timeout", "0"], "--timeout: '0' is not a number of seconds above 0 and at most 86,400", {}),
    (["stack", "watch", "--every", "1e10"], "--every: '1e10' is not a number of seconds above 0 and at most 86,400", {}),
    (["pairs"], "DEEPSENT_STORE: 's3://' is not an S3 store: write s3://bucket[/prefix]", {"DEEPSENT_STORE": "s3://"}),
    (["pairs", "--store", "s3:bucket"], "--store: 's3:bucket' is not an S3 store", {}),
    (["featurize", "--negative-source", "bm25", "--mine-model-uri", "runs:/x/model"],
     "--mine-model-uri cannot be used with --negative-source bm25", {}),
    (["featurize", "--mine-model-uri", "runs:/x/model"], "--mine-model-uri cannot be used with --negative-source random", {}),
    (["promote", "--status", "--force"], "--force cannot be used with --status", {}),
    (["promote", "--status", "--gate-judgments", "{file}"], "--gate-judgments cannot be used with --status", {}),
    (["no-such-command"], "invalid choice: 'no-such-command'", {}),
    (["pairs", "--store", "{file}"], "store {file}: it is a file, not a directory", {}),
    (["pairs", "--store", "{file}/sub"], "store {file}/sub: cannot write files there (Not a directory)", {}),
    (["pairs", "--store", "/proc/deepsent-test"], "store /proc/deepsent-test: cannot write files there", {}),
    (["pairs", "--store", "s3://bucket/x"], "store s3://bucket/x: cannot write files there, after ",
     {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": SECRET, "AWS_SECRET_ACCESS_KEY": SECRET}),
    (["pairs"], "DEEPSENT_DASK_WORKERS: 'abc' is not a worker count from 1 to", {"DEEPSENT_DASK_WORKERS": "abc"}),
    (["pairs"], "DEEPSENT_DASK_WORKERS: '100000' is not a worker count from 1 to", {"DEEPSENT_DASK_WORKERS": "100000"}),
    (["pairs"], "DEEPSENT_DEVICE: 'gpu' is not one of auto, cpu, cuda", {"DEEPSENT_DEVICE": "gpu"}),
    (["pairs"], "MLFLOW_TRACKING_URI: 'garbage://x' is not an MLflow tracking URI", {"MLFLOW_TRACKING_URI": "garbage://x"}),
    (["pairs"], "DEEPSENT_DASK_ADDRESS: 'garbage' is not a Dask scheduler address",
     {"DEEPSENT_DASK_ADDRESS": "garbage"}),
    (["stack", "status"], "DEEPSENT_AIRFLOW_PORT: 'abc' is not a port number", {"DEEPSENT_AIRFLOW_PORT": "abc"}),
    (["stack", "status"], "DEEPSENT_MLFLOW_PORT: '70000' is not a port number", {"DEEPSENT_MLFLOW_PORT": "70000"}),
    (["search", "x", "--k", "100000"], "--k: '100000' is not a whole number from 1 to 10,000", {}),
    (["train", "--model", "lstm", "--epochs", "5000"], "--epochs: '5000' is not a whole number from 1 to 1,000", {}),
    (["train", "--model", "lstm", "--ncell", "100000"], "--ncell: '100000' is not a whole number from 1 to 4,096", {}),
    (["train", "--model", "lstm", "--threads", "100000"], "--threads: '100000' is not a thread count from 1 to", {}),
    (["featurize", "--negatives", "1000"], "--negatives: '1000' is not a whole number from 1 to 64", {}),
    (["train", "--model", "lstm", "--experiment", ""], "--experiment: '' is not an MLflow experiment name", {}),
    (["promote", "--status"], "MLflow tracking server http://127.0.0.1:9 is unreachable ([Errno 111] Connection refused; "
     "3 tries in", {"MLFLOW_TRACKING_URI": "http://user:" + SECRET + "@127.0.0.1:9"}),
]


def _fill(text: str, file: Path) -> str:
    return text.replace("{file}", str(file))


@pytest.mark.parametrize("with_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize(("argv", "expected", "env"), BAD, ids=[" ".join(case[0]) + str(sorted(case[2])) for case in BAD])
def test_bad_input_is_one_line_exit_2_and_one_json_error(argv: list[str], expected: str, env: dict[str, str],
                                                         with_json: bool, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "a-file"
    file.write_text("not a directory\n")
    monkeypatch.setenv("DEEPSENT_STORE", str(tmp_path / "store"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    rc = main([_fill(a, file) for a in argv] + (["--json"] if with_json else []))
    out, err = capsys.readouterr()
    assert rc == 2
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("deepsent: error: "), err
    assert _fill(expected, file) in lines[0] and SECRET not in err + out
    if with_json:
        assert json.loads(out) == {"error": lines[0][len("deepsent: error: "):]} and out.count("\n") == 1
    else:
        assert out == ""


def _console(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DEEPSENT_STORE": str(tmp_path / "store")}
    script = Path(sys.executable).with_name("deepsent")
    return subprocess.run([str(script), *args], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("argv", [
    ["--json", "train", "--model", "lstm", "--ncell", "0"],
    ["--json", "pairs", "--store", "/proc/deepsent-test/store"],
    ["train", "--model", "lstm", "--json", "--no-such-flag"],
])
def test_console_script_prints_no_traceback(argv: list[str], tmp_path: Path) -> None:
    proc = _console(argv, tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("deepsent: error: ")
    assert "error" in json.loads(proc.stdout)


def test_library_debug_and_info_lines_only_with_verbose(tmp_path: Path) -> None:
    """bm25s sets its own logger to DEBUG; its 'Building index' line must still stay out of a normal run."""
    script = textwrap.dedent("""
        import logging, sys
        import pipeline.features.pairs
        from deepsent.cli import main
        from pipeline.core.errors import ConfigError

        def chatty(settings, **kwargs):
            logging.getLogger("bm25s").setLevel(logging.DEBUG)
            logging.getLogger("bm25s").debug("Building index from tokens")
            logging.getLogger("somelib").info("library chatter")
            logging.getLogger("pipeline.features.pairs").info("project line")
            raise ConfigError("stop here")

        pipeline.features.pairs.build_pairs = chatty
        sys.exit(main(sys.argv[1:]))
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DEEPSENT_STORE": str(tmp_path / "store")}
    runs = {flag: subprocess.run([sys.executable, "-c", script, "pairs", *flag], capture_output=True, text=True,
                                 env=env, timeout=120) for flag in ((), ("-v",))}
    quiet, verbose = runs[()].stderr, runs[("-v",)].stderr
    assert "project line" in quiet and "Building index" not in quiet and "library chatter" not in quiet
    assert "Building index" in verbose and "library chatter" in verbose


def test_invalid_json_message_does_not_double_at() -> None:
    from pipeline.ingest.formats.jsonl import read_jsonl

    record = read_jsonl(b'{"query": "unterminated\n', "landing/x.jsonl")[0]
    assert record.error == "invalid JSON: Unterminated string starting at (column 11)"


def test_a_read_only_mlflow_database_is_one_line(registry: Settings, promotion_registry: dict[str, Any],
                                                 small_disk: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from mlflow import MlflowClient

    from deepsent.cli import storage_error

    shutil.copyfile(registry.mlflow_tracking_uri.removeprefix("sqlite:///"), small_disk / "mlflow.db")
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    uri = f"sqlite:///{small_disk / 'mlflow.db'}"
    try:
        MlflowClient(tracking_uri=uri).create_experiment("anything")
    except Exception as exc:  # what MLflow raises for a read-only SQLite file: one line, not a traceback
        assert storage_error(exc, uri) == (f"MLflow tracking store {uri}: the database is read-only; check the "
                                           "file's folder and permissions")
    else:
        pytest.fail("a read-only database took a write")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    capsys.readouterr()
    gate = train_gate_set(registry, small_disk.parent / "gate.csv")
    assert main(["promote", "--model-uri", promotion_registry["uris"]["trained"], "--gate-judgments", str(gate),
                 "--store", registry.store]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"deepsent: error: {small_disk / 'mlflow.db'}.deepsent-ranker.lock: cannot write "
                                "(read-only file system)"], err
