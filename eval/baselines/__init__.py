"""Ranking baselines, one module each, each declaring itself in a literal ``SPEC`` (see ``eval/baseline_catalog.py``).

Modules are imported only when their baseline is used (``eval.baseline_catalog.baseline_class``); MiniLM's
module says why it is unavailable when its optional packages are not installed.
"""
