"""The CLI front door: --json anywhere, one JSON object on stdout, clear errors without tracebacks."""
from __future__ import annotations

import json

import pytest

from deepsent.cli import build_parser, main
from pipeline.core.config import Settings


@pytest.mark.parametrize("argv", [["--json", "pairs"], ["pairs", "--json"]])
def test_json_flag_before_or_after_the_command(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert args.json is True


def test_store_flag_after_command_overrides_env(tmp_path, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DEEPSENT_STORE", str(tmp_path / "env-store"))
    rc = main(["pairs", "--store", str(tmp_path / "flag-store"), "--json"])  # empty store: a clear error naming it
    error = json.loads(capsys.readouterr().out)["error"]
    assert rc == 2 and str(tmp_path / "flag-store") in error and "env-store" not in error


def test_error_is_one_line_and_json_error_object(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--json", "--store", settings.store, "ingest", "--date", "2026-01-01"])
    out, err = capsys.readouterr()
    assert rc == 2
    payload = json.loads(out)
    assert "missing landing partition" in payload["error"]
    assert "Traceback" not in err and err.startswith("deepsent: error:")


def test_run_help_lists_every_stage_of_the_chain(capsys: pytest.CaptureFixture[str]) -> None:
    from deepsent.chain import CHAIN
    from deepsent.commands.run import first_sentence

    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    listed = capsys.readouterr().out.split("stages, in order")[1].splitlines()[1:]
    assert [line.split()[0] for line in listed] == [s.name for s in CHAIN]  # every stage, in the declared order
    for line, declared in zip(listed, CHAIN):
        assert first_sentence(declared.doc) in line and first_sentence(declared.doc).endswith(".")
