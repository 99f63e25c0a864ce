"""Text normalisation as in the paper: lower-case, whitespace tokens, numbers kept, no stemming."""
from __future__ import annotations

import unicodedata


def tokens(text: str) -> list[str]:
    """Lower-cased whitespace tokens of ``text`` (NFC-normalised; punctuation kept inside tokens)."""
    return unicodedata.normalize("NFC", text).lower().split()


def normalize(text: str) -> str:
    """The normalised form stored beside the raw text: tokens joined by single spaces."""
    return " ".join(tokens(text))
