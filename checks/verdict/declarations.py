"""What a target declared, and what each declaration excused in the run, in a verdict's words.

A declaration (spec/properties.py) is a field of the target's properties that differs from the
lesson model's default; a lesson policy (static, continuous) names what is checked and excuses
nothing, so it is not one. Some declarations take an invariant out or relax it; the monitor counts
what each let through where it is applied (:mod:`kvsched.checks.monitor.excuses`), and
:func:`excuses` says it here, so a verdict cannot pass on a declaration without saying so.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from kvsched.checks.monitor.excuses import Excused
from kvsched.spec.applicability import applicable, declared_out
from kvsched.spec.invariants import CATALOGUE
from kvsched.spec.properties import RELAXES, Declaration, TargetProperties, is_declaration
from kvsched.spec.text import plural
from kvsched.spec.vocabulary import is_policy


@dataclass(frozen=True)
class Excuse:
    """One declaration that took an invariant out or relaxed it, and what it let through."""

    declaration: Declaration
    value: str
    """As declared: ``stops_early``, ``admission='lazy'``."""
    invariants: tuple[str, ...]
    excused: str
    """What it excused in this run, with counts, or that it excused nothing."""
    count: int
    """How many things it excused (0: nothing); a declaration that takes a rule out counts the
    runs it was out for."""

    def describe(self) -> str:
        return f"{self.value} ({', '.join(self.invariants)}): {self.excused}"


@dataclass(frozen=True)
class Grading:
    """``kvsched check --grade``: the declarations the grader allowed, and the limits the
    target ran under, which a graded verdict states."""

    allowed: tuple[Declaration, ...]
    limits: str

    def describe(self) -> str:
        allowed = ", ".join(self.allowed) or "none (--allow NAME accepts one)"
        return f"Graded (--grade). Declarations allowed: {allowed}. {self.limits}"


def refusal(made: dict[Declaration, str], allowed: frozenset[Declaration], where: str) -> str:
    """Why ``--grade`` refuses the declarations in ``made`` that the grader did not allow
    (``""``: it refuses none); ``where`` says where the target made them."""
    refused = [name for name in made if name not in allowed]
    if not refused:
        return ""
    what = "; ".join(
        f"{made[name]} relaxes {', '.join(RELAXES[name])}"
        if name in RELAXES
        else f"{made[name]} changes what the monitor checks"
        for name in refused
    )
    again = " ".join(f"--allow {name}" for name in refused)
    return (
        f"--grade: {where} declares what the grader did not allow: {what}. A declaration "
        "changes what a passing verdict means, so grading accepts only those allowed: if the "
        f"assignment permits this design, run again with {again}; otherwise remove the "
        "declaration from the target"
    )


def declared(properties: TargetProperties | None, policy: str = "") -> dict[Declaration, str]:
    """The declarations ``properties`` make, each as declared (``name`` or ``name=value``); a
    non-lesson ``policy`` is one too."""
    made: dict[Declaration, str] = {}
    if policy and not is_policy(policy):
        made[Declaration("policy")] = f"policy={policy!r}"
    if properties is None:
        return made
    for field in fields(properties):
        value = getattr(properties, field.name)
        if field.name == "policy" or value == field.default:
            continue
        if is_declaration(field.name):
            made[field.name] = field.name if value is True else f"{field.name}={value!r}"
    return made


def excuses(
    properties: TargetProperties | None, policy: str, excused: Excused
) -> tuple[Excuse, ...]:
    """Every declaration that relaxes a check, with what it excused over the runs counted."""
    made = declared(properties, policy)
    found = []
    for name, value in made.items():
        if name not in RELAXES:
            continue
        words, count = _words(name, properties or TargetProperties(), policy, excused)
        found.append(Excuse(name, value, RELAXES[name], words, count))
    return tuple(found)


def _words(
    name: Declaration, properties: TargetProperties, policy: str, e: Excused
) -> tuple[str, int]:
    runs = plural(e.runs, "monitored run")
    nothing = f"excused nothing in this run ({runs})"
    bound = _bound(e)
    if name == "stops_early":
        if not e.stopped_early:
            return nothing, 0
        fewest, most = e.fewest_tokens, e.most_tokens
        after = (
            f"{plural(fewest, 'token')} each" if fewest == most else f"{fewest} to {most} tokens"
        )
        words = f"{e.stopped_early} of {plural(e.finished, 'request')} stopped early, after {after}"
        if e.from_queue:
            words += f"; {e.from_queue} of them from the waiting queue"
        if e.unjudged_heads:
            words += f"; {plural(e.unjudged_heads, 'iteration')} judged no head (an abort)"
        return f"{words} ({runs})", e.stopped_early
    if name == "policy":
        out = [i.id for i in CATALOGUE if i.layer == "conformance"]
        kept = {i.id for i in applicable(policy, properties)}
        left = [i for i in out if i not in kept]
        return f"{', '.join(left) or 'nothing'} not checked in any of the {runs}", e.runs
    if name == "prefill_chunk" and "LIVE-3" in declared_out(properties):
        words = f"LIVE-3 was not checked: {plural(e.thrash, 'repeated preemption')} without "
        return f"{words}progress went unreported ({runs}); {bound[0]}", e.runs
    table: dict[str, tuple[int, str]] = {
        "admission": (
            e.overcommitted,
            f"{plural(e.overcommitted, 'iteration')} admitted past the pool's peak pages (PAGE-5 "
            "does not bound a lazy batch's commitment)",
        ),
        "preemption": (
            e.preemptions,
            f"{plural(e.preemptions, 'request')} left the batch unfinished and came back; "
            + bound[0],
        ),
        "prefix_sharing": (
            e.shared_pages,
            f"{plural(e.shared_pages, 'page')} taken by reference while another request held it",
        ),
        "reserve_ahead": (
            e.reserved_over,
            f"{plural(e.reserved_over, 'request-iteration')} held more pages than their KV "
            f"needs, up to {e.extra_pages} more, within their reservations",
        ),
        "watermark_pages": (
            e.watermark,
            f"{plural(e.watermark, 'iteration')} left a head waiting that fitted but for the "
            f"{properties.watermark_pages}-page watermark",
        ),
        "order": (
            e.unordered,
            f"{plural(e.unordered, 'admission')} not judged for their order (BATCH-4)",
        ),
        "requeue": (
            e.requeued_at_tail,
            f"{plural(e.requeued_at_tail, 'preempted request')} rejoined the queue at its tail, "
            "not its head (BATCH-4)",
        ),
        "budget": (
            e.padded,
            f"{plural(e.padded, 'iteration')} left the head waiting where the padded budget "
            "refused what the sum of tokens fitted",
        ),
        "estimate_admission": (
            e.unjudged_slots,
            f"{plural(e.unjudged_slots, 'iteration')} with a free slot while a request waited, "
            "not judged (BATCH-3)",
        ),
        "max_partial_prefills": (
            e.capped_prefills,
            f"{plural(e.capped_prefills, 'iteration')} left a prefill of the batch waiting once "
            f"{plural(properties.max_partial_prefills or 0, 'prefill')} of the batch computed",
        ),
        "async_scheduling": (
            e.fenced_heads + e.fenced_waits,
            f"{plural(e.fenced_heads, 'iteration')} left a head waiting that fitted but for "
            "pages fenced for the step in flight, and LIVE-1's bound grew by "
            f"{plural(e.fenced_waits, 'iteration')} waiting for them",
        ),
        "state_slots": (
            e.slotless_heads,
            f"{plural(e.slotless_heads, 'iteration')} left a batch slot idle while a request "
            f"waited and all {plural(properties.state_slots or 0, 'state slot')} were held",
        ),
        "restart": (
            e.folds,
            f"{plural(e.folds, 'fold')} moved {plural(e.folded_tokens, 'prompt token')} to "
            "the output",
        ),
    }
    table["max_model_len"] = table["reserve_ahead"]
    if name in ("chunked_prefill", "prefill_chunk"):
        words, count = bound
    else:
        count, words = table[name]
    if not count:
        return nothing, 0
    return f"{words} ({runs})", count


def _bound(e: Excused) -> tuple[str, int]:
    """What LIVE-1's allowances (chunked prefill, recompute, folds) excused: the runs that went
    past the lesson's bound, and by how much."""
    grew = f"LIVE-1's bound grew by {plural(e.allowance, 'iteration')}"
    if not e.past_bound_runs:
        return f"{grew}, which no run needed", 0
    return (
        f"{grew}; {e.past_bound_runs} of {plural(e.runs, 'run')} went past the lesson's bound, "
        f"by at most {plural(e.past_bound, 'iteration')}",
        e.past_bound_runs,
    )
