"""The closed vocabularies of kvsched, each defined once.

Loaders, argparse choices, the pytest plugin and the verdicts all take their words from here, so
a word cannot be spelt two ways, and a new one is added in one place. Each vocabulary is a
``Literal`` type (for mypy) with the tuple of its values (for run-time checks and ``choices``).
The declarations a target may make are not here: they are the fields of
:class:`~kvsched.spec.properties.TargetProperties`, and ``DECLARATIONS`` is derived there.
"""

from __future__ import annotations

import sys
from enum import IntEnum
from typing import TYPE_CHECKING, Literal, NoReturn, TypeGuard, get_args

if TYPE_CHECKING or sys.version_info >= (3, 11):
    from typing import assert_never as assert_never
else:  # Python 3.10: what typing gives from 3.11, for an exhaustive match over a vocabulary

    def assert_never(value: NoReturn) -> NoReturn:
        raise AssertionError(f"unhandled value: {value!r}")


Policy = Literal["static", "continuous"]
"""The lesson's two batching policies (spec/semantics.md, section 5)."""
POLICY_NAMES: tuple[Policy, ...] = get_args(Policy)

Expected = Literal["learner", "scheduler", "log"]
"""What a grader says a submission must be (``kvsched check --expect``)."""
EXPECTATIONS: tuple[Expected, ...] = get_args(Expected)

Profile = Literal["ci", "dev", "thorough"]
"""How hard the Hypothesis search tries: fast and derandomized in CI, deeper by hand."""
PROFILE_NAMES: tuple[Profile, ...] = get_args(Profile)
DEFAULT_PROFILE: Profile = "ci"

Engine = Literal["vllm", "nanovllm", "sglang"]
"""Engines ``kvsched record`` can drive (checks/record/): each writes a version-2 event log.
``nanovllm`` is driven from a checkout the user names (``--src``)."""
ENGINE_NAMES: tuple[Engine, ...] = get_args(Engine)

PercentileMethod = Literal[
    "linear",
    "lower",
    "higher",
    "nearest",
    "midpoint",
    "inverted_cdf",
    "averaged_inverted_cdf",
    "closest_observation",
    "interpolated_inverted_cdf",
    "hazen",
    "weibull",
    "median_unbiased",
    "normal_unbiased",
]
"""How a percentile of waits is taken: ``numpy.percentile``'s method names (section 7.4).

Percentiles of few values differ by convention: P95 of 9 waits is ``0.4 x second-largest +
0.6 x largest`` under ``linear`` (Hyndman and Fan's type 7, numpy's default, what vLLM's and
SGLang's serving benchmarks report), the second-largest under ``lower`` (``sorted[floor((n - 1)
x 0.95)]``, a common hand-written percentile), the largest under ``higher``. A workload file may
declare the convention its figures use (``percentile_method``); ``linear`` is the default."""
PERCENTILE_METHODS: tuple[PercentileMethod, ...] = get_args(PercentileMethod)
DEFAULT_PERCENTILE_METHOD: PercentileMethod = "linear"

Status = Literal["holds", "violated", "not applicable", "not checked"]
"""What a verdict says of one invariant. "not checked": applicable, but the check stopped at an
earlier violation before it was exercised."""
STATUSES: tuple[Status, ...] = get_args(Status)

Layer = Literal["safety", "liveness", "conformance", "efficiency"]
"""The layers of the invariant catalogue (spec/semantics.md, section 8), in the order verdicts and
reports show them: safety holds for every engine, liveness is progress, conformance applies where
declared, efficiency is measured and never violated."""
LAYERS: tuple[Layer, ...] = get_args(Layer)

AdmissionOrder = Literal["fcfs", "priority", "shortest-first", "none"]
"""Which waiting request a target admits next (BATCH-4): by arrival with preempted requests at
the head; by ``Request.priority`` then arrival; by shortest prompt then arrival; or no promise."""

Requeue = Literal["head", "tail"]
"""Where a preempted request rejoins the waiting queue under fcfs (BATCH-4): at its head, the
latest preempted first (vLLM's and nano-vllm's ``appendleft``), or at its tail, behind every
request waiting then (SGLang's retraction, ``_add_request_to_queue``)."""

Chunking = Literal["all", "first", "none"]
"""Which prompts may be computed over several iterations (BATCH-5): any (vLLM), only the first
request of a batch (nano-vllm), or none (every prompt is computed whole)."""

BudgetMode = Literal["sum", "padded"]
"""How the token budget counts a batch: the sum of the tokens computed (vLLM), or padded, batch
size times the longest request's tokens (vidur's vLLM-style scheduler)."""

Batching = Literal["mixed", "prefill-first"]
"""How the engine scheduler composes an iteration (section 10.1): running requests then
admissions in one batch (vLLM v1), or prefills first and decodes only without them (nano-vllm)."""

Victim = Literal["last", "priority"]
"""Whom recompute preemption evicts (section 10.4): the last admitted, or the lowest priority."""

Restart = Literal["recompute", "fold"]
"""What a preempted request comes back as (spec/eventlog.md 4.3.1). ``recompute`` (vLLM, nano-vllm):
it keeps its prompt and its output so far and computes both again. ``fold`` (vidur's
``Request.restart()``): the tokens it had processed become its prompt, so a prefill cut short
comes back as a shorter prompt and produces the rest of the old prompt as output tokens."""

RESTARTS: tuple[Restart, ...] = get_args(Restart)

Rejection = Literal["at-head", "at-arrival"]
"""When a target finishes a request no scheduler can serve, one whose peak pages exceed the pool
(spec/semantics.md 1.2, LIVE-5): ``at-head``, within the iteration after the one that leaves it
at the head of the queue (a fix proposed to vLLM fails it as it comes to schedule it), or
``at-arrival``, in the iteration it arrives (rejected when it is added, never queued behind)."""

PageAdmission = Literal["lazy", "peak"]
"""``peak``: the lesson's commitment of peak pages at admission (3.2); ``lazy``: pages taken as
tokens are computed, preempting when they run out."""

Reservation = Literal["orca-max", "orca-pow2", "orca-oracle", "vllm"]
"""How KV memory is set aside for a request (docs/figure2.md): one contiguous chunk for its
prompt and output up to the model's maximum length, for its output rounded up to a power of two,
or for its true output (the vLLM paper's three Orca baselines); or pages as its tokens come
(vLLM)."""
RESERVATIONS: tuple[Reservation, ...] = get_args(Reservation)

MemoryUse = Literal["token states", "reservation", "internal fragmentation", "external & other"]
"""What a slot of KV memory holds at one iteration, the vLLM paper's Figure 2 categories
(docs/figure2.md defines each): every slot of the pool is in exactly one."""
MEMORY_USES: tuple[MemoryUse, ...] = get_args(MemoryUse)


class RequestStatus(IntEnum):
    """Where a request is: the one status every part of kvsched keeps on a request's record, as
    vLLM v1 keeps one on its request. Not arrived yet (it has not reached the scheduler),
    waiting in the queue (also after a preemption), running in the batch, or finished. The
    values are those of the proofs' symbolic states (checks/proofs/engine/system.py)."""

    NOT_ARRIVED = 0
    WAITING = 1
    RUNNING = 2
    FINISHED = 3

    def __str__(self) -> str:
        """The status in a finding's words: ``waiting``, ``not arrived``."""
        return self.name.lower().replace("_", " ")


NOT_ARRIVED = RequestStatus.NOT_ARRIVED
WAITING = RequestStatus.WAITING
RUNNING = RequestStatus.RUNNING
FINISHED = RequestStatus.FINISHED

Step = Literal["bound", "preemption", "admission", "decode", "pages", "slots", "completion"]
"""Where in an iteration a check of the catalogue runs, in the order of spec/semantics.md,
section 3 (and spec/eventlog.md for what real engines add):

- ``bound``: the iteration bound (3.6), before anything else of the iteration;
- ``preemption``: requests leaving the batch for the queue, with their pages (eventlog.md 4.3);
- ``admission``: who joins the batch, in which order, within which limits (3.1, 3.2);
- ``decode``: the batch and the tokens it produces and computes (3.4);
- ``pages``: the page tables after growth (3.3);
- ``slots``: what the batch leaves unused, judged on its tables: the token budget, idle slots
  (3.2; eventlog.md 4.6);
- ``completion``: finishing and freeing (3.5).

End-of-run checks (a request never finished, a target that stopped answering) come after the
last iteration and have no step.
"""

STEPS: tuple[Step, ...] = get_args(Step)


class ExitCode(IntEnum):
    """The exit codes of every ``kvsched`` command.

    A finding (1) is a verdict on the target; an invalid input (2) is the user's to fix; an
    internal error (3) is always a bug of kvsched. Exit 4 is neither a pass nor a finding: the
    evidence is too thin to say. ``check`` exits 4 (INCONCLUSIVE) when it observed less than its
    profile's minimum (a budget or a stall stopped the search early, a required part of the
    target is missing, nothing was judged); ``prove`` when nothing was refuted but something was
    not proved (its resource budget exhausted, or Z3's unknown). Exit 5 says the verdict was not
    delivered whole (standard output or a file could not be written: a closed pipe, a full
    disk, ``ulimit -f``), whatever it was, so a cut output never reads as a pass. 130 and 143
    are the shell's codes for a command stopped by SIGINT (Ctrl-C) or SIGTERM: no verdict, and
    the target's process is ended with it.
    """

    OK = 0
    FINDING = 1
    USAGE = 2
    INTERNAL = 3
    INCONCLUSIVE = 4
    """Too little evidence for a pass, and no finding: never read as a pass."""
    NOT_PROVED = 4  # ``prove``'s name for the same code
    WRITE_FAILED = 5
    """Standard output or an output file could not be written; what was written is no verdict."""
    INTERRUPTED = 130
    """Stopped by SIGINT (Ctrl-C): 128 + 2, as a shell reports it."""
    TERMINATED = 143
    """Stopped by SIGTERM: 128 + 15."""


def is_policy(name: str) -> TypeGuard[Policy]:
    """Whether ``name`` is one of the lesson's policies."""
    return name in POLICY_NAMES


def is_percentile_method(name: object) -> TypeGuard[PercentileMethod]:
    """Whether ``name`` is one of numpy's percentile methods."""
    return name in PERCENTILE_METHODS


def is_profile(name: str) -> TypeGuard[Profile]:
    """Whether ``name`` is one of the Hypothesis profiles."""
    return name in PROFILE_NAMES


GateOutcome = Literal["passed", "failed", "incomplete", "not gated"]
"""What a report's banner says of its gate: no threshold breached; a threshold breached; no
breach but some figure missing (a benchmark that failed, a run that did not complete), which is
never a pass; or no ``--fail-on`` given, so nothing was gated."""
GATE_OUTCOMES: tuple[GateOutcome, ...] = get_args(GateOutcome)
