"""The gate refuses the reported judged set by its content: no cosmetic edit of it passes ``--gate-judgments``.

Each variant below is ``judgments_dev.csv`` (or a part of it) edited the way a careless or hostile operator might
to get a set past the refusal: a space and a full stop after every title, every letter in its full-width form,
no-break or ideographic spaces, zero-width characters inside words, other punctuation, ligatures, case. Through
``deepsent promote`` each is refused with one line before anything is registered; the same edits of a team's own
gate set (training queries) are not taken for the reported set.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Callable

import pytest

from deepsent.cli import main
from pipeline.core.config import Settings
from pipeline.text.textnorm import content_key
from tests.gate_sets import train_gate_set

Edit = Callable[[str], str]


def _full_width(text: str) -> str:
    """ASCII letters and digits as their full-width forms (U+FF01..): another code point per character."""
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalnum() else c for c in text)


#: (what is edited, the edit); queries and titles both, unless the name says titles.
EDITS: dict[str, tuple[str, Edit]] = {
    "titles with ' .' appended": ("title", lambda t: t + " ."),
    "full-width letters": ("both", _full_width),
    "no-break and ideographic spaces": ("both", lambda t: t.replace(" ", "\u00a0", 1).replace(" ", "\u3000")),
    "zero-width spaces inside words": ("both", lambda t: "\u200b".join(t)),
    "punctuation changed": ("title", lambda t: t.replace("-", " ").replace(".", "").rstrip() + "!!"),
    "ligatures and case": ("title", lambda t: t.upper().replace("FI", "\ufb01")),
}


def _edited_generic(source: Path, target: Path, edit: Edit, where: str, queries: int | None = None) -> Path:
    """A Home Depot judged file rewritten as a generic UTF-8 set (query, title, label) with ``edit`` applied to
    its titles (and queries when ``where`` is ``both``); its first ``queries`` queries only, when given."""
    with open(source, encoding="iso-8859-1", newline="") as fh:
        rows = list(csv.DictReader(fh))
    kept = list(dict.fromkeys(r["search_term"] for r in rows))[:queries]
    keep = set(kept)
    with open(target, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["query", "title", "label", "doc_id"])
        for r in rows:
            if r["search_term"] in keep:
                query = edit(r["search_term"]) if where == "both" else r["search_term"]
                writer.writerow([query, edit(r["product_title"]), round(float(r["relevance"])), r["product_uid"]])
    return target


def _promote(capsys: pytest.CaptureFixture[str], settings: Settings, gate: Path) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--json", "promote", "--model-uri", "models:/deepsent-lstm/1", "--gate-judgments", str(gate),
                 "--store", settings.store, "--data-dir", str(settings.data_dir)])
    out, err = capsys.readouterr()
    return code, json.loads(out)["error"], err


@pytest.mark.parametrize("name", list(EDITS))
def test_a_cosmetic_edit_of_the_reported_set_is_refused(name: str, settings: Settings, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    where, edit = EDITS[name]
    reported = f"pairs are judgments of {settings.dev_judgments}, the set deepsent compare reports"
    for part in (None, 40):  # the whole set, and its first 40 queries
        gate = _edited_generic(settings.dev_judgments, tmp_path / f"gate-{part}.csv", edit, where, part)
        assert gate.read_text(encoding="utf-8") != settings.dev_judgments.read_text(encoding="iso-8859-1")
        code, error, err = _promote(capsys, settings, gate)
        assert code == 2 and reported in error and error.startswith(f"--gate-judgments {gate}: "), (name, error)
        assert err.splitlines() == [f"deepsent: error: {error}"]


def test_the_same_edits_of_a_team_set_are_not_taken_for_the_reported_set(settings: Settings, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    team = train_gate_set(settings, tmp_path / "team.csv", queries=60)
    for name, (where, edit) in EDITS.items():
        gate = _edited_generic(team, tmp_path / "team-edited.csv", edit, where)
        code, error, _ = _promote(capsys, settings, gate)
        assert code == 2 and "the set deepsent compare reports" not in error, (name, error)
        assert "cannot promote models:/deepsent-lstm/1" in error, (name, error)  # past the gate set: no such model


def test_content_keys_differ_where_a_letter_or_digit_does() -> None:
    for a, b in (("drill", "drills"), ("1/2 in.", "1/4 in."), ("café", "cafe"), ("paint", "pint")):
        assert content_key(a) != content_key(b), (a, b)
    assert content_key("Ｄｒｉｌｌ\u00a0.") == content_key("drill") == content_key("dr\u200bill")
