"""The zoo's catalogue: every mutant, the bug it plants, and the invariant that must catch it.

``kvsched mutants`` runs :data:`ZOO` through the same code path as ``kvsched check`` and prints
the mutation score: mutants caught *with the right invariant id* over all mutants. Scheduler
mutants live in ``mutants.py``, learner mutants are the ``buggy_*.py`` examples a learner reads,
and the one engine bug a scheduler cannot commit (admitting a request before it arrives: the
engine decides when requests arrive) is an event log recorded from a simulator whose clock is
off by one, written by :func:`early_arrival_log`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from kvsched.checks.eventlog.jsonl import write_log
from kvsched.reference import ContinuousScheduler, run
from kvsched.spec.workload import Limits, Request, Workload

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MUTANTS = HERE / "mutants.py"
EXAMPLES = REPO / "examples" / "learner"


@dataclass(frozen=True)
class Mutant:
    name: str
    bug: str
    """The planted bug, in words."""
    expected: str
    """The invariant id ``kvsched check`` must report, and no other."""
    target: str = ""
    """TARGET as ``kvsched check`` takes it; empty when :attr:`make_log` writes it."""
    policy: str = ""
    """``--policy``: for a learner's file, the policy its bug shows under."""
    timeout: float = 10.0
    make_log: Callable[[Path], Path] | None = None
    """Writes an event log into the given directory and returns its path."""

    def materialise(self, workdir: Path) -> str:
        """The TARGET string to check, writing the mutant's log first if it has one."""
        if self.make_log is not None:
            return str(self.make_log(workdir))
        return self.target


def early_arrival_log(workdir: Path) -> Path:
    """A log from a simulator that delivers each request in the iteration of its arrival time
    instead of the next one (``arrival <= n`` for ``arrival < n``), so b, arriving at time 2,
    is admitted in iteration 2."""
    workload = Workload(
        name="early-arrival",
        limits=Limits(batch_limit=2, page_size=4, pool_pages=8),
        requests=(Request("a", 0, 3, 4), Request("b", 2, 5, 2)),
    )
    # The off-by-one clock: the simulator sees every arrival one time unit early.
    seen = replace(
        workload,
        requests=tuple(replace(r, arrival=max(r.arrival - 1, 0)) for r in workload.requests),
    )
    recorded = run(seen, ContinuousScheduler, policy="continuous")
    path = workdir / "early-arrival.jsonl"
    write_log(replace(recorded, workload=workload), path)
    return path


def _class(name: str) -> str:
    return f"{MUTANTS}:{name}"


ZOO: tuple[Mutant, ...] = (
    Mutant("off-by-one rounding", "pages = tokens // page_size + 1", "PAGE-1",
           _class("OffByOneRounding")),
    Mutant("page in two tables", "a newcomer's first page is another request's", "PAGE-2",
           _class("PageInTwoTables")),
    Mutant("leak on finish", "freed pages never return to the pool", "PAGE-3",
           _class("LeakOnFinish")),
    Mutant("reuse before free", "pages freed while the last token is written, and reused",
           "PAGE-2", _class("ReuseBeforeFree")),
    Mutant("two tokens", "a request decodes twice in one iteration", "DEC-1",
           _class("TwoTokensInOneIteration")),
    Mutant("token for a waiting request", "the queue's head decodes before admission", "DEC-2",
           _class("TokenForWaitingRequest")),
    Mutant("admission before arrival", "the engine's clock delivers arrivals a step early",
           "REQ-1", make_log=early_arrival_log),
    Mutant("dropped request", "a request is freed and forgotten without finishing", "REQ-2",
           _class("DropsARequest")),
    Mutant("finished twice", "finished requests are reported finished again", "REQ-2",
           _class("FinishesTwice")),
    Mutant("static admits mid-batch", "static batching refills a slot before the drain",
           "BATCH-2", _class("StaticAdmitsMidBatch")),
    Mutant("continuous idles", "a freed slot is refilled one iteration late", "BATCH-3",
           _class("ContinuousIdlesAfterFinish")),
    Mutant("starvation", "a request needing the whole pool never fits (< for <=)", "LIVE-2",
           _class("StarvesAFullPoolRequest")),
    Mutant("pool overcommit", "admission ignores pages; the allocator overflows", "PAGE-5",
           _class("OvercommitsThePool")),
    Mutant("batch overflow", "admission counts pages but not slots", "BATCH-1",
           _class("IgnoresBatchLimit")),
    Mutant("raises", "schedule() raises mid-run", "PROTO-1", _class("RaisesMidRun")),
    Mutant("garbage answer", "update_from_output() returns a dict", "PROTO-1",
           _class("AnswersGarbage")),
    Mutant("hangs", "schedule() loops forever", "PROTO-1", _class("HangsInSchedule"),
           timeout=0.5),
    Mutant("learner: rounding", "allocate_kv_pages off by one on full pages", "PAGE-1",
           str(EXAMPLES / "buggy_rounding.py")),
    Mutant("learner: leak", "schedule_iteration never returns pages", "PAGE-3",
           str(EXAMPLES / "buggy_leak.py")),
    Mutant("learner: static", "static admits into any free slot", "BATCH-2",
           str(EXAMPLES / "buggy_static.py"), policy="static"),
)  # fmt: skip
