"""What a check's line predicate reads (:class:`~.registry.Steady`): a line the event-log
checker's fast path would take in without its event.

A class of its own, compiled with the fast path (setup.py), as :mod:`.steady_request` is: one is
made for every line the fast path reads, and a tuple type made in Python (``NamedTuple``) is
built by an interpreted ``__new__`` and read by name through a descriptor, several times the
cost of a compiled class's.
"""

from __future__ import annotations


class SteadyLine:
    """A line the fast path would take in without its event, as the checks' predicates read it:
    its schedule only preempts requests of the batch, admits waiting requests and allocates
    fresh pages, its step decodes and computes prompts or chunks of them, its update finishes
    requests and frees their tables."""

    __slots__ = (
        "admitted",
        "batch",
        "chunks",
        "computed",
        "free_pages",
        "head",
        "held",
        "iteration",
        "preempted",
        "produced",
        "queue",
        "queued",
        "reported",
        "reserve",
        "scheduled",
        "spent",
        "waiting",
    )

    def __init__(
        self,
        iteration: int,
        admitted: tuple[str, ...],
        batch: int,
        reserve: int,
        queued: bool,
        free_pages: int,
        held: int,
        reported: int,
        waiting: int,
        computed: int,
        spent: int,
        chunks: int,
        scheduled: int,
        head: str | None,
        queue: tuple[str, ...],
        preempted: tuple[str, ...],
        produced: int,
    ) -> None:
        self.iteration = iteration
        self.admitted = admitted
        """The requests it admits, in order."""
        self.batch = batch
        """Requests in the batch after its admissions."""
        self.reserve = reserve
        """Pages its admissions commit (their reservations)."""
        self.queued = queued
        """Whether a request still waits after its admissions."""
        self.free_pages = free_pages
        """The free count it reports."""
        self.held = held
        """Pages held at its end, by the fast path's count."""
        self.reported = reported
        """Requests in the queue it reports (0: none reported)."""
        self.waiting = waiting
        """Requests waiting after it, by the ledger: arrived, neither in the batch nor
        finished."""
        self.computed = computed
        """Tokens it computes: one per decode, and each prompt or chunk computed."""
        self.spent = spent
        """Requests that compute in it."""
        self.chunks = chunks
        """Requests that compute in it without reaching a token: chunks short of their end."""
        self.scheduled = scheduled
        """Pages held once its schedule is done, before its finished requests give theirs
        back."""
        self.head = head
        """The request the queue serves next after its admissions (fcfs and none: the steady
        lines' orders), ``None`` if none waits."""
        self.queue = queue
        """The queue it reports, head first (empty: none reported)."""
        self.preempted = preempted
        """The requests of the batch it preempts, in order, each giving back its whole table
        before anything else of its schedule (steady_ops.py)."""
        self.produced = produced
        """Output tokens it produces: one per decode, and one per prompt computed to its end."""
