"""How a stage's process runs and ends: stop signals, the Dask cluster it fans out to, the notice of a failure."""
