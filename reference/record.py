"""One record per request: where it is and what it has, the one home of its counts.

As nano-vllm keeps a sequence's state on the sequence and vLLM v1 on the request, a run's
per-request state lives on one :class:`RequestRecord`: its status, its reservation, its page
table, its output so far, the KV its pages hold, the most KV it ever held, the prompt tokens a
fold restart moved to its output, and where LIVE-3 last saw it preempted. :class:`Records` holds
a run's records and moves them by the spec's rules, the same for whoever follows the run: the
monitor's request and page ledgers (which judge each event before it is counted), the
efficiency meter, the event-log checker's fast path, and the engine loop, whose restarts and
bound read its own. Each reads the same record, so no count has a second copy to keep in step.

Two run-wide counts are made of the records, by one rule (spec/semantics.md, section 8): the
progress LIVE-3 measures, every output token produced plus every token of KV beyond the most a
request ever held, and the recomputed tokens EFF-4 measures, KV computed again below that most.
A request preempted a second time while the progress, counted to the end of the iteration of
that second preemption, still stands where it stood at its first is thrash: the engine is
cycling through states it has been in. The end of the iteration, not the moment of preemption,
because a preemption comes first in its iteration and may be what lets the rest of the batch
progress in it (a priority victim re-admitted while a decode waited): that engine is not cycling.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TypeVar

from kvsched.spec.properties import TargetProperties
from kvsched.spec.vocabulary import FINISHED, NOT_ARRIVED, RUNNING, WAITING, RequestStatus
from kvsched.spec.workload import Request

_K = TypeVar("_K")
_V = TypeVar("_V")


def as_dict(mapping: Mapping[_K, _V]) -> dict[_K, _V]:
    """``mapping`` as a dict: itself if it is one, as the event-log reader's and the lowering's
    are, else a copy. Compiled code reads a dict through the C API and any other mapping by
    method calls, so the hot loops over an event's mappings read them through this."""
    return mapping if isinstance(mapping, dict) else dict(mapping)


class RequestRecord:
    """One request's state, as the run has it so far."""

    __slots__ = (
        "admitted_with",
        "generated",
        "kv",
        "most",
        "moved",
        "output_tokens",
        "prompt_tokens",
        "request",
        "reservation",
        "stamp",
        "status",
        "table",
    )

    def __init__(self, request: Request, reservation: int) -> None:
        self.request = request
        # The request's sizes, read on every iteration it decodes in: a request is frozen, and
        # compiled, a field of this record is read inline, one of the (interpreted) request by
        # an attribute lookup.
        self.prompt_tokens = request.prompt_tokens
        self.output_tokens = request.output_tokens
        self.status: RequestStatus = NOT_ARRIVED
        """Moved only by :class:`Records`' transitions; a finished request leaves
        :attr:`Records.live`."""
        self.reservation = reservation
        """The most pages it may hold at once: what peak admission commits for it (3.2,
        :meth:`TargetProperties.reservation`)."""
        self.table: tuple[int, ...] = ()
        """Its page table, as judged so far: the pages it holds, in order. Moved by the page
        ledger's transitions (checks/monitor/pages.py) and, for a line taken in without an
        event, the event-log checker's fast path."""
        self.generated = 0
        """Output tokens produced since it arrived."""
        self.kv = 0
        """Tokens whose KV its pages hold: computed or taken from the cache since it was last
        admitted."""
        self.most = 0
        """The most KV it ever held (LIVE-3's progress, EFF-4's recompute)."""
        self.moved = 0
        """Prompt tokens a fold restart turned into output tokens (spec/eventlog.md 4.3.1): its
        tokens are its prompt minus these plus its output, which owes these more."""
        self.admitted_with = 0
        """Its output tokens when it was last admitted."""
        self.stamp: int | None = None
        """The progress count where its latest preemption stood (LIVE-3); ``None`` before one."""

    def known(self) -> int:
        """Its prompt plus its output so far: the tokens its KV may cover."""
        return self.prompt_tokens - self.moved + self.generated

    def output_length(self) -> int:
        """The output tokens it produces in all, fold restarts included."""
        return self.output_tokens + self.moved


class Records:
    """The live requests' records, the progress count and the recomputed tokens of a run.

    A record moves only by the transitions here, named as the spec names what happens to a
    request: :meth:`declare`, :meth:`arrive`, :meth:`admit`, :meth:`count` (what it computed,
    took from the cache and produced), :meth:`preempt` and :meth:`finish` (also from the
    queue: an abort)."""

    def __init__(self, properties: TargetProperties | None, page_size: int) -> None:
        self.properties = properties or TargetProperties()
        self.page_size = page_size
        self.live: dict[str, RequestRecord] = {}
        """Every request declared and not finished, in declaration order."""
        self.left: dict[str, RequestRecord] = {}
        """The requests finished in the latest iteration: a reader of its whole event (the
        meter) still finds them until the next begins."""
        self.progress = 0
        self.before = 0
        """The progress count as the latest iteration began (:meth:`begin`): where a
        preemption in it stood."""
        self.recomputed = 0
        """EFF-4: KV tokens computed again below the most their request had held."""

    def declare(self, request: Request) -> RequestRecord:
        """``request`` is known, not arrived yet."""
        reservation = self.properties.reservation(request, self.page_size)
        record = self.live[request.id] = RequestRecord(request, reservation)
        return record

    def arrive(self, request_id: str) -> bool:
        """``request_id`` reaches the scheduler and waits (3.1); whether it had not arrived."""
        record = self.live.get(request_id)
        if record is None or record.status is not NOT_ARRIVED:
            return False
        record.status = WAITING
        return True

    def begin(self) -> None:
        """A new iteration: the requests the last one finished are forgotten, and the progress
        count stands where a preemption in it is stamped (:meth:`preempted_again`)."""
        if self.left:
            self.left.clear()
        self.before = self.progress

    def get(self, request_id: str) -> RequestRecord | None:
        """The record of a request live or finished in the latest iteration."""
        record = self.live.get(request_id)
        return self.left.get(request_id) if record is None else record

    def preempt(self, request_id: str) -> tuple[int, int]:
        """``request_id`` loses its KV: the KV tokens it loses and the prompt tokens its declared
        restart moves to its output (:meth:`TargetProperties.moved_on_restart`)."""
        record = self.live.get(request_id)
        if record is None:
            return 0, 0
        lost = record.kv
        decoding = record.generated > record.admitted_with
        moved = self.properties.moved_on_restart(record.known(), lost, decoding)
        record.moved += moved
        record.kv = 0
        record.status = WAITING
        return lost, moved

    def admit(self, request_id: str) -> None:
        """``request_id`` joins the batch."""
        record = self.live.get(request_id)
        if record is not None:
            record.admitted_with = record.generated
            record.status = RUNNING

    def count(
        self, computed: Mapping[str, int], cached: Mapping[str, int], decoded: Iterable[str]
    ) -> None:
        """One iteration's tokens: the KV each request computed or took from the cache, and
        the output tokens produced (a request listed once per token). Progress and recompute
        are counted from the records as they stood before it."""
        live = self.live
        progress = self.progress
        for rid in decoded:
            record = live.get(rid)
            if record is not None:  # the monitor says what is wrong with a stranger's token
                record.generated += 1
                progress += 1
        hits = as_dict(cached)
        for rid, amount in hits.items():
            record = live.get(rid)
            if record is not None:
                record.kv += amount
        amounts = as_dict(computed)
        recomputed = 0
        for rid, amount in amounts.items():
            record = live.get(rid)
            if record is None:
                continue
            before = record.kv  # with this iteration's cache hit
            record.kv = now = before + amount
            again = record.most - before  # EFF-4: below the most it ever held
            if again > 0:
                recomputed += amount if amount < again else again
            if now > record.most:
                progress += now - record.most
                record.most = now
        for rid in hits:
            record = live.get(rid)
            if record is not None and record.kv > record.most:
                progress += record.kv - record.most
                record.most = record.kv
        self.recomputed += recomputed
        self.progress = progress

    def steady_steps(self, request_id: str, steps: int) -> None:
        """``steps`` iterations in each of which ``request_id`` computed one token beyond the
        most it held and produced it, counted in at once: the progress of those steps was
        counted as they were taken in (:meth:`steady_progress`)."""
        record = self.live[request_id]
        record.kv += steps
        record.generated += steps
        record.most = record.kv

    def steady_progress(self, decoders: int) -> None:
        """An iteration in which ``decoders`` requests each computed one token beyond the most
        it held and produced it, their records counted in later (:meth:`steady_steps`)."""
        self.progress += 2 * decoders

    def is_steady(self, request_id: str) -> bool:
        """Whether one more decode step of ``request_id`` is one token beyond the most it held:
        progress of two, and nothing recomputed."""
        record = self.live[request_id]
        return record.most == record.kv

    def preempted_again(self, request_id: str) -> bool:
        """Note ``request_id``'s preemption in the iteration just counted; whether it repeats
        one with no progress since, this iteration included (LIVE-3)."""
        record = self.live.get(request_id)
        if record is None:
            return False
        before, record.stamp = record.stamp, self.before
        return before == self.progress

    def finish(self, request_id: str) -> None:
        """``request_id`` finished: it leaves the live records (memory follows the live
        requests), kept in :attr:`left` until the next iteration begins."""
        record = self.live.pop(request_id, None)
        if record is not None:
            record.status = FINISHED
            self.left[request_id] = record


def lesson_computed(
    live: Mapping[str, RequestRecord],
    active: Collection[str],
    admitted: Iterable[str],
    decoded: Sequence[str],
) -> dict[str, int]:
    """The tokens each request of the batch ``active`` computed in an iteration of the lesson
    model, whose events name no computation (3.3, 3.4): one per token it produced, and its
    prompt too in the iteration that admitted it."""
    if len(decoded) == len(active) and set(decoded) == set(active):
        counts = dict.fromkeys(active, 1)  # the lesson's usual step: each decodes once, in C
    else:
        tokens = Counter(decoded)
        counts = {rid: tokens[rid] for rid in active}
    for rid in admitted:
        record = live.get(rid)
        if rid in counts and record is not None:
            counts[rid] += record.request.prompt_tokens
    return counts
