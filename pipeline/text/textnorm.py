"""Text normalisation as in the paper: lower-case, whitespace tokens, numbers kept, no stemming.

:func:`normalize` is the form the pipeline stores and encodes. :func:`content_key` is what two texts are
compared by when the question is "is this the same text, cosmetic edits aside" (the gate's refusal of the
reported judged set): Unicode compatibility forms (NFKC: full-width letters, ligatures, no-break spaces),
case, punctuation, symbols, invisible format characters and spacing do not count. :func:`hidden_char` and
:func:`visible` find and show the characters a reader cannot see (:data:`HIDDEN_CATEGORIES`), so that text from a
file can be refused or printed without them passing as something else.
"""
from __future__ import annotations

import unicodedata


def tokens(text: str) -> list[str]:
    """Lower-cased whitespace tokens of ``text`` (NFC-normalised; punctuation kept inside tokens)."""
    return unicodedata.normalize("NFC", text).lower().split()


def normalize(text: str) -> str:
    """The normalised form stored beside the raw text: tokens joined by single spaces."""
    return " ".join(tokens(text))


def content_key(text: str) -> str:
    """The letters, digits and combining marks of :func:`normalize`'s form after NFKC and case folding, nothing
    else: one key for ``"Drill"``, ``"drill ."``, ``"ＤＲＩＬＬ"`` and ``"dr\u200bill"``; texts that differ in a
    letter or a digit keep different keys."""
    folded = unicodedata.normalize("NFKC", normalize(unicodedata.normalize("NFKC", text)).casefold())
    return "".join(char for char in folded if unicodedata.category(char)[0] in "LNM")


#: Unicode categories of the characters nobody sees printed: controls (NUL, line breaks, ESC), format characters
#: (zero-width spaces and joiners, bidirectional overrides, the byte-order mark), surrogates, and the line and
#: paragraph separators.
HIDDEN_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))


def hidden_char(text: str) -> str | None:
    """The first character of ``text`` in HIDDEN_CATEGORIES, or None."""
    if text.isprintable():  # no character of any of these categories
        return None
    return next((c for c in text if unicodedata.category(c) in HIDDEN_CATEGORIES), None)


def blank(text: str) -> bool:
    """Whether ``text`` shows nothing: only whitespace and hidden characters (``" \u200b "``, ``""``)."""
    return all(c.isspace() or unicodedata.category(c) in HIDDEN_CATEGORIES for c in text)


def visible(text: str) -> str:
    """``text`` with each hidden character written as its Python escape (``\\x00``, ``\\n``, ``\\u200b``), to
    print text that came from a file on one line that is what it looks like."""
    if text.isprintable():
        return text
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in HIDDEN_CATEGORIES else c for c in text)
