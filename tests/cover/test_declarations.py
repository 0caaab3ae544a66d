"""A verdict says which declarations took out or relaxed a check and what each excused in the
run, with the monitor's counts; grading refuses the declarations the grader did not allow."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_early_stops import STOPS, stopped

from kvsched.checks.judge.eventlog import check_event_log
from kvsched.checks.judge.grade import enforce
from kvsched.checks.monitor.excuses import Excused
from kvsched.checks.monitor.runtime import watch_run
from kvsched.checks.targets.load import TargetError
from kvsched.checks.verdict.declarations import declared, excuses
from kvsched.checks.verdict.machine import render_json, render_junit_xml
from kvsched.checks.verdict.render import render_table
from kvsched.checks.verdict.report import Evidence, Report, build_verdict
from kvsched.reference import ContinuousScheduler
from kvsched.reference.engine import run
from kvsched.spec.invariants import CATALOGUE
from kvsched.spec.properties import (
    DECLARATIONS,
    RELAXES,
    PropertiesError,
    TargetProperties,
    about,
    parse_properties,
    properties_to_json,
    target_schema,
)
from kvsched.spec.protocol import ModelOutput, StepOutcome
from kvsched.spec.workload import Limits, Request, Workload

TARGET_SCHEMA = Path(__file__).resolve().parents[2] / "spec" / "schemas" / "target.schema.json"
EARLY = TargetProperties(policy="continuous", stops_early=True)
W = Workload(
    "drops",
    Limits(2, 4, 16),
    tuple(Request(f"r{i}", i, 3, 2 + i % 3) for i in range(6)),
)


class DropsTokens(ContinuousScheduler):
    """Finishes every request at its first token: the rest of its output is dropped."""

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        for seq in self.running:
            made = output.tokens.get(seq.request.id, 0)
            if made:
                seq.generated = seq.request.output_tokens - made
        return super().update_from_output(output)


def test_the_checked_in_schema_is_the_one_the_dataclass_generates() -> None:
    # Regenerate with `python -m kvsched.spec.properties` after changing a declaration.
    assert json.loads(TARGET_SCHEMA.read_text()) == target_schema()


def test_what_the_annotations_name_exists() -> None:
    ids = {i.id for i in CATALOGUE}
    for name in DECLARATIONS:
        assert set(RELAXES.get(name, ())) <= ids, name
        for rule in about(name).needs:
            assert rule.other in DECLARATIONS, (name, rule)


# Each rule of the declarations broken once, and made whole: the schema (for engines in any
# language) and the reader (for kvsched) must agree on every one, as both come from the dataclass.
DOCUMENTS: list[tuple[dict[str, Any], str]] = [
    ({"admission": "eager"}, "'admission' must be one of lazy, peak"),
    ({"token_budget": 0}, r"'token_budget' must be an integer >= 1 \(or null: not declared\)"),
    ({"token_budget": True}, "'token_budget' must be an integer"),
    ({"preemption": 1}, "'preemption' must be a boolean"),
    ({"policy": 3}, "'policy' must be a string"),
    ({"reserved_pages": [0, 0]}, "'reserved_pages' must be an array .* all different"),
    ({"reserved_pages": [-1]}, "'reserved_pages' must be an array .* each an integer >= 0"),
    ({"reserved_pages": 0}, "'reserved_pages' must be an array"),
    ({"watermark_pages": -1}, "'watermark_pages' must be an integer >= 0"),
    ({"order": "random"}, "'order' must be one of fcfs, none, priority, shortest-first"),
    ({"colour": "red"}, "unknown field 'colour'"),
    ({"chunked_prefill": True}, "'chunked_prefill' is true but 'token_budget' is not declared"),
    ({"prefill_chunk": 4, "token_budget": 8}, "'prefill_chunk' is 4 but 'chunked_prefill' is"),
    ({"max_model_len": 8}, "'max_model_len' is 8 but 'reserve_ahead' is false"),
    ({"chunking": "first"}, "'chunking' is 'first' but 'chunked_prefill' is false"),
    ({"chunking": "none", "chunked_prefill": True, "token_budget": 8}, "'chunking' is 'none' but"),
    ({"budget": "padded", "token_budget": None}, "'budget' is 'padded' but 'token_budget' is not"),
    ({"restart": "fold", "preemption": False}, "'restart' is 'fold' but 'preemption' is false"),
    ({"chunked_prefill": True, "token_budget": 8, "prefill_chunk": 4, "chunking": "first"}, ""),
    ({"max_model_len": 64, "reserve_ahead": True, "reserved_pages": [0, 3]}, ""),
    ({"budget": "padded", "token_budget": 8, "restart": "fold", "preemption": True}, ""),
    ({"chunking": "none", "order": None, "token_budget": None, "stops_early": True}, ""),
]  # fmt: skip


@pytest.mark.parametrize(("document", "error"), DOCUMENTS, ids=lambda v: str(v)[:40])
def test_the_schema_and_the_reader_judge_a_declaration_alike(
    document: dict[str, Any], error: str
) -> None:
    target = {"policy": "continuous", **document}
    valid = jsonschema.Draft202012Validator(json.loads(TARGET_SCHEMA.read_text())).is_valid(target)
    if not error:
        assert valid
        assert parse_properties(properties_to_json(parse_properties(target))) == parse_properties(
            target
        )
        return
    assert not valid
    with pytest.raises(PropertiesError, match=f"^where: field {error}|^where: {error}"):
        parse_properties(target, where="where")


def values(schema: dict[str, Any]) -> list[Any]:
    """Values around what ``schema`` allows: each kind it names, its bounds and one past them, and
    one of another kind; never a float, which JSON Schema reads as an integer when whole."""
    if "enum" in schema:
        return [*schema["enum"], "other"]
    if "anyOf" in schema:
        return [v for s in schema["anyOf"] for v in values(s)]
    return {
        "null": [None],
        "boolean": [True, False, 1],
        "integer": [schema.get("minimum", 0) - 1, schema.get("minimum", 0), 8, True],
        "array": [[], [0], [0, 0], [1, 3], [-1], 0],
        "string": ["", "continuous", 3],
    }[schema["type"]]


DOCUMENT = st.lists(st.sampled_from(DECLARATIONS), min_size=1, max_size=4, unique=True).flatmap(
    lambda names: st.fixed_dictionaries(
        {name: st.sampled_from(values(target_schema()["properties"][name])) for name in names}
    )
)


@given(DOCUMENT)
def test_the_schema_and_the_reader_agree_on_any_declaration(document: dict[str, Any]) -> None:
    # With the table above, which breaks each rule on purpose: dropping any one of the seven
    # if/then rules from the schema fails the table, and five of them fail this test too.
    schema = jsonschema.Draft202012Validator(json.loads(TARGET_SCHEMA.read_text()))
    try:
        parse_properties(document)
    except PropertiesError:
        assert not schema.is_valid(document)
    else:
        assert schema.is_valid(document)


def test_the_reader_is_stricter_than_json_schema_about_integers() -> None:
    # JSON Schema counts 1.0 as an integer; kvsched, as msgspec, does not.
    with pytest.raises(PropertiesError, match="'token_budget' must be an integer >= 1"):
        parse_properties({"token_budget": 1.0})


def test_the_monitor_counts_each_early_stop_and_its_tokens() -> None:
    finding, excused = watch_run(run(W, DropsTokens, policy="continuous", properties=EARLY), EARLY)
    assert finding is None
    assert (excused.runs, excused.finished, excused.stopped_early) == (1, 6, 6)
    assert (excused.fewest_tokens, excused.most_tokens, excused.from_queue) == (1, 1, 0)
    # Undeclared, the same run is REQ-2: the count is where the relaxation is applied.
    lesson = TargetProperties(policy="continuous")
    finding, excused = watch_run(run(W, DropsTokens, policy="continuous"), lesson)
    assert finding is not None and finding.invariant == "REQ-2"
    assert excused.stopped_early == 0


def test_a_correct_run_stops_nothing_early_and_the_verdict_says_so() -> None:
    _, excused = watch_run(run(W, ContinuousScheduler, properties=EARLY), EARLY)
    [excuse] = excuses(EARLY, "continuous", excused)
    assert (excuse.declaration, excuse.count) == ("stops_early", 0)
    assert excuse.excused == "excused nothing in this run (1 monitored run)"


def test_runs_add_up_sums_and_extremes() -> None:
    one = Excused(runs=1, finished=4, stopped_early=4, fewest_tokens=1, most_tokens=1)
    other = Excused(runs=1, finished=3, stopped_early=1, fewest_tokens=3, most_tokens=3)
    both = one + other + Excused()
    assert (both.runs, both.finished, both.stopped_early) == (2, 7, 5)
    assert (both.fewest_tokens, both.most_tokens) == (1, 3)
    [excuse] = excuses(EARLY, "continuous", both)
    assert excuse.excused == "5 of 7 requests stopped early, after 1 to 3 tokens (2 monitored runs)"
    [excuse] = excuses(EARLY, "continuous", one)
    assert excuse.excused.startswith("4 of 4 requests stopped early, after 1 token each")


def test_defaults_and_a_lesson_policy_are_not_declarations() -> None:
    assert declared(TargetProperties(policy="continuous"), "continuous") == {}
    assert declared(None, "my-policy") == {"policy": "policy='my-policy'"}
    made = declared(replace(EARLY, admission="lazy", watermark_pages=2), "continuous")
    assert made == {
        "admission": "admission='lazy'",
        "watermark_pages": "watermark_pages=2",
        "stops_early": "stops_early",
    }


def test_every_relaxing_declaration_says_what_it_excused_or_that_it_excused_nothing() -> None:
    everything = TargetProperties(
        policy="continuous", admission="lazy", token_budget=8, chunked_prefill=True,
        prefill_chunk=4, preemption=True, prefix_sharing=True, reserve_ahead=True,
        max_model_len=64, watermark_pages=1, order="none", requeue="tail", budget="padded",
        estimate_admission=True, restart="fold", stops_early=True, serves_running=True,
        max_partial_prefills=2, async_scheduling=True, state_slots=2,
    )  # fmt: skip
    listed = {e.declaration: e for e in excuses(everything, "continuous", Excused(runs=1))}
    # serves_running adds a check (BATCH-6) and relaxes none: no excuse to list.
    assert set(listed) == set(declared(everything, "continuous")) - {
        "token_budget",
        "serves_running",
    }
    assert set(listed) == set(RELAXES) - {"policy"}  # a new one: declare it above too
    for name, excuse in listed.items():
        if name == "prefill_chunk":  # it takes LIVE-3 out: that is never nothing
            assert excuse.excused.startswith("LIVE-3 was not checked: 0 repeated preemptions")
        else:
            assert excuse.excused.startswith("excused nothing"), (name, excuse)


def test_table_json_and_junit_name_the_declaration_and_its_excuse(tmp_path: Path) -> None:
    _, excused = watch_run(run(W, DropsTokens, policy="continuous", properties=EARLY), EARLY)
    verdict = build_verdict(
        "drops", "scheduler", "continuous", Evidence(monitor_runs=1), None,
        properties=EARLY, excused=excused,
    )  # fmt: skip
    report = Report("drops", (verdict,))
    words = "stops_early (REQ-2, BATCH-3, LIVE-2): 6 of 6 requests stopped early, after 1 token"
    assert words in render_table(report)
    [listed] = json.loads(render_json(report))["verdicts"][0]["declarations"]
    assert (listed["declaration"], listed["count"]) == ("stops_early", 6)
    junit = ElementTree.fromstring(render_junit_xml(report).split("\n", 1)[1])
    values = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert words in values["declaration.stops_early"]


def test_grading_refuses_what_it_was_not_allowed_and_says_how_to_allow_it() -> None:
    enforce(None, EARLY, "continuous", "anything")  # not grading: nothing refused
    enforce(frozenset({"stops_early"}), EARLY, "continuous", "x.py:C")
    with pytest.raises(TargetError) as refused:
        enforce(frozenset(), EARLY, "continuous", "x.py:C")
    assert "x.py:C declares what the grader did not allow: stops_early relaxes REQ-2" in str(
        refused.value
    )
    assert "run again with --allow stops_early" in str(refused.value)
    with pytest.raises(TargetError, match="declares no policy"):
        enforce(frozenset(), None, "", "x.py:C")


def test_an_event_log_shows_its_early_stops_and_grading_refuses_them(tmp_path: Path) -> None:
    path = stopped(tmp_path, STOPS)
    verdict = check_event_log("stops.jsonl", path)
    assert verdict.ok
    [excuse] = [e for e in verdict.declarations if e.declaration == "stops_early"]
    assert excuse.excused == "1 of 2 requests stopped early, after 2 tokens each (1 monitored run)"
    with pytest.raises(TargetError, match=r"the header of stops\.jsonl .*--allow stops_early"):
        check_event_log("stops.jsonl", path, allowed=frozenset({"admission", "token_budget"}))
    allowed = frozenset({"admission", "token_budget", "stops_early"})
    assert check_event_log("stops.jsonl", path, allowed=allowed).ok
