"""The one exception type the loader raises: a sentence a user can act on."""


class TraceLoadError(Exception):
    """A trace file could not be loaded; ``str(err)`` is a one-line reason for the UI.

    ``lasting``: the same file version fails the same way anywhere (broken JSON, a decompression bomb), so the
    parse cache may remember the failure instead of loading the file again at the next start. A failure of this
    machine at this moment (a read that failed, too little memory now) is not lasting.
    """

    def __init__(self, message: str, lasting: bool = True) -> None:
        super().__init__(message)
        self.lasting = lasting
