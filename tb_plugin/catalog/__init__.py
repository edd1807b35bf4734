"""Finding traces: the storage seam, file-name parsing and the catalog of runs, workers and spans."""
