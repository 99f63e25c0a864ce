"""Flags that a command's mode would ignore are errors naming both flags, never dropped without a word.

A command declares which flags each of its modes uses; a flag given (set to anything but ``None``, so such
flags default to ``None`` and get their value in the handler) with a mode that does not use it stops the
command with one line naming the mode's flag, the ignored flag and why.
"""
from __future__ import annotations

import argparse
from typing import Iterable

from pipeline.core.errors import ConfigError


def flag_name(dest: str) -> str:
    """``gate_judgments`` -> ``--gate-judgments``."""
    return "--" + dest.replace("_", "-")


def refuse_unused(args: argparse.Namespace, mode: str, unused: Iterable[str], why: str) -> None:
    """A ConfigError naming ``mode`` and the first flag of ``unused`` (destinations) that was given, with ``why``."""
    given = [dest for dest in unused if getattr(args, dest, None) not in (None, False)]
    if given:
        raise ConfigError(f"{flag_name(given[0])} cannot be used with {mode}: {why}")

