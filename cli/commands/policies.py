"""``kvsched report --policies``: reference policies by name, schedulers under test hosted.

A scheduler under test (``NAME=package.module:Class`` or ``NAME=file.py:Class``) is third-party
code. As in ``kvsched check`` it is never imported into kvsched's process: each runs in a host
process of its own, through the judge's door (kvsched.checks.judge.door.hosted_scheduler), under
the limits of the command's options, so a class that hangs, exits or floods its output ends its
own runs, not the report.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from kvsched.commands import UsageError
from kvsched.commands.limits import confinement_from
from kvsched.reference import POLICIES
from kvsched.spec.protocol import SchedulerFactory


@contextmanager
def hosted_policies(
    text: str, args: argparse.Namespace
) -> Iterator[dict[str, SchedulerFactory] | None]:
    """The policies ``text`` names, with their hosts closed on leaving; ``None`` (after saying
    why on stderr) when a scheduler under test broke its host while being imported: PROTO-1."""
    from kvsched.checks.judge.door import HostFailure, TargetError, hosted_scheduler

    confinement = confinement_from(args)
    policies: dict[str, SchedulerFactory] = {}
    broken = False
    with ExitStack() as hosts:
        for name, target in _named(text):
            if not target:
                policies[name] = POLICIES[name]
                continue
            try:
                loaded = hosts.enter_context(hosted_scheduler(target, confinement))
            except TargetError as error:
                raise UsageError(f"--policies {name}={target}: {error}") from None
            except HostFailure as failure:
                message = f"kvsched report: --policies {name}={target}: PROTO-1: {failure}"
                print(message, file=sys.stderr)
                broken = True
                break
            policies[name] = loaded.factory
        yield None if broken else policies


def _named(text: str) -> list[tuple[str, str]]:
    """(name, target) for each comma-separated item; target "" for a reference policy."""
    named: list[tuple[str, str]] = []
    for item in (part.strip() for part in text.split(",") if text):
        name, _, target = item.partition("=")
        if not name:
            raise UsageError(f"--policies: empty policy name in '{text}'")
        if name in (seen for seen, _ in named):
            raise UsageError(f"--policies: '{name}' is given twice")
        if not target and name not in POLICIES:
            known = ", ".join(POLICIES)
            raise UsageError(
                f"--policies: '{name}' is not a reference policy ({known}); for a scheduler of "
                f"your own write NAME=package.module:Class"
            )
        named.append((name, target))
    return named
