"""The docs' renderer: every figure of the README and docs/*.md rendered from the JSON a run or a benchmark wrote.

``python -m docs_render`` renders every block (``--check`` fails on a stale one or a hand-typed figure);
:mod:`docs_render.markers` is the one marker style and the one splice, :mod:`docs_render.cli` the command.
"""
