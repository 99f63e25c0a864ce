"""Benchmarks of the pipeline's stages: rows, pairs, examples and titles per second, peak memory."""
