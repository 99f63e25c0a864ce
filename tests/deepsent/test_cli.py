"""The CLI front door: --json anywhere, one JSON object on stdout, clear errors without tracebacks."""
from __future__ import annotations

import json

import pytest

from deepsent.cli import build_parser, main
from pipeline.config import Settings


@pytest.mark.parametrize("argv", [["--json", "pairs"], ["pairs", "--json"]])
def test_json_flag_before_or_after_the_command(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert args.json is True


def test_store_flag_after_command_overrides_env(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEEPSENT_STORE", str(tmp_path / "env-store"))
    args = build_parser().parse_args(["pairs", "--store", str(tmp_path / "flag-store")])
    settings = Settings.from_env(store=args.store)
    assert settings.store == str(tmp_path / "flag-store")


def test_error_is_one_line_and_json_error_object(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--json", "--store", settings.store, "ingest", "--date", "2026-01-01"])
    out, err = capsys.readouterr()
    assert rc == 2
    payload = json.loads(out)
    assert "missing landing partition" in payload["error"]
    assert "Traceback" not in err and err.startswith("deepsent: error:")
