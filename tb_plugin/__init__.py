"""pytorch-tb-profiler: a TensorBoard plugin that turns torch.profiler traces into answers."""

__version__ = "0.1.0"
