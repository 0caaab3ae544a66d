"""The first line of an event log: its format, version, workload and the target's declarations.

Versions 1 and 2 share the header; version 2 adds ``pages``, which says whether the log names
page ids (``"ids"``, the default) or only counts them (``"counts"``, a count-only allocator), and
``requests``, which says whether the workload lists every request (``"header"``, the default) or
none, each then declared by a request line before it arrives (``"lines"``).
The header is small and read once, so it goes through :mod:`json`, which names a repeated key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kvsched.checks.eventlog.lines import LOG_FORMAT, EventLogError
from kvsched.checks.eventlog.source import strict_json
from kvsched.checks.eventlog.version2 import PageMode, RequestMode
from kvsched.spec.properties import PropertiesError, TargetProperties, parse_properties
from kvsched.spec.strict_json import json_kind
from kvsched.spec.workload import Workload, WorkloadError, parse_workload

T = TypeVar("T")
VERSIONS = (1, 2)
PAGE_MODES: tuple[PageMode, ...] = ("ids", "counts")
REQUEST_MODES: tuple[RequestMode, ...] = ("header", "lines")


@dataclass(frozen=True)
class LogHeader:
    """What a log's header declares."""

    version: int
    workload: Workload
    properties: TargetProperties
    pages: PageMode = "ids"
    requests: RequestMode = "header"


def parse_header(line: bytes, path: Path) -> LogHeader:
    where = f"{path}: line 1 (header)"
    document = strict_json(line, where)
    if not isinstance(document, dict):
        raise EventLogError(f"{where}: must be a JSON object, got {json_kind(document)}")
    if document.get("type") != "header":
        raise EventLogError(
            f"{where}: field 'type' must be 'header': an event log starts with "
            f"its header, got {document.get('type')!r}"
        )
    if "format" not in document:
        raise EventLogError(f"{where}: missing field 'format'")
    if document["format"] != LOG_FORMAT:
        raise EventLogError(
            f"{where}: field 'format' must be {LOG_FORMAT!r}, got {document['format']!r}"
        )
    version = _version(document, where)
    known = {"type", "format", "version", "workload", "target"} | (
        {"pages", "requests"} if version > 1 else set()
    )
    unknown = sorted(set(document) - known)
    if unknown:
        raise EventLogError(
            f"{where}: unknown field '{unknown[0]}' in a version-{version} header "
            f"(known fields: {', '.join(sorted(known))})"
        )
    for field in ("workload", "target"):
        if field not in document:
            raise EventLogError(f"{where}: missing field '{field}'")
    requests = _mode(document.get("requests", "header"), REQUEST_MODES, "requests", where)
    try:
        workload = parse_workload(
            document["workload"], source=f"{where}: field 'workload'", empty=requests == "lines"
        )
        properties = parse_properties(document["target"], where=f"{where}: field 'target'")
    except (WorkloadError, PropertiesError) as error:
        raise EventLogError(str(error)) from None
    if not properties.policy:
        raise EventLogError(
            f"{where}: field 'target': missing field 'policy' (a log declares "
            "the policy its target implements)"
        )
    pages = _mode(document.get("pages", "ids"), PAGE_MODES, "pages", where)
    if pages == "counts" and properties.prefix_sharing:
        raise EventLogError(
            f"{where}: field 'pages': a count-only log cannot declare prefix sharing, which "
            'is about which pages two requests hold; list page ids ("pages": "ids")'
        )
    for page in properties.reserved_pages:
        if page >= workload.limits.pool_pages:
            raise EventLogError(
                f"{where}: field 'target': reserved page {page} lies outside the pool of "
                f"{workload.limits.pool_pages} pages"
            )
    usable = properties.usable_pages(workload.limits)
    if properties.watermark_pages >= usable:
        # It would excuse every idle iteration (BATCH-3, LIVE-2) while the log admits requests.
        raise EventLogError(
            f"{where}: field 'target.watermark_pages': {properties.watermark_pages} pages kept "
            f"free when admitting, of the {usable} the pool can hand out: an engine that keeps "
            "them admits nothing; a watermark is a small share of the pool (vLLM's "
            "int(watermark * num_blocks), 1% by default)"
        )
    return LogHeader(version, workload, properties, pages, requests)


def _version(document: dict[str, Any], where: str) -> int:
    if "version" not in document:
        raise EventLogError(f"{where}: missing field 'version'")
    version = document["version"]
    # true == 1 and 1.0 == 1 in Python; neither is a version number in a log.
    if type(version) is not int or version not in VERSIONS:
        raise EventLogError(
            f"{where}: field 'version' must be the integer 1 or 2, got {version!r} "
            f"({json_kind(version)}); this reader knows versions 1 and 2"
        )
    return version


def _mode(value: Any, modes: tuple[T, ...], field: str, where: str) -> T:
    for mode in modes:
        if value == mode:
            return mode
    named = " or ".join(f'"{mode}"' for mode in modes)
    raise EventLogError(f"{where}: field '{field}' must be {named}, got {value!r}")
