"""SLOT-1 and SLOT-2: a second declared resource, per-request state slots (spec/semantics.md
8.4; section 4.2).

A hybrid model keeps each running request's recurrent state in one slot of a fixed pool beside
the page pool (SGLang's mamba slots). A target that declares ``state_slots`` reports who holds
which slot twice an iteration: after its schedule and after its update. Two rules read those
snapshots:

- SLOT-1, conservation: every slot id lies in the declared pool, no slot has two holders, every
  request of the batch holds one, and the free count the target reports after the update is the
  pool less the slots held;
- SLOT-2, no leak: a request holds a slot only while it runs. After the schedule, a holder that
  is not in the batch was preempted or failed its admission (SGLang #16067: the slot was taken,
  the page allocation then failed and the request went back to the queue with it); after the
  update, a holder that finished, was aborted or is waiting keeps a slot the pool lost (SGLang
  #12693, on abort).

Both apply only where ``state_slots`` is declared, and both name the holder and the slot. A
target that declares slots and reports none is PROTO-1: nothing could be judged. Where the pool
is smaller than the batch limit, a batch slot left idle while every state slot is held is not
BATCH-3 (checks/monitor/batch.py reads :meth:`~kvsched.spec.properties.TargetProperties.
running_limit`). The reference takes a slot when it admits and gives it back when a request
finishes, is preempted or is rejected (reference/engine_scheduler/scheduler.py).

An event log carries them as operations (spec/eventlog.md 4.14): ``slot`` and ``unslot`` as the
engine takes and gives back a slot, and each line's ``free_slots``; its reader builds the two
snapshots from them. The fast path takes no line of a log that declares state slots
(checks/eventlog/steady_ops.py ``in_scope``), so these checks have no work on a steady line.
"""

from __future__ import annotations

from collections.abc import Mapping

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.registry import Monitor, Steady, per_iteration
from kvsched.spec.events import IterationEvent
from kvsched.spec.text import plural


def _unreported(monitor: Monitor, event: IterationEvent) -> Finding | None:
    """PROTO-1 for a target that declares state slots and leaves a snapshot out."""
    missing = [
        name
        for name, value in (
            ("ScheduledBatch.slots", event.slots),
            ("StepOutcome.slots", event.slots_after),
            ("StepOutcome.free_slots", event.free_slots),
        )
        if value is None
    ]
    if not missing:
        return None
    return Finding(
        "PROTO-1",
        event.iteration,
        f"the target declares {monitor.properties.state_slots} state slots but did not report "
        f"{' or '.join(missing)}; report every holder and its slot after each call "
        "(spec/protocol.py, section 4.2) or drop the declaration",
    )


def _conserved(monitor: Monitor, n: int, slots: Mapping[str, int], when: str) -> Finding | None:
    """SLOT-1 on one snapshot: ids within the pool, one holder per slot."""
    pool = monitor.properties.state_slots or 0
    holder: dict[int, str] = {}
    for rid, slot in slots.items():
        if slot >= pool:
            return Finding(
                "SLOT-1",
                n,
                f"request {rid!r} holds state slot {slot} {when}, outside the declared pool of "
                f"{plural(pool, 'slot')} (ids 0 to {pool - 1})",
                requests=(rid,),
            )
        other = holder.setdefault(slot, rid)
        if other != rid:
            return Finding(
                "SLOT-1",
                n,
                f"requests {other!r} and {rid!r} both hold state slot {slot} {when}: a slot "
                "holds one request's state",
                requests=(other, rid),
            )
    return None


def _why_not_running(monitor: Monitor, event: IterationEvent, rid: str) -> str:
    if rid in event.finished:
        return f"finished in iteration {event.iteration}"
    if rid in event.preempted:
        return f"was preempted in iteration {event.iteration}"
    return f"is {monitor.requests.where(rid)}, not running"


@per_iteration("pages", "PROTO-1", "SLOT-1", "SLOT-2", steady=Steady())
def state_slots_after_the_schedule(monitor: Monitor, event: IterationEvent) -> Finding | None:
    """Once the schedule's tables are in: the slots reported after the schedule are conserved
    (SLOT-1), every request of the batch holds one, and only they do (SLOT-2)."""
    if "SLOT-1" not in monitor.applicable:
        return None
    if (unreported := _unreported(monitor, event)) is not None:
        return unreported
    slots, n = event.slots, event.iteration
    assert slots is not None  # _unreported
    if (
        finding := _conserved(monitor, n, slots, f"after the schedule of iteration {n}")
    ) is not None:
        return finding
    for rid in event.active:
        if rid not in slots:
            return Finding(
                "SLOT-1",
                n,
                f"request {rid!r} runs in iteration {n} without a state slot: the target "
                f"declares a pool of {plural(monitor.properties.state_slots or 0, 'slot')}, one "
                "held by each running request from its admission",
                requests=(rid,),
            )
    running = set(event.active)
    for rid, slot in slots.items():
        if rid not in running:
            return Finding(
                "SLOT-2",
                n,
                f"request {rid!r} holds state slot {slot} after the schedule of iteration {n} "
                f"but {_why_not_running(monitor, event, rid)}: a request preempted or sent "
                "back to the queue by an admission that failed gives its slot back",
                requests=(rid,),
            )
    return None


@per_iteration("completion", "SLOT-1", "SLOT-2", steady=Steady())
def state_slots_after_the_update(monitor: Monitor, event: IterationEvent) -> Finding | None:
    """Once the iteration's finishes are in: the slots reported after the update are conserved
    and counted (SLOT-1), and no request that finished or does not run holds one (SLOT-2)."""
    if "SLOT-1" not in monitor.applicable:
        return None
    slots, free, n = event.slots_after, event.free_slots, event.iteration
    if slots is None or free is None:
        return None  # PROTO-1, reported after the schedule
    if (finding := _conserved(monitor, n, slots, f"after iteration {n}")) is not None:
        return finding
    running = set(event.active).difference(event.finished)
    for rid, slot in slots.items():
        if rid not in running:
            return Finding(
                "SLOT-2",
                n,
                f"request {rid!r} still holds state slot {slot} after iteration {n} but "
                f"{_why_not_running(monitor, event, rid)}: a request that finishes, is aborted "
                "or leaves the batch gives its slot back",
                requests=(rid,),
            )
    pool = monitor.properties.state_slots or 0
    if free + len(slots) != pool:
        held = ", ".join(f"{rid!r} slot {slot}" for rid, slot in sorted(slots.items())[:8])
        return Finding(
            "SLOT-1",
            n,
            f"the target counts {plural(free, 'state slot')} free after iteration {n}, but "
            f"{len(slots)} of its {pool} are held ({held or 'none'}): "
            f"{pool - len(slots)} should be free",
            requests=tuple(sorted(slots))[:8],
        )
    return None
