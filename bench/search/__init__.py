"""Benchmarks of served search: the vector index at scale, the served fusion against ranx's."""
