"""Background loading: a bounded set of worker processes that parse trace files into the on-disk model cache."""

# How long one load may take before it is stopped and its span fails (``--profiler_load_timeout``). A 2 GB trace
# loads in well under a minute on 2 cores; a load that takes this long is stuck (a stalled network mount or store)
# and would hold one of the few loader slots for good. Here, not in the scheduler: ``plugin.py`` reads it for its
# flag's default without importing the loader.
DEFAULT_LOAD_TIMEOUT = 600.0
