"""Benchmarks of what the models score: over training seeds, on held-out clicks, MiniLM fine-tuned."""
