"""The one exception type the loader raises: a sentence a user can act on."""


class TraceLoadError(Exception):
    """A trace file could not be loaded; ``str(err)`` is a one-line reason for the UI."""
