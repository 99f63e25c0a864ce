"""Evaluation: judged sets, NDCG and its significance, the baselines, and the decisions made on them (ship, promote)."""
