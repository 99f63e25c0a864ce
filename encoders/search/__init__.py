"""The serving path: corpus embeddings, vector indexes, BM25, fusion and search over the whole corpus."""
