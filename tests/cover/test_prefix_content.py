"""PAGE-6 judges a page by the KV computed into it, not by the allocation that named it: a page
reserved ahead and never computed holds nothing a hit may take, a page partly computed only
its first tokens (checks/monitor/prefix.py)."""

from __future__ import annotations

from pathlib import Path

from kvsched.checks.eventlog.log_check import check_stream
from kvsched.checks.monitor.prefix import PrefixContent
from kvsched.checks.monitor.runtime import monitor_run
from kvsched.checks.mutants.engine import RESERVED, CachesReservedPages, ReservesPrompt, engine_log
from kvsched.reference.engine import run
from kvsched.reference.record import RequestRecord
from kvsched.spec.workload import Limits, Request, Workload

A = Request("a", 0, 12, 2, "sys", 8)
B = Request("b", 0, 12, 2, "sys", 8)
WORKLOAD = Workload("two", Limits(batch_limit=2, page_size=4, pool_pages=8), (A, B))


def _content() -> tuple[PrefixContent, dict[str, RequestRecord]]:
    records = {r.id: RequestRecord(r, 4) for r in WORKLOAD.requests}
    return PrefixContent(WORKLOAD.limits.page_size, enabled=True), records


def _a_reserves_its_prompt(content: PrefixContent, records: dict[str, RequestRecord]) -> None:
    # a takes pages 1, 2, 3 fresh for its 12-token prompt: named, nothing computed yet
    assert content.check(1, {"a": (1, 2, 3)}, {"a": (1, 2, 3)}, {}, {}, records) is None


def _b_hits(content: PrefixContent, records: dict[str, RequestRecord], cached: int) -> object:
    table = {"b": (1, 2, 7)}
    return content.check(2, {"b": (1, 2, 7)}, table, {"b": (1, 2)}, {"b": cached}, records)


def test_a_hit_on_pages_reserved_but_never_computed_is_page_6() -> None:
    content, records = _content()
    _a_reserves_its_prompt(content, records)
    finding = _b_hits(content, records, 8)
    assert finding is not None and finding.invariant == "PAGE-6"
    assert finding.pages == (1,) and "only 0 were ever computed" in finding.message


def test_a_hit_on_computed_pages_is_clean() -> None:
    content, records = _content()
    _a_reserves_its_prompt(content, records)
    records["a"].kv = 8  # a's KV reaches through both prefix pages
    assert _b_hits(content, records, 8) is None


def test_a_partly_computed_page_holds_only_its_computed_tokens() -> None:
    content, records = _content()
    _a_reserves_its_prompt(content, records)
    records["a"].kv = 6  # page 2 (tokens 4..8) holds two of its four
    finding = _b_hits(content, records, 8)
    assert finding is not None and finding.pages == (2,)
    assert "claiming 4 of its tokens, but only 2" in finding.message
    # A hit claiming only the computed tokens reads nothing uncomputed.
    content, records = _content()
    _a_reserves_its_prompt(content, records)
    records["a"].kv = 6
    assert _b_hits(content, records, 6) is None


def test_pages_let_go_keep_what_was_computed_then() -> None:
    content, records = _content()
    _a_reserves_its_prompt(content, records)
    records["a"].kv, records["a"].table = 4, (1, 2, 3)
    content.release(records["a"], records["a"].table)  # preempted: its pages keep page 0's tokens
    records["a"].kv = 0
    finding = _b_hits(content, records, 8)
    assert finding is not None and finding.pages == (2,)
    records["a"].kv = 12  # a's later KV is in other pages, not these
    assert _b_hits(content, records, 8) is not None


def test_the_wrong_name_is_still_another_requests_content() -> None:
    content, records = _content()
    other = Request("x", 0, 12, 2)
    records["x"] = RequestRecord(other, 4)
    content.check(1, {"x": (1, 2)}, {"x": (1, 2)}, {}, {}, records)
    records["x"].kv = 8
    finding = _b_hits(content, records, 8)
    assert finding is not None and "page 0 of request 'x'" in finding.message


def test_the_mutant_is_page_6_on_both_paths_and_its_reserving_twin_is_clean(
    tmp_path: Path,
) -> None:
    # Caught by the content computed: the allocation named the page right (a's own group page).
    log = engine_log(CachesReservedPages, RESERVED)(tmp_path)
    fast = check_stream(log, all_findings=True).finding
    assert fast is not None and (fast.invariant, fast.iteration, fast.pages) == ("PAGE-6", 7, (2,))
    props = CachesReservedPages.properties
    full = monitor_run(run(RESERVED, CachesReservedPages, props.policy, properties=props), props)
    assert full is not None and (full.invariant, full.iteration, full.message) == (
        fast.invariant,
        fast.iteration,
        fast.message,
    )
    twin = engine_log(ReservesPrompt, RESERVED)(tmp_path)
    assert check_stream(twin, all_findings=True).finding is None
    clean = run(RESERVED, ReservesPrompt, props.policy, properties=props)
    assert monitor_run(clean, props) is None
