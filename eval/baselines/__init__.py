"""Ranking baselines, one module each, each declaring itself in a literal ``SPEC`` (see ``eval/catalog.py``).

Modules are imported only when their baseline is used (``eval.catalog.baseline_class``); MiniLM's
module says why it is unavailable when its optional packages are not installed.
"""
