"""The book corpus of the skip-thought baseline: novels -> paragraphs -> sentences -> tokens.

Files are read exactly as they lie in ``Settings.books_dir`` (UTF-8, one book a file,
``SOURCES.txt`` is provenance and skipped), in name order, so the corpus is deterministic.

* Project Gutenberg header/footer markers (``*** START OF ...`` / ``*** END OF ...``) are cut
  when present.
* Paragraphs: most books wrap at ~70 columns with blank lines between paragraphs (lines of a
  block are joined); a book where >= 5 % of the non-blank lines exceed 100 characters holds one
  paragraph per line.
* Front matter and headings: a paragraph is kept only if it reads like prose (mostly lower-case
  letters, ends with sentence or quote punctuation, is not a "Chapter 3." heading). Title pages,
  dedications, contents lists and chapter titles fail that test; every dropped paragraph is
  counted and ends a *passage*, so sentence triples never span a heading or a gap.
* Tokens: :func:`word_tokens`, i.e. :func:`pipeline.text.textnorm.tokens` (lower-cased whitespace
  tokens) after dashes become spaces, with quotes and punctuation stripped from the edges of
  each token (``"yes,"`` -> ``yes``; ``1/2`` and ``don't`` stay whole). The skip-thought scorer
  tokenises queries and titles with the same function.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.core.errors import InputError
from pipeline.text.textnorm import tokens

PROVENANCE_FILE = "SOURCES.txt"
#: A book whose share of long lines reaches this holds one paragraph per line.
LINE_PARAGRAPH_SHARE = 0.05
LONG_LINE = 100

_GUTENBERG_START = re.compile(r"^\s*\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG", re.IGNORECASE)
_GUTENBERG_END = re.compile(r"^\s*(\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg)", re.IGNORECASE)
_HEADING = re.compile(r"^(chapter|book|part|volume|stave|canto|letter|section)\s+[\w.:-]+\s*\.?$", re.IGNORECASE)
_TERMINAL = tuple(".!?\"'\u201d\u2019)]_:;,-\u2014\u2026")
_SENTENCE_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]_]*\s+(?=[\"'\u201c\u2018(\[_]*[A-Z0-9])")
_ABBREVIATIONS = frozenset(
    "mr mrs ms messrs dr st mme mlle jr sr prof rev capt col gen lt sgt hon esq no vol ch fig vs viz".split()
)
_DASHES = re.compile(r"--+|[\u2014\u2013]")
_EDGE_PUNCTUATION = "\"'`.,;:!?()[]{}<>_*\u201c\u201d\u2018\u2019\u2026-"


def word_tokens(text: str) -> list[str]:
    """Lower-cased whitespace tokens with edge punctuation stripped (empty tokens dropped)."""
    text = _DASHES.sub(" ", text.replace("\u2019", "'"))
    out = []
    for tok in tokens(text):
        tok = tok.strip(_EDGE_PUNCTUATION)
        if tok:
            out.append(tok)
    return out


def split_sentences(paragraph: str) -> list[str]:
    """Sentences of one paragraph: split after . ! ? (and closing quotes) before a capital or digit."""
    out, start = [], 0
    for match in _SENTENCE_END.finditer(paragraph):
        words = paragraph[start:match.start() + 1].split()
        last = words[-1].rstrip(".!?").lstrip("\"'(\u201c\u2018_").lower() if words else ""
        if match.group().startswith(".") and (last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())):
            continue  # "Mr. Brown", "J. M. Barrie": not a sentence end
        out.append(paragraph[start:match.end()].strip())
        start = match.end()
    tail = paragraph[start:].strip()
    if tail:
        out.append(tail)
    return out


def is_prose(paragraph: str) -> bool:
    """True for a paragraph of running text; False for titles, contents, headings, dedications."""
    text = paragraph.strip()
    if not text or not text.endswith(_TERMINAL) or _HEADING.match(text):
        return False
    letters = [c for c in text if c.isalpha()]
    upper = sum(c.isupper() for c in letters)
    return bool(letters) and upper <= 0.5 * len(letters) and upper < len(letters)


def strip_gutenberg(lines: list[str]) -> list[str]:
    """The lines between Project Gutenberg's START and END markers (all lines when absent)."""
    start = next((i + 1 for i, line in enumerate(lines) if _GUTENBERG_START.match(line)), 0)
    end = next((i for i in range(start, len(lines)) if _GUTENBERG_END.match(lines[i])), len(lines))
    return lines[start:end]


def paragraphs(lines: list[str]) -> list[str]:
    """Paragraphs of a book: blank-line blocks joined, or one per line in line-per-paragraph books."""
    filled = [line.strip() for line in lines if line.strip()]
    out: list[str] = []
    if filled and sum(len(line) > LONG_LINE for line in filled) >= LINE_PARAGRAPH_SHARE * len(filled):
        for line in filled:  # a line that starts lower-case continues an unfinished paragraph
            if out and line[0].islower() and not out[-1].endswith(_TERMINAL):
                out[-1] = f"{out[-1]} {line}"
            else:
                out.append(line)
        return out
    block: list[str] = []
    for line in [*lines, ""]:
        if line.strip():
            block.append(line.strip())
        elif block:
            out.append(" ".join(block))
            block = []
    return out


@dataclass
class Book:
    """One book: its sentences as token lists, grouped into passages of contiguous prose."""

    name: str
    passages: list[list[list[str]]]
    paragraphs_kept: int = 0
    paragraphs_dropped: int = 0

    @property
    def num_sentences(self) -> int:
        """Sentences of the book (all passages)."""
        return sum(len(p) for p in self.passages)


def read_book(path: str | Path) -> Book:
    """Read one book file: strip markers and front matter, split paragraphs and sentences."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(str(path), f"not UTF-8 (byte {exc.start}: {exc.reason})", row=line) from None
    lines = strip_gutenberg(text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    book = Book(name=path.name, passages=[])
    passage: list[list[str]] = []
    for para in paragraphs(lines):
        if not is_prose(para):
            book.paragraphs_dropped += 1
            if passage:
                book.passages.append(passage)
                passage = []
            continue
        book.paragraphs_kept += 1
        passage.extend(toks for toks in (word_tokens(s) for s in split_sentences(para)) if toks)
    if passage:
        book.passages.append(passage)
    return book


def book_files(books_dir: str | Path) -> list[Path]:
    """The book files of ``books_dir`` in name order (provenance file excluded)."""
    folder = Path(books_dir)
    if not folder.is_dir():
        raise InputError(str(folder), "books folder not found (check DEEPSENT_DATA_DIR)")
    files = sorted(p for p in folder.glob("*.txt") if p.name != PROVENANCE_FILE)
    if not files:
        raise InputError(str(folder), "no *.txt books in the folder")
    return files


@dataclass
class BookCorpus:
    """Every sentence of the books in order, and the centres of consecutive-sentence triples.

    ``centres[k] = i`` means sentences ``i - 1, i, i + 1`` are consecutive within one passage of
    one book: the (previous, current, next) triple a skip-thought model trains on.
    """

    sentences: list[list[str]]
    centres: np.ndarray
    stats: dict[str, int] = field(default_factory=dict)


def read_corpus(books_dir: str | Path, max_books: int = 0, max_sentences: int = 0) -> BookCorpus:
    """The corpus of the first ``max_books`` books (0 = all), cut at ``max_sentences`` (0 = all)."""
    files = book_files(books_dir)
    files = files[:max_books] if max_books else files
    sentences: list[list[str]] = []
    centres: list[int] = []
    stats = {"books": 0, "paragraphs_kept": 0, "paragraphs_dropped": 0, "passages": 0}
    for path in files:
        book = read_book(path)
        stats["books"] += 1
        stats["paragraphs_kept"] += book.paragraphs_kept
        stats["paragraphs_dropped"] += book.paragraphs_dropped
        for passage in book.passages:
            if max_sentences:
                passage = passage[: max_sentences - len(sentences)]
            stats["passages"] += 1
            first = len(sentences)
            sentences.extend(passage)
            centres.extend(range(first + 1, len(sentences) - 1))
            if max_sentences and len(sentences) >= max_sentences:
                break
        if max_sentences and len(sentences) >= max_sentences:
            break
    if not centres:
        raise InputError(str(books_dir), "no three consecutive sentences found in the books")
    stats.update(sentences=len(sentences), triples=len(centres), tokens=sum(len(s) for s in sentences))
    return BookCorpus(sentences=sentences, centres=np.asarray(centres, dtype=np.int64), stats=stats)
