"""Ingestion: landing click logs -> validated, normalised, de-duplicated, de-botted ``clicks/`` partitions; landing
catalogue files -> the catalogue as of each day (``catalog/``)."""
