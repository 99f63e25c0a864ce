"""Ingestion: landing click logs -> validated, normalised, de-duplicated, de-botted ``clicks/`` partitions."""
