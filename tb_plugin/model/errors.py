"""What a request can name that a trace does not have: a step, an annotation, a drill-down path, a category.

The analysis that knows what exists raises :class:`NotFound` with the sentence the user reads (the name asked for
and, where short, what there is instead); ``api.http.json_route`` answers it 404 in one place, and the Python API
lets it through. It is a ``LookupError`` but never a ``KeyError``: a ``KeyError`` from a bug (a dict missing a key
it should have) stays a bug, a logged 500 that says so, never a wrong "not found".
"""

from __future__ import annotations

from collections.abc import Sequence

SHOWN_NAMES = 50  # names listed in a sentence, the rest counted


class NotFound(LookupError):
    """Something asked for by name that the trace does not have; ``str()`` is the user's sentence."""

    def __init__(self, sentence: str) -> None:
        super().__init__(sentence)
        self.sentence = sentence

    def __str__(self) -> str:
        return self.sentence


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:SHOWN_NAMES]) or "none"
    return shown + (f", … {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else "")


class UnknownStep(NotFound):
    """A step name (``"12"`` for ``ProfilerStep#12``) the trace has no step of."""

    def __init__(self, step: str | None, steps: Sequence[str]) -> None:
        super().__init__(f"no step {step!r} in this trace (its steps: {_listed(steps)})")
        self.step = step
        self.steps = list(steps)


class UnknownAnnotation(NotFound):
    """A host annotation (``record_function``) and occurrence the trace does not have."""

    def __init__(self, name: str, occurrence: int, count: int) -> None:
        has = f"it has {count}" if count else "it has none of that name"
        super().__init__(f"no annotation {name!r} #{occurrence} in this trace ({has})")
        self.name = name
        self.occurrence = occurrence


class UnknownPath(NotFound):
    """A drill-down path (the Diff view's ``0-3-1``) that leads nowhere."""

    def __init__(self, path: str) -> None:
        super().__init__(f"no diff entry at path {path!r}")
        self.path = path


class UnknownCategory(NotFound):
    """A step-breakdown category name that is not one of the categories."""

    def __init__(self, category: str) -> None:
        super().__init__(f"no breakdown category {category!r}")
        self.category = category
