"""The book corpus reader: tokens, sentences, paragraphs, front matter, triples, bad files."""
from __future__ import annotations

from pathlib import Path

import pytest

from eval.baselines.books import (
    book_files,
    is_prose,
    paragraphs,
    read_book,
    read_corpus,
    split_sentences,
    strip_gutenberg,
    word_tokens,
)
from pipeline.core.config import Settings
from pipeline.core.errors import InputError


def test_word_tokens_lowercase_and_strip_edge_punctuation() -> None:
    assert word_tokens('"Yes," said Mr. Brown--quietly.') == ["yes", "said", "mr", "brown", "quietly"]
    assert word_tokens("\u201cI\u2019ve a 1/2 in. drill\u201d") == ["i've", "a", "1/2", "in", "drill"]
    assert word_tokens(" -- ... ") == []


def test_split_sentences_keeps_abbreviations_and_initials_together() -> None:
    text = 'Mr. Brown met J. M. Barrie at 2 p.m. on Monday. "Hello!" he said. Was it late? It was.'
    assert split_sentences(text) == [
        "Mr. Brown met J. M. Barrie at 2 p.m. on Monday.",
        '"Hello!" he said.',
        "Was it late?",
        "It was.",
    ]


@pytest.mark.parametrize(
    "paragraph, prose",
    [
        ("The Rev. Septimus Harding was a clergyman.", True),
        ('"No."', True),
        ("He added,", True),
        ("CHAPTER XV.", False),
        ("Chapter 3.", False),
        ("HIRAM'S HOSPITAL", False),
        ("I. Hiram's Hospital II. The Barchester Reformer III. Conclusion", False),
        ("By Agatha Christie", False),
        ("", False),
    ],
)
def test_is_prose_rejects_headings_titles_and_contents(paragraph: str, prose: bool) -> None:
    assert is_prose(paragraph) is prose


def test_paragraphs_joins_wrapped_lines_or_keeps_one_per_line() -> None:
    wrapped = ["The first line of a", "wrapped paragraph.", "", "Second one.", ""]
    assert paragraphs(wrapped) == ["The first line of a wrapped paragraph.", "Second one."]
    long = "A " * 80 + "long paragraph."
    per_line = [long, "Short reply.", long, "an unfinished line that", "continues here.", "Next one."]
    assert paragraphs(per_line) == [long, "Short reply.", long, "an unfinished line that continues here.", "Next one."]


def test_strip_gutenberg_markers() -> None:
    lines = ["licence", "*** START OF THE PROJECT GUTENBERG EBOOK X ***", "text", "*** END OF THE PROJECT GUTENBERG EBOOK X ***", "legal"]
    assert strip_gutenberg(lines) == ["text"]
    assert strip_gutenberg(["plain", "book"]) == ["plain", "book"]


BOOK = """The Project Gutenberg eBook of A Tale
*** START OF THE PROJECT GUTENBERG EBOOK A TALE ***
A TALE

By Some Author


CONTENTS

     I.   The Start
     II.  The End


CHAPTER I. THE START

It was a dark night. The wind blew
hard. Mr. Smith waited.

"Who is there?" he asked. Nobody answered.

CHAPTER II

The morning came. It was calm.

THE END
*** END OF THE PROJECT GUTENBERG EBOOK A TALE ***
Licence text. More licence text. Even more.
"""


def test_read_book_drops_front_matter_and_breaks_passages_at_headings(tmp_path: Path) -> None:
    path = tmp_path / "a-tale.txt"
    path.write_text(BOOK, encoding="utf-8")
    book = read_book(path)
    assert book.passages == [
        [
            ["it", "was", "a", "dark", "night"],
            ["the", "wind", "blew", "hard"],
            ["mr", "smith", "waited"],
            ["who", "is", "there", "he", "asked"],
            ["nobody", "answered"],
        ],
        [["the", "morning", "came"], ["it", "was", "calm"]],
    ]
    assert book.paragraphs_kept == 3
    assert book.paragraphs_dropped == 7  # title, author, CONTENTS, contents list, 2 headings, THE END


def test_triples_stay_inside_a_passage(tmp_path: Path) -> None:
    (tmp_path / "a-tale.txt").write_text(BOOK, encoding="utf-8")
    (tmp_path / "SOURCES.txt").write_text("provenance. not a book. at all.\n", encoding="utf-8")
    corpus = read_corpus(tmp_path)
    assert corpus.stats["books"] == 1 and corpus.stats["sentences"] == 7
    assert corpus.centres.tolist() == [1, 2, 3]  # passage 2 has only two sentences: no triple


def test_non_utf8_book_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"Fine first line.\nCaf\xe9 au lait.\n")
    with pytest.raises(InputError) as err:
        read_book(path)
    assert err.value.path == str(path) and err.value.row == 2 and "UTF-8" in err.value.reason


def test_missing_or_empty_books_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        book_files(tmp_path / "nope")
    (tmp_path / "SOURCES.txt").write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match="no \\*.txt books"):
        book_files(tmp_path)


def test_real_books_deterministic_and_front_matter_free(settings: Settings) -> None:
    files = book_files(settings.books_dir)
    assert len(files) >= 90 and all(f.name != "SOURCES.txt" for f in files)
    first = read_corpus(settings.books_dir, max_books=2)
    again = read_corpus(settings.books_dir, max_books=2)
    assert first.sentences == again.sentences and first.centres.tolist() == again.centres.tolist()
    assert first.stats["triples"] > 5000
    # Styles opens with a title page and a contents list; the corpus starts at chapter I's prose.
    assert first.sentences[0][:4] == ["the", "intense", "interest", "aroused"]
    # Lorna Doone holds one paragraph per line; a paragraph splits into several sentences.
    lorna = read_book(settings.books_dir / "r-d-blackmore_lorna-doone.txt")
    assert lorna.passages[0][0][:4] == ["this", "work", "is", "called"]
    assert lorna.num_sentences > 5 * lorna.paragraphs_kept / 2
