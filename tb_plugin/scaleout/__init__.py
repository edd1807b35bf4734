"""Scale-out: traces preprocessed where they were written (a Dask cluster or a local pool) into a shared cache of
models and per-rank summaries, which servers read instead of parsing.

``summaries`` stores a rank summary (``analysis.rank_summary``) as Parquet beside its model; ``task`` is what a
worker runs for one file; ``preprocess`` plans a logdir against the cache and runs the tasks on an executor from
``executors`` (Dask, imported only when asked for, or a local process pool), with progress and per-file failures.
"""
