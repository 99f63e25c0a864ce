"""Command groups of the deepsent CLI (one module each)."""
