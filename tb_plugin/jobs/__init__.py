"""Background loading: a bounded set of worker processes that parse trace files into the on-disk model cache."""
