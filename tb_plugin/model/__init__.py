"""The in-memory model of a trace: event tables, kinds and (in later modules) op trees and correlations."""

from .kinds import Kind
from .tables import TraceModel

__all__ = ["Kind", "TraceModel"]
