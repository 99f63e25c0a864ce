"""The store and what it holds: the store (a local folder or S3), the datasets' schemas, manifests, the quarantine."""
