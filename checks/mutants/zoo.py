"""The zoo's catalogue: every mutant, the bug it plants, and the invariant that must catch it.

``kvsched mutants`` runs :data:`ZOO` through the same code path as ``kvsched check`` and prints
the mutation score: mutants caught *with the right invariant id* over all mutants. Scheduler
mutants live in :mod:`.paging`, :mod:`.batching`, :mod:`.hostile`, :mod:`.sized` (bugs only
a crowd shows) and :mod:`.corners` (engine bugs only the search's corners show); learner
mutants are the ``buggy_*.py`` solutions of ``learner/`` (shipped as
package data and written to a working directory, so that they are checked as the files a learner
would pass); and the engine bugs a scheduler cannot commit (admitting a request before it
arrives, a token from half a prompt) are event logs of broken engines, written by :mod:`.logs`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from kvsched.checks.mutants.corners import CURSOR, VictimBehindTheCursor
from kvsched.checks.mutants.engine import (
    FULL_HIT,
    LONG_ALONE,
    ONE,
    REUSED,
    SHARED,
    TWO_PROMPTS,
    ChunksDespiteDeclaringNone,
    ForgetsRunningRequests,
    FreesSharedPage,
    HitsEvictedPage,
    PreemptedKeepsPage,
    PreemptsOnLowPool,
    TokenFromNothing,
    WritesPastTable,
    engine_log,
)
from kvsched.checks.mutants.logs import early_arrival_log, partial_prefill_log


@dataclass(frozen=True)
class Mutant:
    name: str
    bug: str
    """The planted bug, in words."""
    expected: str
    """The invariant id ``kvsched check`` must report, and no other."""
    target: str = ""
    """TARGET as ``kvsched check`` takes it; empty when :attr:`write` writes it."""
    policy: str = ""
    """``--policy``: for a learner's file, the policy its bug shows under."""
    timeout: float = 10.0
    write: Callable[[Path], Path] | None = None
    """Writes the target (a file or an event log) into the given directory; returns its path."""

    def materialise(self, workdir: Path) -> str:
        """The TARGET string to check, writing the mutant's file first if it has one."""
        if self.write is not None:
            return str(self.write(workdir))
        return self.target


def learner_file(name: str) -> Callable[[Path], Path]:
    """A writer of the learner's solution ``learner/<name>`` into a working directory."""

    def write(workdir: Path) -> Path:
        path = workdir / name
        path.write_text((files(__package__) / "learner" / name).read_text())
        return path

    return write


def _class(module: str, name: str) -> str:
    return f"{__package__}.{module}:{name}"


ZOO: tuple[Mutant, ...] = (
    Mutant("off-by-one rounding", "pages = tokens // page_size + 1", "PAGE-1",
           _class("paging", "OffByOneRounding")),
    Mutant("page in two tables", "a newcomer's first page is another request's", "PAGE-2",
           _class("paging", "PageInTwoTables")),
    Mutant("leak on finish", "freed pages never return to the pool", "PAGE-3",
           _class("paging", "LeakOnFinish")),
    Mutant("keeps pages on finish", "a finished request never frees its pages", "PAGE-4",
           _class("paging", "KeepsPagesOnFinish")),
    Mutant("reuse before free", "pages freed while the last token is written, and reused",
           "PAGE-2", _class("paging", "ReuseBeforeFree")),
    Mutant("token from a partial prefill", "a chunk short of the prompt's end yields a token",
           "DEC-3", write=partial_prefill_log),
    Mutant("two tokens", "a request decodes twice in one iteration", "DEC-1",
           _class("batching", "TwoTokensInOneIteration")),
    Mutant("token for a waiting request", "the queue's head decodes before admission", "DEC-2",
           _class("batching", "TokenForWaitingRequest")),
    Mutant("admission before arrival", "the engine's clock delivers arrivals a step early",
           "REQ-1", write=early_arrival_log),
    Mutant("dropped request", "a request is freed and forgotten without finishing", "REQ-2",
           _class("batching", "DropsARequest")),
    Mutant("finished twice", "finished requests are reported finished again", "REQ-2",
           _class("batching", "FinishesTwice")),
    Mutant("static admits mid-batch", "static batching refills a slot before the drain",
           "BATCH-2", _class("batching", "StaticAdmitsMidBatch")),
    Mutant("continuous idles", "a freed slot is refilled one iteration late", "BATCH-3",
           _class("batching", "ContinuousIdlesAfterFinish")),
    Mutant("head skipped", "first fit: a request overtakes a head that does not fit", "BATCH-4",
           _class("batching", "SkipsABlockedHead")),
    Mutant("starvation", "a request needing the whole pool never fits (< for <=)", "LIVE-2",
           _class("batching", "StarvesAFullPoolRequest")),
    Mutant("engine: forgets running requests", "running requests are never scheduled again",
           "LIVE-1", write=engine_log(ForgetsRunningRequests, ONE)),
    Mutant("engine: shared page freed", "a shared page freed while another request holds it",
           "PAGE-3", write=engine_log(FreesSharedPage, SHARED)),
    Mutant("engine: hit on an evicted page", "a reused page keeps its old prefix hash",
           "PAGE-6", write=engine_log(HitsEvictedPage, REUSED)),
    Mutant("engine: preempted keeps a page", "preemption keeps the last page", "PAGE-4",
           write=engine_log(PreemptedKeepsPage, SHARED)),
    Mutant("engine: token from nothing", "a full prefix hit computes nothing yet samples",
           "DEC-3", write=engine_log(TokenFromNothing, FULL_HIT)),
    Mutant("engine: KV past the table", "chunk pages counted with a floor", "PAGE-1",
           write=engine_log(WritesPastTable, SHARED)),
    Mutant("engine: thrash", "a watermark applied to running requests preempts in a loop",
           "LIVE-3", write=engine_log(PreemptsOnLowPool, LONG_ALONE)),
    Mutant("engine: chunks despite none", "declares whole prompts, chunks over the budget",
           "BATCH-5", write=engine_log(ChunksDespiteDeclaringNone, TWO_PROMPTS)),
    Mutant("engine: victim behind the cursor", "a priority victim removed behind the running "
           "loop's cursor skips the request after it", "BATCH-6",
           write=engine_log(VictimBehindTheCursor, CURSOR)),
    Mutant("pool overcommit", "admission ignores pages; the allocator overflows", "PAGE-5",
           _class("paging", "OvercommitsThePool")),
    Mutant("batch overflow", "admission counts pages but not slots", "BATCH-1",
           _class("batching", "IgnoresBatchLimit")),
    Mutant("raises", "schedule() raises mid-run", "PROTO-1", _class("hostile", "RaisesMidRun")),
    Mutant("garbage answer", "update_from_output() returns a dict", "PROTO-1",
           _class("hostile", "AnswersGarbage")),
    Mutant("hangs", "schedule() loops forever", "PROTO-1", _class("hostile", "HangsInSchedule"),
           timeout=0.5),
    Mutant("learner: rounding", "allocate_kv_pages off by one on full pages", "PAGE-1",
           write=learner_file("buggy_rounding.py")),
    Mutant("learner: leak", "schedule_iteration never returns pages", "PAGE-3",
           write=learner_file("buggy_leak.py")),
    Mutant("learner: static", "static admits into any free slot", "BATCH-2",
           write=learner_file("buggy_static.py"), policy="static"),
    # Size-dependent: nothing the teaching trace or a handful of requests reaches.
    Mutant("leak in a crowd", "pages leak only once 5 or more requests are active", "PAGE-3",
           _class("sized", "LeakInACrowd")),
    Mutant("hang on a long queue", "schedule() loops forever once more than 5 requests wait",
           "PROTO-1", _class("sized", "HangsOnALongQueue"), timeout=1.0),
    Mutant("learner: float ceil", "math.ceil(tokens / page_size), wrong above 2**53", "PAGE-1",
           write=learner_file("buggy_float_ceil.py")),
    # The search's corners (checks/search/corners.py): classes the search must draw a workload for.
    Mutant("priority victim refunded twice", "a priority victim scheduled earlier in the step "
           "gives its tokens back to the budget twice", "BATCH-1",
           _class("corners", "PriorityVictimRefundsTwice")),
    Mutant("full hit on a page multiple", "a prompt of whole pages, all cached, is taken from the "
           "cache whole: a token from nothing computed", "DEC-3",
           _class("engine", "TokenFromNothing")),
    Mutant("revived hit counted free", "a hit on a freed, cached page counted as free and as not "
           "needed: admission at the last free pages overruns the pool", "PROTO-1",
           _class("corners", "RevivedHitsCountedFree")),
)  # fmt: skip
