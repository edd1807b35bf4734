"""Analyses: pure functions from a :class:`~tb_plugin.model.TraceModel` to plain data, one module per view.

They never read files and never see HTTP.
"""
