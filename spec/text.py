"""How kvsched words its data for people: counts, ids, page lists, a workload, one iteration.

Every renderer (the verdict table and JUnit, ``kvsched replay``'s timeline, the monitor's
findings) takes its words from here, so a page list reads ``[0 1]`` everywhere and "1 pages"
nowhere.

Here too is what no output of kvsched's may carry as it came: the characters a target's text
(an exception, a log's request id, a file's name) could use to drive a terminal or break a
report. :func:`escaped` shows each as a visible escape (``\\x1b``, ``\\u202e``), and every
renderer passes what it shows through it, so the verdict a person or a grader reads is
kvsched's, whatever the target wrote.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping

from kvsched.spec.events import IterationEvent
from kvsched.spec.workload import Request, Workload

TEXT_LIMIT = 2000
"""The most characters of one text of the target's (an exception's, a refusal) kvsched shows:
past it, the text is :func:`cut`."""

_FORBIDDEN = re.compile(
    "["
    "\x00-\x08\x0b-\x1f"  # C0 but tab and newline: ESC, CR, BS drive a terminal; XML forbids them
    "\x7f-\x9f"  # DEL, and C1: U+009B is a terminal's CSI (ESC [) in one character
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi controls: reorder a line as shown
    "\u2028\u2029"  # line and paragraph separators: a new line to some terminals and readers
    "\ud800-\udfff"  # lone surrogates: neither UTF-8 nor XML
    "\ufffe\uffff"  # noncharacters XML 1.0 forbids
    "]"
)
"""The characters no output of kvsched's shows as they are (tab and newline excepted)."""

_LINE_BREAKS = re.compile(f"{_FORBIDDEN.pattern}|[\n\t]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escaped(text: str) -> str:
    """``text`` with every forbidden character shown as its escape (``\\x1b``, ``\\ufffe``),
    tabs and lines kept: what the target wrote, unable to drive a terminal or break XML."""
    return _FORBIDDEN.sub(_visible, text)


def one_line(text: str) -> str:
    """:func:`escaped`, newlines and tabs too: a name or an id, which must not start a line of
    its own in kvsched's output (a line reading ``PASS``)."""
    return _LINE_BREAKS.sub(_visible, text)


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how many more it had."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"... ({len(text) - limit} more characters)"


def plural(count: int, noun: str) -> str:
    """``3 pages``, ``1 page``: a count with its noun."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def id_list(ids: Iterable[str]) -> str:
    """Request ids, space-separated (each a :func:`one_line`: an id may be a log's)."""
    return " ".join(one_line(i) for i in ids)


def page_list(pages: Iterable[int]) -> str:
    """Page ids in brackets, space-separated: ``[0 1]``."""
    return "[" + " ".join(str(p) for p in pages) + "]"


def describe_workload(workload: Workload) -> list[str]:
    """A workload as sentences: the limits, then each request in declared order. A run of
    :data:`FOLDED` or more alike requests, next to each other, is one sentence: a bug that needs a
    hundred finished requests is shown on a hundred, and the reader needs what sets the few
    others apart, not a hundred lines that say the same."""
    limits = workload.limits
    lines = [
        f"{plural(len(workload.requests), 'request')}; at most {limits.batch_limit} active at "
        f"once, pages of {plural(limits.page_size, 'token')}, "
        f"a pool of {plural(limits.pool_pages, 'page')}."
    ]
    sentences = [(r, _request_sentence(r)) for r in workload.requests]
    for sentence, group in itertools.groupby(sentences, key=lambda pair: pair[1]):
        alike = [r for r, _ in group]
        if len(alike) >= FOLDED:
            lines.append(
                f"{one_line(alike[0].id)} to {one_line(alike[-1].id)}, {len(alike)} requests in "
                f"declared order: each {sentence}"
            )
        else:
            lines.extend(f"{one_line(r.id)}: {sentence}" for r in alike)
    return lines


FOLDED = 3
"""Alike requests next to each other that :func:`describe_workload` says in one sentence."""


def _request_sentence(r: Request) -> str:
    shared = (
        f", the first {plural(r.prefix_tokens, 'token')} shared with prefix group "
        f"{one_line(r.prefix_group)}"
        if r.prefix_group and r.prefix_tokens
        else ""
    )
    priority = f", priority {r.priority}" if r.priority else ""
    return (
        f"arrives at time {r.arrival} (may join from iteration {r.arrival + 1}), "
        f"prompt of {plural(r.prompt_tokens, 'token')}{shared}, "
        f"wants {plural(r.output_tokens, 'output token')}{priority}."
    )


def describe_event(event: IterationEvent) -> str:
    """One iteration as the monitor saw it, in one line."""
    parts = [f"iteration {event.iteration}:"]
    for rid in event.preempted:  # before anything else: a preemption frees pages for the rest
        released = [p for op in event.schedule if op.kind == "free" and op.request == rid
                    for p in op.pages]  # fmt: skip
        parts.append(
            f"{one_line(rid)} preempted, frees page ids {page_list(released)}, back to the queue;"
        )
    if event.admitted:
        parts.append(f"{id_list(event.admitted)} join;")
    parts.append(f"active {id_list(event.active) or 'nobody'};")
    parts.append(f"tokens for {id_list(event.decoded) or 'nobody'};")
    if event.page_tables:
        tables = ", ".join(
            f"{one_line(rid)} {page_list(p)}" for rid, p in event.page_tables.items()
        )
        parts.append(f"page ids {tables};")
    if event.slots is not None:  # a target with state slots (semantics.md 4.2)
        parts.append(f"state slots {_holders(event.slots)};")
    for rid in event.finished:
        freed = page_list(event.freed.get(rid, ()))
        parts.append(f"{one_line(rid)} finishes, frees page ids {freed};")
    if event.slots_after is not None and event.slots_after != event.slots:
        parts.append(f"then state slots {_holders(event.slots_after)};")
    free = f"{plural(event.free_pages, 'page')} free"
    if event.free_slots is not None:
        free += f", {plural(event.free_slots, 'state slot')} free"
    parts.append(f"{free}; waiting {id_list(event.waiting)}" if event.waiting else free)
    return " ".join(parts)


def _holders(slots: Mapping[str, int]) -> str:
    """Who holds which state slot, in words."""
    return ", ".join(f"{one_line(rid)} {slot}" for rid, slot in slots.items()) or "none held"
