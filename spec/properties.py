"""What a target declares about itself: its policy and the engine features it uses.

The lesson model (spec/semantics.md) is the default: a request computes its whole prompt plus its
first token in the iteration that admits it, every active request decodes one token per
iteration, admission commits each request's peak pages (3.2), pages are taken lazily and minimally
(PAGE-1), and every page id of the pool is allocatable. Real engines differ, by design, in ways
that are not bugs; a target declares them here so the monitor applies what fits instead of raising
false alarms (spec/eventlog.md, section 4, says what each declaration changes):

- ``admission="lazy"``: pages are taken as tokens are computed, with no peak commitment; a batch
  that runs out of pages preempts (vLLM, nano-vllm). The default ``"peak"`` is section 3.2.
- ``token_budget``: at most this many tokens computed per iteration (vLLM's
  ``max_num_batched_tokens``, Sarathi's ``chunk_size``).
- ``chunked_prefill``: a prompt may be computed over several iterations under the budget;
  ``prefill_chunk``, if smaller, is the most one request computes in one (vLLM's
  ``long_prefill_token_threshold``).
- ``preemption``: a request may release all its pages and return to the waiting queue to
  recompute (preemption by recompute, vLLM's default).
- ``prefix_sharing``: a page may sit in several page tables at once when declared as shared
  (prefix caching with reference counts).
- ``reserve_ahead``: the allocator reserves pages ahead of need, up to the request's peak or
  ``max_model_len`` tokens (Orca-style baselines); PAGE-1's "fewer than a page wasted" is relaxed
  to "the reservation covers the tokens and stays within that bound".
- ``reserved_pages``: page ids the pool never hands out (vLLM keeps block 0 as its null block).
- ``watermark_pages``: pages the target keeps free when it admits (vLLM's watermark).
- ``restart``: what a preempted request comes back as: ``"recompute"`` (the default: its prompt
  and output so far, recomputed) or ``"fold"`` (vidur: what it had processed becomes its prompt).
- ``stops_early``: a request may finish before its output length (an end-of-sequence token, a
  stop string, an abort); its ``output_tokens`` is then its most (vLLM's ``max_tokens``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .vocabulary import (
    BUDGET_MODES,
    CHUNKINGS,
    ORDERS,
    RESTARTS,
    AdmissionOrder,
    BudgetMode,
    Chunking,
    Restart,
)
from .workload import Limits, Request, pages_for

ADMISSION_MODES = ("peak", "lazy")


class PropertiesError(ValueError):
    """A declaration of target properties is malformed; the message names the field."""


@dataclass(frozen=True)
class TargetProperties:
    """A target's declared policy and capabilities; the defaults are the lesson model."""

    policy: str = ""
    """The policy whose invariants apply ("static", "continuous", or another name); "" = not
    declared here (the run's or the caller's policy is used)."""
    admission: str = "peak"
    token_budget: int | None = None
    chunked_prefill: bool = False
    prefill_chunk: int | None = None
    """With ``chunked_prefill``: the most prompt tokens one request computes in one iteration,
    when less than the budget; ``None``: the budget. It only lengthens the LIVE-1 bound."""
    preemption: bool = False
    prefix_sharing: bool = False
    reserve_ahead: bool = False
    max_model_len: int | None = None
    """With ``reserve_ahead``: the most tokens a reservation may span (Orca (Max)'s model maximum).
    Without it a reservation spans at most the request's own prompt plus output."""
    reserved_pages: tuple[int, ...] = ()
    watermark_pages: int = 0
    # Admission as declarations (eventlog.md 4.6): each is checked only where it is declared.
    order: AdmissionOrder | None = None
    """The admission order; ``None``: the policy's (fcfs for static and continuous, else none)."""
    chunking: Chunking | None = None
    """Which prompts may be chunked; ``None``: not declared ("all" with ``chunked_prefill``)."""
    budget: BudgetMode = "sum"
    estimate_admission: bool = False
    """Admission by an estimate of future tokens, or prefill only every few iterations
    (LightLLM): work conservation (BATCH-3) is then not promised and not checked."""
    restart: Restart = "recompute"
    """What a preempted request comes back as (eventlog.md 4.3.1); only with ``preemption``."""
    serves_running: bool = False
    """Every request of the batch is scheduled, in order, before any admission, as far as the
    token budget reaches (vLLM v1's running loop): one that computes nothing while the budget has
    room was skipped (BATCH-6)."""
    stops_early: bool = False
    """A request may finish before its output length (eventlog.md 4.9), which is then its most:
    what real engines do on an end-of-sequence token, a stop string or an abort (from the batch
    or the queue)."""

    def __post_init__(self) -> None:
        if not isinstance(self.policy, str):
            raise PropertiesError(f"field 'policy' must be a string, got {self.policy!r}")
        if self.admission not in ADMISSION_MODES:
            known = ", ".join(ADMISSION_MODES)
            raise PropertiesError(
                f"field 'admission' must be one of {known}, got {self.admission!r}"
            )
        flags = ("chunked_prefill", "preemption", "prefix_sharing", "reserve_ahead")
        for name in (*flags, "estimate_admission", "serves_running", "stops_early"):
            if not isinstance(getattr(self, name), bool):
                raise PropertiesError(
                    f"field '{name}' must be a boolean, got {getattr(self, name)!r}"
                )
        vocabularies: tuple[tuple[str, str | None, tuple[str, ...]], ...] = (
            ("order", self.order, ORDERS),
            ("chunking", self.chunking, CHUNKINGS),
            ("budget", self.budget, BUDGET_MODES),
            ("restart", self.restart, RESTARTS),
        )
        for field_name, value, options in vocabularies:
            if value is not None and value not in options:
                raise PropertiesError(
                    f"field '{field_name}' must be one of {', '.join(options)}, got {value!r}"
                )
        if self.chunking in ("all", "first") and not self.chunked_prefill:
            raise PropertiesError(
                f"field 'chunking' is {self.chunking!r} but 'chunked_prefill' is false: declare "
                "chunked_prefill (with a token_budget) to chunk prompts"
            )
        if self.chunking == "none" and self.chunked_prefill:
            raise PropertiesError(
                "field 'chunking' is 'none' but 'chunked_prefill' is true: declare one"
            )
        if self.restart == "fold" and not self.preemption:
            raise PropertiesError(
                "field 'restart' is 'fold' but 'preemption' is false: restart says what a "
                "preempted request comes back as; declare preemption too"
            )
        if self.budget == "padded" and self.token_budget is None:
            raise PropertiesError("field 'budget' is 'padded' but no 'token_budget' is declared")
        _optional_int(self.token_budget, "token_budget", 1)
        _optional_int(self.max_model_len, "max_model_len", 1)
        _optional_int(self.watermark_pages, "watermark_pages", 0)
        if self.chunked_prefill and self.token_budget is None:
            raise PropertiesError("field 'chunked_prefill' needs a 'token_budget' to chunk under")
        _optional_int(self.prefill_chunk, "prefill_chunk", 1)
        if self.prefill_chunk is not None and not self.chunked_prefill:
            raise PropertiesError("field 'prefill_chunk' caps a chunk: declare 'chunked_prefill'")
        if self.max_model_len is not None and not self.reserve_ahead:
            raise PropertiesError("field 'max_model_len' bounds a reservation: set 'reserve_ahead'")
        if not isinstance(self.reserved_pages, tuple):
            raise PropertiesError(
                f"field 'reserved_pages' must be a tuple of page ids, got {self.reserved_pages!r}"
            )
        for page in self.reserved_pages:
            _optional_int(page, "reserved_pages", 0)
        if len(set(self.reserved_pages)) != len(self.reserved_pages):
            raise PropertiesError(
                f"field 'reserved_pages' repeats a page id: {self.reserved_pages}"
            )

    @property
    def lesson_model(self) -> bool:
        """True when nothing but the policy is declared: the lesson's model applies unchanged."""
        return self == TargetProperties(policy=self.policy)

    @property
    def declared_order(self) -> AdmissionOrder:
        """The admission order BATCH-4 checks: the declared one, else the policy's."""
        if self.order is not None:
            return self.order
        return "fcfs" if self.policy in ("static", "continuous") else "none"

    @property
    def declared_chunking(self) -> Chunking:
        if self.chunking is not None:
            return self.chunking
        return "all" if self.chunked_prefill else "none"

    @property
    def computes_explicitly(self) -> bool:
        """Whether events must say how many tokens each request computed (``computed``).

        With chunked prefill, preemption or prefix sharing, the lesson's rule "the admission
        iteration computes the prompt, each later one a token" no longer tells what was computed.
        """
        return self.chunked_prefill or self.preemption or self.prefix_sharing

    def moved_on_restart(self, tokens: int, kv: int, decoding: bool) -> int:
        """Prompt tokens a preemption turns into output tokens (eventlog.md 4.3.1).

        ``tokens`` is the request's prompt plus its output so far, ``kv`` the KV it loses and
        ``decoding`` whether it produced a token since it was last admitted. Under recompute
        none. Under fold its new prompt is what it had processed: after its prefill, every
        token it has, which moves nothing; within its prefill, its ``kv`` tokens, so the rest
        of the prompt becomes output. A prefill that computed nothing has nothing to fold.
        """
        if self.restart != "fold" or decoding or kv == 0:
            return 0
        return max(tokens - kv, 0)

    def prefill_iterations(self, tokens: int) -> int:
        """Iterations a chunked prefill of ``tokens`` may take beyond the lesson's one (LIVE-1,
        eventlog.md 4.8): a ceiling over the budget, or over the declared chunk if smaller."""
        if not self.chunked_prefill or not self.token_budget:
            return 0
        chunk = min(self.token_budget, self.prefill_chunk or self.token_budget)
        return -(-tokens // chunk)

    def usable_pages(self, limits: Limits) -> int:
        """Pages the pool can hand out: all of them but the reserved ids."""
        return limits.pool_pages - len(self.reserved_pages)

    def unservable(self, requests: Sequence[Request], limits: Limits) -> str:
        """Why no correct target with these declarations can serve ``requests``, or "".

        A request needs its peak pages at once; reserved ids shrink the pool below what the
        workload's own rule (section 1) checked, so a run of such a request never drains, and
        LIVE-1 would blame a correct target for the workload.
        """
        usable = self.usable_pages(limits)
        for request in requests:
            need = pages_for(request.prompt_tokens + request.output_tokens, limits.page_size)
            if need > usable:
                reserved = len(self.reserved_pages)
                return (
                    f"request {request.id!r} needs {need} pages at its peak, but the target "
                    f"reserves {reserved} of the pool's {limits.pool_pages} page ids "
                    f"(reserved_pages), leaving {usable}: no correct scheduler with that "
                    f"declaration can serve it; make limits.pool_pages at least {need + reserved}"
                )
        return ""

    def reservation(self, request: Request, page_size: int) -> int:
        """The most pages ``request`` may hold at once; what peak admission commits for it (3.2).

        The lesson's peak pages, ``ceil((prompt + output) / page_size)``; with ``reserve_ahead``
        and ``max_model_len``, enough for ``max_model_len`` tokens if that is more.
        """
        tokens = request.prompt_tokens + request.output_tokens
        if self.reserve_ahead and self.max_model_len is not None:
            tokens = max(tokens, self.max_model_len)
        return pages_for(tokens, page_size)


_FIELDS = tuple(TargetProperties.__dataclass_fields__)
_OMITTED_AT_DEFAULT = (
    "order",
    "chunking",
    "budget",
    "estimate_admission",
    "serves_running",
    "restart",
    "prefill_chunk",
    "stops_early",
)


def properties_to_json(properties: TargetProperties) -> dict[str, Any]:
    """The JSON object of a declaration; :func:`parse_properties` reads it back unchanged."""
    document: dict[str, Any] = {name: getattr(properties, name) for name in _FIELDS}
    document["reserved_pages"] = list(properties.reserved_pages)
    # The admission and restart declarations only when made, so a log that makes none reads as
    # before, and a reader that predates them refuses only a log that makes them.
    for name in _OMITTED_AT_DEFAULT:
        if document[name] == TargetProperties.__dataclass_fields__[name].default:
            del document[name]
    return document


def parse_properties(document: Any, where: str = "properties") -> TargetProperties:
    """Validate a JSON object of declared properties; missing fields take the lesson defaults."""
    if not isinstance(document, Mapping):
        raise PropertiesError(f"{where}: must be a JSON object, got {type(document).__name__}")
    unknown = sorted(set(document) - set(_FIELDS))
    if unknown:
        raise PropertiesError(
            f"{where}: unknown field '{unknown[0]}' (known fields: {', '.join(_FIELDS)})"
        )
    values = dict(document)
    if "reserved_pages" in values:
        pages = values["reserved_pages"]
        if not isinstance(pages, list):
            raise PropertiesError(f"{where}: field 'reserved_pages' must be an array of page ids")
        values["reserved_pages"] = tuple(pages)
    try:
        return TargetProperties(**values)
    except PropertiesError as error:
        raise PropertiesError(f"{where}: {error}") from None


def _optional_int(value: Any, name: str, minimum: int) -> None:
    if value is None and name in ("token_budget", "max_model_len", "prefill_chunk"):
        return
    # bool is an int subclass; true is never a page count.
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PropertiesError(f"field '{name}' must be an integer >= {minimum}, got {value!r}")
