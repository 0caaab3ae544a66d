"""Restart semantics as a declaration (spec/eventlog.md 4.3.1): recompute, the default, and fold.

The vidur-like engines fold as vidur's ``Request.restart()`` does, so a request preempted within
its chunked prefill comes back with a shorter prompt and produces the rest of the old one as
output. Declared, that is clean; undeclared, it is a finding that says which declaration would
explain it; a recompute engine that declares fold is told the converse; and a bug in a folding
engine is still caught.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from engines.vidur_like import VidurSarathi, VidurSarathiDropsToken, VidurVLLM

from kvsched.checks.eventlog.jsonl import check_log, write_log
from kvsched.checks.eventlog.writer import v2_lines
from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.runtime import monitor_run
from kvsched.reference import compute_metrics, run
from kvsched.reference.engine import Run
from kvsched.reference.engine_scheduler import VLLM_V1, EngineScheduler
from kvsched.reference.families import generate
from kvsched.spec.properties import (
    PropertiesError,
    TargetProperties,
    parse_properties,
    properties_to_json,
)
from kvsched.spec.protocol import SchedulerFactory
from kvsched.spec.vocabulary import RESTARTS
from kvsched.spec.workload import Workload

SCHEMA = Path(__file__).resolve().parents[2] / "spec" / "schemas" / "target.schema.json"
# Seeded shared-prefix workloads: long prompts in a tight pool, so Sarathi preempts requests in
# the middle of their chunked prefill.
SEEDS = (0, 1, 2)


def _workload(seed: int) -> Workload:
    return generate("shared-prefix", 30, seed)


def _judge(
    target: SchedulerFactory, workload: Workload, properties: TargetProperties
) -> tuple[Run, Finding | None]:
    result = run(workload, target, properties.policy, properties=properties)
    assert result.fault is None, result.fault
    return result, monitor_run(result, properties)


def _outputs(result: Run) -> Counter[str]:
    return Counter(rid for event in result.events for rid in event.decoded)


def test_the_declaration_is_a_closed_vocabulary_written_only_when_made() -> None:
    assert RESTARTS == ("recompute", "fold")
    schema = json.loads(SCHEMA.read_text())
    assert sorted(schema["properties"]["restart"]["enum"]) == sorted(RESTARTS)
    folded = TargetProperties(policy="continuous", preemption=True, restart="fold")
    assert parse_properties(properties_to_json(folded)) == folded
    assert "restart" not in properties_to_json(replace(folded, restart="recompute"))
    with pytest.raises(PropertiesError, match="'restart' must be one of fold, recompute, got"):
        parse_properties({"policy": "continuous", "preemption": True, "restart": "replay"})
    with pytest.raises(PropertiesError, match="declare preemption"):
        TargetProperties(restart="fold")


def test_fold_moves_only_what_a_prefill_cut_short_leaves() -> None:
    fold = TargetProperties(preemption=True, restart="fold")
    assert fold.moved_on_restart(tokens=10, kv=4, decoding=False) == 6  # within the prefill
    assert fold.moved_on_restart(tokens=12, kv=11, decoding=True) == 0  # after it
    assert fold.moved_on_restart(tokens=10, kv=0, decoding=False) == 0  # nothing processed
    recompute = TargetProperties(preemption=True)
    assert recompute.moved_on_restart(tokens=10, kv=4, decoding=False) == 0


@pytest.mark.parametrize("seed", SEEDS)
def test_a_folding_engine_is_clean_when_it_declares_fold(seed: int) -> None:
    workload = _workload(seed)
    result, finding = _judge(VidurSarathi, workload, VidurSarathi.properties)
    assert finding is None, finding
    # Not vacuous: some request was cut within its prefill and produced more tokens than its
    # output length, the rest of its old prompt, as vidur's restart makes it.
    lengths = {r.id: r.output_tokens for r in workload.requests}
    assert any(count > lengths[rid] for rid, count in _outputs(result).items())


@pytest.mark.parametrize("seed", SEEDS)
def test_undeclared_fold_is_a_finding_that_names_the_declaration(seed: int) -> None:
    recompute = replace(VidurSarathi.properties, restart="recompute")
    _, finding = _judge(VidurSarathi, _workload(seed), recompute)
    assert finding is not None and finding.invariant == "DEC-3"
    assert "its prefill unfinished" in finding.message
    assert "declare restart 'fold' (spec/eventlog.md 4.3.1)" in finding.message


# vLLM v1's design with a budget small enough that long prompts are preempted mid-prefill.
SMALL_VLLM = EngineScheduler.configured(replace(VLLM_V1, token_budget=64, prefix_caching=False))


def test_a_recompute_engine_declaring_fold_is_told_to_declare_recompute() -> None:
    declared = SMALL_VLLM.properties
    folded = replace(declared, restart="fold")
    findings = []
    for seed in SEEDS:
        _, finding = _judge(SMALL_VLLM, _workload(seed), folded)
        findings.append(finding)
        _, clean = _judge(SMALL_VLLM, _workload(seed), declared)
        assert clean is None, clean
    wrong = [f for f in findings if f is not None]
    assert wrong, "no workload preempted the engine within a prefill"
    for finding in wrong:
        assert finding.invariant == "DEC-1", finding
        assert "declares restart 'recompute', the default" in finding.message


@pytest.mark.parametrize("seed", (1, 2, 3))
def test_a_bug_in_a_folding_engine_is_still_caught(seed: int) -> None:
    # The planted fold forgets the token sampled last, then produces it again from its KV. (In
    # seed 0 every such restart is cut again within its recompute, which folds the lost token
    # away before any token comes from it: nothing observable is wrong there.)
    _, finding = _judge(VidurSarathiDropsToken, _workload(seed), VidurSarathi.properties)
    assert finding is not None and finding.invariant == "DEC-3", finding


def test_after_the_prefill_fold_and_recompute_read_the_same() -> None:
    # vidur's vLLM scheduler restarts only requests whose prefill is complete: folding their
    # output into the prompt recomputes what recompute would, so either declaration is clean.
    for seed in SEEDS:
        for restart in RESTARTS:
            declared = replace(VidurVLLM.properties, restart=restart)
            result, finding = _judge(VidurVLLM, _workload(seed), declared)
            assert finding is None, (seed, restart, finding)
    assert any(event.preempted for event in result.events)


@pytest.mark.parametrize("version", [1, 2])
def test_a_folding_engines_log_declares_fold_and_checks_clean(tmp_path: Path, version: int) -> None:
    properties = VidurSarathi.properties
    result, _ = _judge(VidurSarathi, _workload(0), properties)
    path = tmp_path / "sarathi.jsonl"
    if version == 1:
        write_log(result, path, properties)
    else:
        path.write_text("".join(line + "\n" for line in v2_lines(result, properties)))
    header = json.loads(path.read_text().splitlines()[0])
    assert header["target"]["restart"] == "fold"
    assert check_log(path) is None
    header["target"]["restart"] = "recompute"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    finding = check_log(path)
    assert finding is not None and finding.invariant == "DEC-3"


def test_the_specs_worked_example_checks_as_the_spec_says(tmp_path: Path) -> None:
    text = (SCHEMA.parent.parent / "eventlog.md").read_text()
    section = text[text.index("### 4.3.1") : text.index("### 4.4")]
    example = section[section.index("```\n") + 4 : section.rindex("```")]
    path = tmp_path / "fold.jsonl"
    path.write_text(example)
    assert check_log(path) is None
    path.write_text(example.replace(',"restart":"fold"', ""))
    finding = check_log(path)
    assert finding is not None and (finding.invariant, finding.iteration) == ("DEC-3", 2)
    assert "declare restart 'fold'" in finding.message


def test_shortest_first_reads_a_folded_prompt(tmp_path: Path) -> None:
    # 'x' (prompt 2) is preempted after two tokens: folded, its prompt is 4, so 'y' (prompt 3)
    # is now the shortest; under recompute 'x' keeps its prompt of 2 and should come first.
    target = {
        "policy": "continuous", "admission": "lazy", "preemption": True,
        "order": "shortest-first", "restart": "fold",
    }  # fmt: skip
    workload = {
        "format": 1, "limits": {"batch_limit": 1, "page_size": 4, "pool_pages": 4},
        "requests": [
            {"id": "x", "arrival": 0, "prompt_tokens": 2, "output_tokens": 4},
            {"id": "y", "arrival": 0, "prompt_tokens": 3, "output_tokens": 1},
        ],
    }  # fmt: skip
    header = {
        "type": "header", "format": "kvsched-eventlog", "version": 2,
        "workload": workload, "target": target,
    }  # fmt: skip
    ops = [
        [["admit", "x"], ["alloc", "x", [0]], ["compute", "x", 2], ["token", "x"]],
        [["decode", ["x"]]],
        [["preempt", "x"], ["free", "x", [0]], ["admit", "y"], ["alloc", "y", [0]],
         ["compute", "y", 3], ["token", "y"], ["finish", "y"], ["free", "y", [0]]],
        [["admit", "x"], ["alloc", "x", [0]], ["compute", "x", 4], ["token", "x"]],
        [["alloc", "x", [1]], ["decode", ["x"]], ["finish", "x"], ["free", "x", [0, 1]]],
    ]  # fmt: skip
    free = [3, 3, 4, 3, 4]

    def check(restart: str) -> Finding | None:
        header["target"] = {**target, "restart": restart}
        lines = [json.dumps(header)] + [
            json.dumps({"type": "iteration", "iteration": n, "ops": o, "free_pages": f})
            for n, (o, f) in enumerate(zip(ops, free, strict=True), 1)
        ]
        path = tmp_path / f"{restart}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        return check_log(path)

    assert check("fold") is None
    finding = check("recompute")
    assert finding is not None and (finding.invariant, finding.iteration) == ("BATCH-4", 3)


def test_a_report_runs_a_folding_engine_under_its_own_declarations() -> None:
    # Without its declarations the model runner would stop a folded request at its old output
    # length, and the report would time a shorter run than the engine's.
    from kvsched.reports.collect import run_case

    workload = _workload(0)
    declared = run(workload, VidurSarathi, properties=VidurSarathi.properties)
    case = run_case(workload, "sarathi", VidurSarathi)
    assert case.problem == ""
    assert case.metrics.iterations == compute_metrics(workload, declared.events).iterations
