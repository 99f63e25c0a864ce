"""The click simulator: judged training pairs -> realistic landing logs, and their click statistics."""
