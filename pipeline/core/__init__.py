"""The shared core of every stage: settings, the store, errors, results, schemas, paths and small helpers."""
