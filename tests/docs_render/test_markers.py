"""One marker style and one splice for every rendered block of the docs: the renderer's, the scaling table's and the
screenshots' README, whichever writes it."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from docs_render import markers
from docs_render.cli import DOCS, main
from infra import screenshot_manifest

ROOT = Path(__file__).resolve().parents[2]


def test_a_block_under_another_marker_is_rendered_anew_under_the_one_style_and_nothing_else_moves() -> None:
    page = ("# t\n\n<!-- a:begin (bench/scaling.py writes this) -->\nold\n<!-- a:end -->\nmiddle 1.5 s\n"
            "<!-- b:begin -->\nsame\n<!-- b:end -->\n\n" + markers.block("c", "same") + "\nend\n")
    text, stale = markers.splice(page, {"a": lambda: "new\n\n", "b": lambda: "same", "c": lambda: "same"}, "page.md")
    assert stale == ["a", "b"]  # b's body is as rendered, its begin marker is not the one style
    assert text == ("# t\n\n" + markers.block("a", "new") + "\nmiddle 1.5 s\n" + markers.block("b", "same") + "\n\n"
                    + markers.block("c", "same") + "\nend\n")
    assert markers.splice(text, {"a": lambda: "new", "b": lambda: "same", "c": lambda: "same"}, "page.md") == (text, [])
    assert markers.names(text) == ["a", "b", "c"]


def test_a_block_without_an_end_or_without_a_renderer_is_one_line_naming_the_doc() -> None:
    with pytest.raises(SystemExit, match=r"^page.md: block 'a' has no end marker$"):
        markers.splice(markers.begin("a") + "\nx\n" + markers.block("b", "y"), {"a": str, "b": str}, "page.md")
    with pytest.raises(SystemExit, match=r"^page.md: no renderer for block\(s\) b \(known: a\)$"):
        markers.splice(markers.block("b", "y"), {"a": str}, "page.md")


def test_every_doc_with_a_block_is_rendered_and_has_only_the_one_marker_style() -> None:
    pages = [p for p in ROOT.rglob("*.md") if not {".venv", ".git", "node_modules"} & set(p.relative_to(ROOT).parts)]
    with_blocks = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in pages
                   if markers.names(p.read_text(encoding="utf-8"))}
    assert set(with_blocks) == set(DOCS)
    for doc, text in with_blocks.items():
        begins = re.findall(r"<!-- [a-z0-9-]+:begin [^\n]*", text)
        assert begins == [markers.begin(name) for name in markers.names(text)], doc


def test_the_renderer_writes_the_screenshots_block_and_the_script_only_the_manifest(tmp_path: Path) -> None:
    shots = tmp_path / "docs" / "screenshots"
    shots.mkdir(parents=True)
    shutil.copy(ROOT / "docs" / "screenshots" / screenshot_manifest.MANIFEST, shots / screenshot_manifest.MANIFEST)
    (shots / "README.md").write_text(f"# Shots\n\n{markers.block('screenshots', 'old text')}\n\nafter\n")
    assert main(["--root", str(tmp_path), "--check"]) == 1
    assert main(["--root", str(tmp_path)]) == 0 and main(["--root", str(tmp_path), "--check"]) == 0
    rendered = (shots / "README.md").read_text()
    assert "old text" not in rendered and rendered.endswith(screenshot_manifest.END + "\n\nafter\n")
    manifest = json.loads((shots / screenshot_manifest.MANIFEST).read_text())
    screenshot_manifest.record(shots, {})  # the script merges its shots into the manifest and leaves the README alone
    assert (shots / "README.md").read_text() == rendered
    assert json.loads((shots / screenshot_manifest.MANIFEST).read_text())["screenshots"].keys() <= manifest["screenshots"].keys()
