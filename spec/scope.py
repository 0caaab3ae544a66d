"""The scope of a second implementation: what it models, and what it refuses (section 1).

The reference (``reference/engine.py`` with the reference schedulers) runs any workload and any
scheduler. Second implementations of the same rules are faster or prove more, and cover less: the
event-jumping replay and the lesson's Z3 models know only its two reference policies, the engine
Z3 model one family of the engine scheduler's designs. Each
states its scope as a function answering a :class:`Scope`, and refuses with :class:`OutOfScope`
what it does not cover, naming what to use instead, rather than answering a question it was never
built to answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from .properties import TargetProperties


class OutOfScope(ValueError):
    """A second implementation was asked about something it does not model."""


@dataclass(frozen=True)
class Scope:
    """Whether a question is covered; when not, why, and what covers it."""

    covered: bool
    reason: str = ""
    """What falls outside, in words; empty when covered."""
    instead: str = ""
    """What to use instead; empty when covered."""

    def require(self, what: str) -> None:
        """Raise :class:`OutOfScope` naming ``what`` refused it, unless covered."""
        if not self.covered:
            raise OutOfScope(
                f"{what} does not model this: {self.reason}. Use instead: {self.instead}"
            )


COVERED = Scope(True)


def outside(reason: str, instead: str) -> Scope:
    return Scope(False, reason, instead)


def beyond_lesson(properties: TargetProperties) -> tuple[str, ...]:
    """The declarations of ``properties`` that depart from the lesson model, as ``name=value``."""
    lesson = TargetProperties(policy=properties.policy)
    return tuple(
        f"{name}={getattr(properties, name)!r}"
        for name in TargetProperties.__dataclass_fields__
        if getattr(properties, name) != getattr(lesson, name)
    )
