"""What a target declares about itself: its policy and the engine features it uses.

The lesson model (spec/semantics.md) is the default: a request computes its whole prompt plus its
first token in the iteration that admits it, every active request decodes one token per
iteration, admission commits each request's peak pages (3.2), pages are taken lazily and minimally
(PAGE-1), and every page id of the pool is allocatable. Real engines differ, by design, in ways
that are not bugs; a target declares them here so the monitor applies what fits instead of raising
false alarms (spec/eventlog.md, section 4, says what each declaration changes).

:class:`TargetProperties` is the one home of the declarations: each field's annotation says what
it declares, its type and bounds, the invariants it relaxes and the declarations it needs
(:func:`declare`). What lists or checks declarations is derived from it: their names
(:data:`DECLARATIONS`, ``kvsched check --allow``), the validation of a declaration made in Python
or read from JSON (one set of messages), the JSON Schema of a log header's ``target``
(``schemas/target.schema.json``, :func:`target_schema`) and the invariants a verdict says each
declaration relaxed (:data:`RELAXES`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cache
from typing import Annotated, Any, NewType, TypeGuard, get_type_hints

import msgspec
from msgspec import Meta

from .vocabulary import (
    AdmissionOrder,
    BudgetMode,
    Chunking,
    PageAdmission,
    Rejection,
    Requeue,
    Restart,
)
from .workload import Limits, Request, Workload, infeasible, pages_for

Positive = Annotated[int, Meta(ge=1)]
Count = Annotated[int, Meta(ge=0)]
PageIds = Annotated[tuple[Count, ...], Meta(extra_json_schema={"uniqueItems": True})]
"""Distinct page ids: the validation reads ``uniqueItems`` from the schema, as JSON Schema does."""


class PropertiesError(ValueError):
    """A declaration of target properties is malformed; the message names the field."""


@dataclass(frozen=True)
class Needs:
    """A declaration that means something only with another: when its field takes one of the
    values ``when``, the field ``other`` must take one of ``then``. An empty tuple stands for any
    value but null (declared), as the field's default ``None`` is "not declared"."""

    when: tuple[object, ...]
    other: str
    then: tuple[object, ...]
    why: str
    """What the pair means, and what to declare: the end of the message."""


@dataclass(frozen=True)
class About:
    """What a declaration means to kvsched beyond its type (:func:`declare`)."""

    relaxes: tuple[str, ...] = ()
    """The invariants it takes out or relaxes; a verdict says what it excused in the run. The
    others only add a check or shrink the pool, which the monitor enforces."""
    needs: tuple[Needs, ...] = ()
    written: bool = False
    """Written into a log's header even at its default: the declarations of version 1. A later
    one is written only when made, so a log that makes none reads as before, and a reader that
    predates it refuses only a log that makes it."""


def declare(
    description: str,
    *,
    relaxes: tuple[str, ...] = (),
    needs: tuple[Needs, ...] = (),
    written: bool = False,
) -> Meta:
    """A field's annotation: its description goes into the JSON Schema, the rest into
    :class:`About`, which the validation and the verdict read."""
    return Meta(description=description, extra={"kvsched": About(relaxes, needs, written)})


@dataclass(frozen=True)
class TargetProperties:
    """A target's declared policy and capabilities; the defaults are the lesson model."""

    policy: Annotated[
        str,
        declare(
            'The policy whose invariants apply ("static", "continuous", or another name); "": '
            "not declared here (the run's or the caller's policy is used). A policy outside the "
            "lesson's is a declaration: the lesson's conformance rules do not apply to it.",
            relaxes=("BATCH-2", "BATCH-3", "BATCH-4"),
            written=True,
        ),
    ] = ""
    admission: Annotated[
        PageAdmission,
        declare(
            '"peak": admission commits each request\'s peak pages (semantics.md 3.2); "lazy": '
            "pages are taken as tokens are computed, with no peak commitment, and a batch that "
            "runs out of pages preempts (vLLM, nano-vllm).",
            relaxes=("PAGE-5", "BATCH-3"),
            written=True,
        ),
    ] = "peak"
    token_budget: Annotated[
        Positive | None,
        declare(
            "At most this many tokens computed per iteration (vLLM's max_num_batched_tokens, "
            "Sarathi's chunk_size); null: no budget.",
            written=True,
        ),
    ] = None
    chunked_prefill: Annotated[
        bool,
        declare(
            "A prompt may be computed over several iterations under the token budget.",
            relaxes=("LIVE-1",),
            needs=(
                Needs(
                    (True,),
                    "token_budget",
                    (),
                    "a prompt is chunked under a token budget; declare token_budget",
                ),
            ),
            written=True,
        ),
    ] = False
    prefill_chunk: Annotated[
        Positive | None,
        declare(
            "With chunked_prefill: the most prompt tokens one request computes in one iteration, "
            "when less than the budget (vLLM's long_prefill_token_threshold); null: the budget. "
            "It only lengthens the LIVE-1 bound (eventlog.md 4.2).",
            relaxes=("LIVE-3", "LIVE-1"),
            needs=(
                Needs((), "chunked_prefill", (True,), "it caps a chunk; declare chunked_prefill"),
            ),
        ),
    ] = None
    preemption: Annotated[
        bool,
        declare(
            "A request may release all its pages and return to the waiting queue to recompute "
            "(preemption by recompute, vLLM's default).",
            relaxes=("REQ-2", "LIVE-1"),
            written=True,
        ),
    ] = False
    prefix_sharing: Annotated[
        bool,
        declare(
            "A page may sit in several page tables at once when declared as shared (prefix "
            "caching with reference counts).",
            relaxes=("PAGE-2",),
            written=True,
        ),
    ] = False
    reserve_ahead: Annotated[
        bool,
        declare(
            "The allocator reserves pages ahead of need, up to the request's peak or "
            'max_model_len tokens (Orca-style baselines); PAGE-1\'s "fewer than a page wasted" '
            'is relaxed to "the reservation covers the tokens and stays within that bound".',
            relaxes=("PAGE-1",),
            written=True,
        ),
    ] = False
    max_model_len: Annotated[
        Positive | None,
        declare(
            "With reserve_ahead: the most tokens a reservation may span (Orca (Max)'s model "
            "maximum); null: a reservation spans at most the request's own prompt plus output.",
            relaxes=("PAGE-1",),
            needs=(
                Needs((), "reserve_ahead", (True,), "it bounds a reservation; set reserve_ahead"),
            ),
            written=True,
        ),
    ] = None
    reserved_pages: Annotated[
        PageIds,
        declare(
            "Page ids the pool never hands out (vLLM keeps block 0 as its null block).",
            written=True,
        ),
    ] = ()
    watermark_pages: Annotated[
        Count,
        declare(
            "Pages the target keeps free when it admits (vLLM's watermark).",
            relaxes=("BATCH-3", "LIVE-2"),
            written=True,
        ),
    ] = 0
    # Admission as declarations (eventlog.md 4.6): each is checked only where it is declared.
    order: Annotated[
        AdmissionOrder | None,
        declare(
            "The admission order BATCH-4 checks; null: the policy's (fcfs for static and "
            "continuous, else none).",
            relaxes=("BATCH-4",),
        ),
    ] = None
    requeue: Annotated[
        Requeue,
        declare(
            'Where a preempted request rejoins the waiting queue under fcfs: "head", the latest '
            'preempted first (vLLM, nano-vllm); "tail", behind every request waiting then '
            "(SGLang's retraction). A queue the target reports is checked in that order (BATCH-4).",
            relaxes=("BATCH-4",),
            needs=(
                Needs(
                    ("tail",),
                    "preemption",
                    (True,),
                    "it says where a preempted request rejoins; declare preemption too",
                ),
            ),
        ),
    ] = "head"
    chunking: Annotated[
        Chunking | None,
        declare(
            'Which prompts may be chunked (BATCH-5); null: not declared ("all" with '
            "chunked_prefill).",
            needs=(
                Needs(
                    ("all", "first"),
                    "chunked_prefill",
                    (True,),
                    "declare chunked_prefill (with a token_budget) to chunk prompts",
                ),
                Needs(("none",), "chunked_prefill", (False,), "they contradict; declare one"),
            ),
        ),
    ] = None
    budget: Annotated[
        BudgetMode,
        declare(
            "How the token budget counts a batch: the sum of the tokens computed, or padded.",
            relaxes=("BATCH-3",),
            needs=(
                Needs(
                    ("padded",),
                    "token_budget",
                    (),
                    "a padded budget is a token budget; declare token_budget",
                ),
            ),
        ),
    ] = "sum"
    estimate_admission: Annotated[
        bool,
        declare(
            "Admission by an estimate of future tokens, or prefill only every few iterations "
            "(LightLLM): work conservation (BATCH-3) is then not promised and not checked.",
            relaxes=("BATCH-3",),
        ),
    ] = False
    restart: Annotated[
        Restart,
        declare(
            'What a preempted request comes back as (eventlog.md 4.3.1): "recompute", its prompt '
            'and output so far, recomputed; "fold" (vidur), what it had processed becomes its '
            "prompt.",
            relaxes=("DEC-1", "DEC-3", "REQ-2", "LIVE-1"),
            needs=(
                Needs(
                    ("fold",),
                    "preemption",
                    (True,),
                    "restart says what a preempted request comes back as; declare preemption too",
                ),
            ),
        ),
    ] = "recompute"
    serves_running: Annotated[
        bool,
        declare(
            "Every request of the batch is scheduled, in order, before any admission, as far as "
            "the token budget reaches (vLLM v1's running loop): one that computes nothing while "
            "the budget has room was skipped (BATCH-6)."
        ),
    ] = False
    max_partial_prefills: Annotated[
        Positive | None,
        declare(
            "With chunked_prefill and serves_running: at most this many requests of the batch "
            "(those running before the iteration) continue their prefill in one iteration, the "
            "first in the batch's order; the others wait (a cap on partial prefills in flight, "
            "as vLLM v0's max_num_partial_prefills); null: no cap. A request is in its prefill "
            "from its admission until it produces a token (vLLM's is_prefill_chunk), a "
            "recompute after preemption included. A request of the batch in its prefill that "
            "computes nothing is then not BATCH-6 when at least that many requests of the batch "
            "computed a prefill chunk in the iteration, as kvsched counts them (under priority "
            "order the iteration's preemptions count too: a victim scheduled earlier in the step "
            "held a place). A decode left out, or a prefill left out below the cap, is still "
            "BATCH-6. Admissions are not capped by it: BATCH-3 judges a free slot as before.",
            relaxes=("BATCH-6",),
            needs=(
                Needs(
                    (),
                    "chunked_prefill",
                    (True,),
                    "it caps prefills computed in chunks; declare chunked_prefill",
                ),
                Needs(
                    (),
                    "serves_running",
                    (True,),
                    "it excuses a request the batch-first loop passes over; declare serves_running",
                ),
            ),
        ),
    ] = None
    stops_early: Annotated[
        bool,
        declare(
            "A request may finish before its output length (eventlog.md 4.9), which is then its "
            "most (vLLM's max_tokens): what real engines do on an end-of-sequence token, a stop "
            "string or an abort (from the batch or the queue).",
            relaxes=("REQ-2", "BATCH-3", "LIVE-2"),
        ),
    ] = False
    rejects_infeasible: Annotated[
        Rejection,
        declare(
            "When a request whose peak pages exceed the pool (a workload that allows them, "
            'semantics.md 1.2) is finished without its output: "at-head", by the end of the '
            "iteration after the one that leaves it at the head of the queue (as a fix "
            'proposed to vLLM fails it when its schedule comes to it); "at-arrival", in the '
            "iteration it arrives (LIVE-5)."
        ),
    ] = "at-head"
    async_scheduling: Annotated[
        bool,
        declare(
            "The target schedules step n + 1 before step n's writes complete (vLLM's "
            "AsyncScheduler, eventlog.md 4.10): the step in flight may still write a page given "
            "back, so a page an update gives back is not handed out in the next iteration, nor "
            "one a preemption gives back in the same schedule (PAGE-7). Those pages are no room "
            "for that schedule (BATCH-3, LIVE-2, LIVE-4), and an iteration that computes nothing "
            "after an update that gave pages back grows LIVE-1's bound by one.",
            relaxes=("BATCH-3", "LIVE-1", "LIVE-2", "LIVE-4"),
        ),
    ] = False
    state_slots: Annotated[
        Positive | None,
        declare(
            "The size of a pool of per-request state slots beside the page pool (SGLang's mamba "
            "slots for a hybrid model): a request holds one slot, its own, from its admission "
            "until it finishes, is preempted or is aborted, and the target admits only while a "
            "slot is free. The target reports who holds which slot (ScheduledBatch.slots, "
            "StepOutcome.slots and free_slots; semantics.md 4.2), held to SLOT-1 (conservation) "
            "and SLOT-2 (no slot held by a request that is not running). A batch slot left idle "
            "while every state slot is held is not BATCH-3; null: no such pool.",
            relaxes=("BATCH-3",),
        ),
    ] = None

    def __post_init__(self) -> None:
        for name, default in _defaults():
            value = getattr(self, name)
            if value == default and type(value) is type(default):
                continue  # the lesson's, valid: a run builds TargetProperties() several times
            # Exactly its type: a list where a tuple belongs converts, but is not one.
            if _converted(name, value) != value:
                raise PropertiesError(_wrong(name, value))
        for name, rule in _rules():
            value, other = getattr(self, name), getattr(self, rule.other)
            if _holds(rule.when, value) and not _holds(rule.then, other):
                raise PropertiesError(
                    f"field '{name}' is {_shown(value)} but '{rule.other}' is "
                    f"{_shown(other)}: {rule.why}"
                )

    @property
    def lesson_model(self) -> bool:
        """True when nothing but the policy is declared: the lesson's model applies unchanged."""
        return not any(
            getattr(self, f.name) != f.default for f in fields(self) if f.name != "policy"
        )

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

    def running_limit(self, limits: Limits) -> int:
        """Requests that may run at once: the batch limit, or the declared state slots if
        fewer (each running request holds one, SLOT-1)."""
        slots = self.state_slots
        return limits.batch_limit if slots is None else min(limits.batch_limit, slots)

    def unservable(self, workload: Workload) -> str:
        """Why no correct target with these declarations can serve ``workload``, or "".

        A request needs its peak pages at once; reserved ids shrink the pool below what the
        workload's own rule (section 1) checked, so a run of such a request never drains, and
        LIVE-1 would blame a correct target for the workload. A request no pool can hold, in a
        workload that allows one (section 1.2), is LIVE-5's to judge instead.
        """
        limits = workload.limits
        usable = self.usable_pages(limits)
        for request in workload.requests:
            if workload.allow_infeasible and infeasible(request, limits):
                continue
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


Declaration = NewType("Declaration", str)
"""The name of a field of :class:`TargetProperties`: a declaration a target may make, what
``kvsched check --grade --allow`` names and what a verdict lists as having excused something."""
DECLARATIONS: tuple[Declaration, ...] = tuple(Declaration(f.name) for f in fields(TargetProperties))


def is_declaration(name: str) -> TypeGuard[Declaration]:
    """Whether ``name`` is one of the declarations a target may make."""
    return name in DECLARATIONS


@cache
def _hints() -> dict[str, Any]:
    return get_type_hints(TargetProperties, include_extras=True)


@cache
def about(name: str) -> About:
    """What the annotation of declaration ``name`` says beyond its type."""
    for meta in _hints()[name].__metadata__:
        if isinstance(meta, Meta) and meta.extra and "kvsched" in meta.extra:
            found: About = meta.extra["kvsched"]
            return found
    return About()


@cache
def _defaults() -> tuple[tuple[Declaration, object], ...]:
    return tuple((Declaration(f.name), f.default) for f in fields(TargetProperties))


@cache
def _rules() -> tuple[tuple[Declaration, Needs], ...]:
    return tuple((name, rule) for name in DECLARATIONS for rule in about(name).needs)


RELAXES: dict[Declaration, tuple[str, ...]] = {
    name: about(name).relaxes for name in DECLARATIONS if about(name).relaxes
}
"""The invariants each relaxing declaration takes out or relaxes, from the fields' annotations."""


def target_schema() -> dict[str, Any]:
    """The JSON Schema of a declaration (``schemas/target.schema.json``), from the dataclass:
    msgspec's schema of the fields, closed to unknown ones, with each :class:`Needs` as an
    ``if``/``then`` whose absent fields read as their defaults."""
    defaults = {f.name: f.default for f in fields(TargetProperties)}
    rules = []
    for name, rule in _rules():
        when: dict[str, Any] = {"properties": {name: _schema_of(rule.when)}}
        if not _holds(rule.when, defaults[name]):
            when["required"] = [name]
        then: dict[str, Any] = {"properties": {rule.other: _schema_of(rule.then)}}
        if not _holds(rule.then, defaults[rule.other]):
            then["required"] = [rule.other]
        rules.append({"if": when, "then": then})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "kvsched/target.schema.json",
        "title": "kvsched target declaration",
        "description": "What a target declares about itself (spec/properties.py, spec/eventlog.md "
        "section 4); absent fields take the lesson model's defaults. Generated from "
        "TargetProperties by `python -m kvsched.spec.properties`: do not edit.",
        "type": "object",
        "additionalProperties": False,
        "properties": _generated_properties(),
        "allOf": rules,
    }


def properties_to_json(properties: TargetProperties) -> dict[str, Any]:
    """The JSON object of a declaration; :func:`parse_properties` reads it back unchanged."""
    # Through JSON, so tuples come back as the lists a JSON document holds.
    document: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(properties))
    for f in fields(properties):
        if not about(f.name).written and document[f.name] == f.default:
            del document[f.name]
    return document


def parse_properties(document: Any, where: str = "properties") -> TargetProperties:
    """Validate a JSON object of declared properties; missing fields take the lesson defaults."""
    if not isinstance(document, Mapping):
        raise PropertiesError(f"{where}: must be a JSON object, got {type(document).__name__}")
    unknown = sorted(set(document) - set(DECLARATIONS))
    if unknown:
        raise PropertiesError(
            f"{where}: unknown field '{unknown[0]}' (known fields: {', '.join(DECLARATIONS)})"
        )
    try:
        # JSON's arrays become the tuples the dataclass holds; the constructor checks the rest.
        return TargetProperties(**{name: _converted(name, v) for name, v in document.items()})
    except PropertiesError as error:
        raise PropertiesError(f"{where}: {error}") from None


def _converted(name: str, value: Any) -> Any:
    """``value`` as field ``name``'s type holds it, if it is one (msgspec's strict conversion:
    true is no count, 1.0 no integer); else :class:`PropertiesError` says what it must be."""
    try:
        converted = msgspec.convert(value, _hints()[name])
    except msgspec.ValidationError:
        raise PropertiesError(_wrong(name, value)) from None
    if _field_schema(name).get("uniqueItems") and len(set(converted)) != len(converted):
        raise PropertiesError(_wrong(name, value))
    return converted


def _wrong(name: str, value: Any) -> str:
    return f"field '{name}' must be {_expected(_field_schema(name))}, got {value!r}"


@cache
def _generated_properties() -> dict[str, Any]:
    """msgspec's JSON Schema of each field, by name; the messages read it too."""
    schema = msgspec.json.schema(TargetProperties)["$defs"]["TargetProperties"]
    # Through JSON, so a default of () reads as the [] of the checked-in file.
    properties: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(schema["properties"]))
    return properties


def _field_schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = _generated_properties()[name]
    return schema


def _expected(schema: Mapping[str, Any]) -> str:
    """What a value of ``schema`` is, in words, for the messages: the schema's own terms, so a
    message cannot say other than what the schema checks."""
    if "enum" in schema:
        return f"one of {', '.join(map(str, schema['enum']))}"
    if "anyOf" in schema:
        kinds = [_expected(s) for s in schema["anyOf"] if s.get("type") != "null"]
        return f"{' or '.join(kinds)} (or null: not declared)"
    kind = schema.get("type")
    if kind == "array":
        each = f"an array (a tuple in Python) whose items are each {_expected(schema['items'])}"
        return f"{each}, all different" if schema.get("uniqueItems") else each
    if kind == "integer":
        return f"an integer >= {schema['minimum']}" if "minimum" in schema else "an integer"
    words = {"boolean": "a boolean (true or false)", "string": "a string"}
    return words.get(str(kind), f"a value of JSON Schema {dict(schema)}")


def _holds(values: tuple[object, ...], value: object) -> bool:
    if not values:
        return value is not None
    # type(): True == 1 in Python, and a flag is no count.
    return any(value == v and type(value) is type(v) for v in values)


def _schema_of(values: tuple[object, ...]) -> dict[str, Any]:
    if not values:
        return {"not": {"type": "null"}}
    return {"const": values[0]} if len(values) == 1 else {"enum": list(values)}


def _shown(value: object) -> str:
    if value is None:
        return "not declared"
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value)


if __name__ == "__main__":
    # python -m kvsched.spec.properties: rewrite the checked-in schema from the dataclass.
    import json
    from pathlib import Path

    schema_file = Path(__file__).resolve().parent / "schemas" / "target.schema.json"
    schema_file.write_text(json.dumps(target_schema(), indent=2) + "\n")
    print(f"wrote {schema_file}")
