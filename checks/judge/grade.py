"""``kvsched check --grade``: a target is judged only on the declarations the grader allows.

A declaration (spec/properties.py) changes what a passing verdict means: ``stops_early`` lets a
request finish after one token, a watermark lets a slot sit idle. A target under test can make
any it likes, so a grader names those the assignment permits (``--allow NAME``) and every other
is refused as invalid input (exit 2), before the target is exercised, with where it was made
and how to allow it.
"""

from __future__ import annotations

from kvsched.checks.targets.load import TargetError
from kvsched.checks.verdict.declarations import declared, refusal
from kvsched.spec.properties import Declaration, TargetProperties


def enforce(
    allowed: frozenset[Declaration] | None,
    properties: TargetProperties | None,
    policy: str,
    where: str,
    needs_policy: bool = True,
) -> None:
    """TargetError unless every declaration ``where`` makes is ``allowed`` (``None``: not
    grading, nothing refused), and, ``needs_policy``, ``policy`` is named: a recording's
    policy is the engine's, which no option changes."""
    if allowed is None:
        return
    if needs_policy and not policy:
        raise TargetError(
            f"--grade: {where} declares no policy, so no conformance rule (BATCH-2 to BATCH-5) "
            "would be checked and a pass would say less than it seems; pass --policy static or "
            "--policy continuous"
        )
    why = refusal(declared(properties, policy), allowed, where)
    if why:
        raise TargetError(why)
