"""The one marker style of a rendered block in the docs, and the one function that splices blocks into a page.

A block is ``<!-- NAME:begin (python -m docs_render writes this) -->``, its body, ``<!-- NAME:end -->``.
Everything outside the blocks is left as it is. This module imports nothing of the project, so any layer
may splice a block.
"""
from __future__ import annotations

import re
from typing import Callable, Mapping

WRITER = "python -m docs_render"
#: A block with any writer named in its begin marker: one written under another name is re-rendered with this one's.
BLOCK = re.compile(r"<!-- (?P<name>[a-z0-9-]+):begin (?P<writer>\([^)\n]*\) )?-->\n(?P<body>.*?)<!-- (?P=name):end -->", re.S)
BEGIN_ANY = re.compile(r"<!-- ([a-z0-9-]+):begin ")


def begin(name: str) -> str:
    """The begin marker of block ``name``."""
    return f"<!-- {name}:begin ({WRITER} writes this) -->"


def end(name: str) -> str:
    """The end marker of block ``name``."""
    return f"<!-- {name}:end -->"


def block(name: str, body: str) -> str:
    """Block ``name`` holding ``body`` (trailing newlines dropped), markers included."""
    return f"{begin(name)}\n{body.rstrip(chr(10))}\n{end(name)}"


def names(text: str) -> list[str]:
    """The names of the blocks that begin in ``text``, in order."""
    return BEGIN_ANY.findall(text)


def splice(text: str, bodies: Mapping[str, Callable[[], str]], doc: str) -> tuple[str, list[str]]:
    """``text`` with every block rendered anew by ``bodies[name]()``, and the names of the blocks whose text changed.

    A begin marker without its end marker, or a block ``bodies`` has no renderer for, stops with one line
    naming ``doc``.
    """
    begun, closed = names(text), [m.group("name") for m in BLOCK.finditer(text)]
    if begun != closed:
        raise SystemExit(f"{doc}: block {next(n for n in begun if begun.count(n) > closed.count(n))!r} has no end marker")
    unknown = sorted(set(begun) - set(bodies))
    if unknown:
        raise SystemExit(f"{doc}: no renderer for block(s) {', '.join(unknown)} (known: {', '.join(sorted(bodies))})")
    stale: list[str] = []

    def fresh(match: re.Match[str]) -> str:
        name = match.group("name")
        rendered = block(name, bodies[name]())
        if rendered != match.group(0):
            stale.append(name)
        return rendered

    return BLOCK.sub(fresh, text), stale
