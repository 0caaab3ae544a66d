"""Workloads: the requests a run serves and the limits it runs under (spec/semantics.md, section 1).

A workload file is JSON (schema: ``schemas/workload.schema.json``). :func:`load_workload` is the
only way in: it checks every field against section 1 and rejects a malformed file with the file,
the request and the field named. It never repairs a file silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .bounds import (
    LIMIT_FIELDS,
    MAX_ARRIVAL,
    MAX_ID_LENGTH,
    MAX_REQUESTS,
    REQUEST_FIELDS,
    REQUEST_NUMBERS,
)
from .json_fields import WorkloadError as WorkloadError
from .json_fields import integer as _integer
from .json_fields import reject_unknown as _reject_unknown
from .json_fields import text as _text
from .request_fields import OPTIONAL_FIELDS, optional_json, parse_optional
from .strict_json import decode_json, is_text, shown_value
from .strict_json import json_kind as json_kind
from .vocabulary import (
    DEFAULT_PERCENTILE_METHOD,
    PERCENTILE_METHODS,
    PercentileMethod,
    is_percentile_method,
)

WORKLOAD_FORMAT = 1


@dataclass(frozen=True)
class Request:
    """A request: arrives at ``arrival`` with ``prompt_tokens``, asks for ``output_tokens``."""

    id: str
    arrival: int
    prompt_tokens: int
    output_tokens: int
    # Optional (section 1.1, request_fields.py), the lesson's by default: the members of one
    # non-empty prefix_group share their first min(prefix_tokens) prompt tokens; a lower
    # priority is served first by a scheduler that declares priority order.
    prefix_group: str = ""
    prefix_tokens: int = 0
    priority: int = 0


@dataclass(frozen=True)
class Limits:
    """The resource limits of a run: decode slots, page size and the physical page pool."""

    batch_limit: int
    page_size: int
    pool_pages: int


@dataclass(frozen=True)
class Workload:
    """Requests in declared order plus the limits they run under."""

    name: str
    limits: Limits
    requests: tuple[Request, ...]
    description: str = ""
    percentile_method: PercentileMethod = DEFAULT_PERCENTILE_METHOD
    """How its P50 and P95 waits are taken (section 7.4): the convention its figures use."""
    allow_infeasible: bool = False
    """Whether it may hold requests whose peak pages exceed the pool (section 1.2): requests no
    scheduler can serve, which a target must reject or abort as it declares (LIVE-5)."""

    def request(self, request_id: str) -> Request:
        for request in self.requests:
            if request.id == request_id:
                return request
        raise KeyError(request_id)


def pages_for(tokens: int, page_size: int) -> int:
    """Pages that hold ``tokens`` tokens, ``ceil(tokens / page_size)``, in exact integers (2)."""
    return -(-tokens // page_size)


def arrival_indices(requests: Sequence[Request]) -> list[int]:
    """Positions of ``requests`` in the order they enter the waiting queue (3.1): by arrival,
    ties in declared order."""
    return sorted(range(len(requests)), key=lambda i: requests[i].arrival)  # sort is stable


def arrival_order(requests: Sequence[Request]) -> list[Request]:
    """``requests`` in the order they enter the waiting queue (3.1)."""
    return [requests[i] for i in arrival_indices(requests)]


def peak_pages(request: Request, page_size: int) -> int:
    """Pages a request holds in its last iteration: prompt plus every output token (3.3)."""
    return pages_for(request.prompt_tokens + request.output_tokens, page_size)


_TOP_FIELDS = {
    "format",
    "name",
    "description",
    "percentile_method",
    "allow_infeasible",
    "limits",
    "requests",
}


def load_workload(path: str | Path) -> Workload:
    """Read and validate a workload file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise WorkloadError(f"{path}: cannot read the workload file ({error.strerror})") from None
    return parse_workload(decode_json(data, str(path), WorkloadError), source=str(path))


def parse_workload(document: Any, source: str = "<workload>", empty: bool = False) -> Workload:
    """Validate an already-decoded workload document (the JSON object of a workload file).
    ``empty``: its requests are declared elsewhere (an event log's request lines), and its
    ``requests`` must be an empty array."""
    if not isinstance(document, Mapping):
        raise WorkloadError(
            f"{source}: the workload must be a JSON object, got {json_kind(document)}"
        )
    _reject_unknown(document, _TOP_FIELDS, source, "workload")
    for field in ("format", "limits", "requests"):
        if field not in document:
            raise WorkloadError(f"{source}: missing field '{field}'")
    if type(document["format"]) is not int or document["format"] != WORKLOAD_FORMAT:
        raise WorkloadError(
            f"{source}: field 'format' must be {WORKLOAD_FORMAT} (an integer), got "
            f"{json_kind(document['format'])} {shown_value(document['format'])}"
        )
    name = _text(document.get("name", Path(source).stem), source, "name")
    description = _text(document.get("description", ""), source, "description")
    method = document.get("percentile_method", DEFAULT_PERCENTILE_METHOD)
    if not is_percentile_method(method):
        raise WorkloadError(
            f"{source}: field 'percentile_method' is {method!r}, not one of numpy's percentile "
            f"methods: {', '.join(PERCENTILE_METHODS)} (default {DEFAULT_PERCENTILE_METHOD})"
        )
    allow_infeasible = document.get("allow_infeasible", False)
    if type(allow_infeasible) is not bool:
        raise WorkloadError(
            f"{source}: field 'allow_infeasible' must be true or false, got "
            f"{json_kind(allow_infeasible)} {shown_value(allow_infeasible)}"
        )
    limits = _parse_limits(document["limits"], source)
    if empty and document["requests"] != []:
        raise WorkloadError(
            f"{source}: field 'requests' must be [] where requests are declared as they come"
        )
    requests = () if empty else _parse_requests(document["requests"], source)
    if not allow_infeasible:
        _check_fits(requests, limits, source)
    return Workload(
        name=name,
        limits=limits,
        requests=requests,
        description=description,
        percentile_method=method,
        allow_infeasible=allow_infeasible,
    )


def workload_to_json(workload: Workload) -> dict[str, Any]:
    """The JSON document of a workload; :func:`parse_workload` reads it back unchanged.

    The percentile method is written only when it is not the default, so files that never
    declared one stay as they were.
    """
    document: dict[str, Any] = {
        "format": WORKLOAD_FORMAT,
        "name": workload.name,
        "description": workload.description,
    }
    if workload.percentile_method != DEFAULT_PERCENTILE_METHOD:
        document["percentile_method"] = workload.percentile_method
    if workload.allow_infeasible:  # written only when set: other files stay as they were
        document["allow_infeasible"] = True
    return document | {
        "limits": {
            "batch_limit": workload.limits.batch_limit,
            "page_size": workload.limits.page_size,
            "pool_pages": workload.limits.pool_pages,
        },
        "requests": [
            {
                "id": r.id,
                "arrival": r.arrival,
                "prompt_tokens": r.prompt_tokens,
                "output_tokens": r.output_tokens,
            }
            | optional_json(r.prefix_group, r.prefix_tokens, r.priority)
            for r in workload.requests
        ],
    }


def _parse_limits(raw: Any, source: str) -> Limits:
    where = f"{source}: limits"
    if not isinstance(raw, Mapping):
        raise WorkloadError(f"{where}: must be a JSON object, got {json_kind(raw)}")
    _reject_unknown(raw, set(LIMIT_FIELDS), source, "limits")
    values = {}
    for field, bounds in LIMIT_FIELDS.items():
        if field not in raw:
            raise WorkloadError(f"{where}: missing field '{field}'")
        values[field] = _integer(raw[field], bounds, where, field)
    return Limits(**values)


def _parse_requests(raw: Any, source: str) -> tuple[Request, ...]:
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise WorkloadError(
            f"{source}: field 'requests' must be a JSON array, got {json_kind(raw)}"
        )
    if not raw:
        raise WorkloadError(f"{source}: field 'requests' is empty; a workload needs a request")
    if len(raw) > MAX_REQUESTS:
        raise WorkloadError(
            f"{source}: field 'requests' holds {len(raw)} requests, more than the "
            f"{MAX_REQUESTS} a workload may (schemas/workload.schema.json); split it"
        )
    requests: list[Request] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(raw):
        try:
            request = parse_request(item, "")
        except WorkloadError as error:  # the label is made only for a request that is wrong
            raise WorkloadError(_label(source, index, item) + str(error)) from None
        if request.id in seen:
            raise WorkloadError(
                f"{_label(source, index, item)}: duplicate request id '{request.id}' "
                f"(first used by request #{seen[request.id]})"
            )
        seen[request.id] = index
        requests.append(request)
    return tuple(requests)


def _label(source: str, index: int, item: Any) -> str:
    """Where a request of a workload file is, for an error about it."""
    named = isinstance(item, Mapping) and is_text(item.get("id"))
    if named and len(item["id"]) <= MAX_ID_LENGTH:
        return f"{source}: request #{index} ('{item['id']}')"
    return f"{source}: request #{index}"


def parse_request(item: Any, label: str, latest_arrival: int = MAX_ARRIVAL) -> Request:
    """One request's JSON object, validated (section 1.1); ``label`` says where it is, and
    begins the text of any error (a workload's reader gives ``""`` and puts its own before it,
    made only then). An event log that declares requests as they come allows arrivals up to
    ``latest_arrival``."""
    if not isinstance(item, Mapping):
        raise WorkloadError(f"{label}: must be a JSON object, got {json_kind(item)}")
    _reject_unknown(item, _KNOWN_FIELDS, label, "request")
    if not item.keys() >= _REQUIRED:
        missing = next(field for field in REQUEST_FIELDS if field not in item)
        raise WorkloadError(f"{label}: missing field '{missing}'")
    request_id = item["id"]
    if not is_text(request_id) or not 0 < len(request_id) <= MAX_ID_LENGTH:
        raise WorkloadError(
            f"{label}: field 'id' must be a non-empty string of at most {MAX_ID_LENGTH} "
            f"characters (UTF-8, no lone surrogates), got {shown_value(request_id)}"
        )
    arrival = _integer(item["arrival"], (0, latest_arrival), label, "arrival")
    prompt = _integer(item["prompt_tokens"], _PROMPT, label, "prompt_tokens")
    output = _integer(item["output_tokens"], _OUTPUT, label, "output_tokens")
    return Request(request_id, arrival, prompt, output, **parse_optional(item, prompt, label))


_KNOWN_FIELDS = {*REQUEST_FIELDS, *OPTIONAL_FIELDS}
_REQUIRED = frozenset(REQUEST_FIELDS)
_PROMPT, _OUTPUT = REQUEST_NUMBERS["prompt_tokens"], REQUEST_NUMBERS["output_tokens"]


def _check_fits(requests: tuple[Request, ...], limits: Limits, source: str) -> None:
    for index, request in enumerate(requests):
        if infeasible(request, limits):  # the label only then
            check_fits(request, limits, f"{source}: request #{index} ('{request.id}')")


def infeasible(request: Request, limits: Limits) -> bool:
    """Whether ``request`` is one no scheduler can hold: its peak pages exceed the pool (sections
    1 and 1.2). The one test of it: the loader refuses such a request unless the workload allows
    it, and the monitor and the reference read it the same."""
    return peak_pages(request, limits.page_size) > limits.pool_pages


def check_fits(request: Request, limits: Limits, label: str) -> None:
    """A request that can never fit the pool would wait forever; reject it up front (section 1),
    unless the workload allows it (``allow_infeasible``, section 1.2)."""
    if infeasible(request, limits):
        needed = peak_pages(request, limits.page_size)
        raise WorkloadError(
            f"{label}: needs {needed} pages at its peak "
            f"({request.prompt_tokens} prompt + {request.output_tokens} output tokens, "
            f"page size {limits.page_size}) but limits.pool_pages is {limits.pool_pages}; "
            "it could never be admitted (set the workload's allow_infeasible to judge how a "
            "target rejects such requests)"
        )
