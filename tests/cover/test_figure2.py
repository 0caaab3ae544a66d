"""The vLLM paper's Figure 2 as `kvsched figure2` runs it: the workload, the categories, the
paper's ordering, the section and the figures docs/figure2.md quotes."""

from __future__ import annotations

import re
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from kvsched.cli import main
from kvsched.commands.figure2 import DEFAULT_REQUESTS
from kvsched.reference.memory_use import MemoryShares
from kvsched.reference.reservation import measure
from kvsched.reference.sharegpt import sharegpt_like
from kvsched.reports.figure2 import figure2_section, ordering_holds
from kvsched.reports.render import to_html, to_markdown
from kvsched.spec.vllm_paper import MEAN_OUTPUT_TOKENS, MEAN_PROMPT_TOKENS, TOKEN_SLOTS
from kvsched.spec.vocabulary import MEMORY_USES, RESERVATIONS, Reservation
from kvsched.spec.workload import Workload

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def workload() -> Workload:
    return sharegpt_like(DEFAULT_REQUESTS, 0, TOKEN_SLOTS)


@pytest.fixture(scope="module")
def runs(workload: Workload) -> dict[str, MemoryShares]:
    """The command's own run, at its defaults."""
    return {reservation: measure(reservation, workload) for reservation in RESERVATIONS}


def test_the_workload_has_sharegpts_means_and_passes_vllms_filter(workload: Workload) -> None:
    prompts = [r.prompt_tokens for r in workload.requests]
    outputs = [r.output_tokens for r in workload.requests]
    assert statistics.fmean(prompts) == pytest.approx(MEAN_PROMPT_TOKENS, rel=0.05)
    assert statistics.fmean(outputs) == pytest.approx(MEAN_OUTPUT_TOKENS, rel=0.05)
    assert min(prompts) >= 4 and min(outputs) >= 4 and max(prompts) <= 1024
    assert max(r.prompt_tokens + r.output_tokens for r in workload.requests) <= 2048
    assert sharegpt_like(50, 3, TOKEN_SLOTS) == sharegpt_like(50, 3, TOKEN_SLOTS)
    assert sharegpt_like(50, 3, TOKEN_SLOTS) != sharegpt_like(50, 4, TOKEN_SLOTS)


@pytest.mark.parametrize("reservation", RESERVATIONS)
def test_the_categories_partition_the_pool(runs: dict[str, MemoryShares], reservation: str) -> None:
    run = runs[reservation]
    assert run.iterations > 0
    assert sum(run.counts.values()) == run.pool_slots * run.iterations
    assert sum(run.share(use) for use in MEMORY_USES) == pytest.approx(1.0)
    assert all(count >= 0 for count in run.counts.values())


def test_oracle_never_over_reserves_and_max_never_rounds(runs: dict[str, MemoryShares]) -> None:
    assert runs["orca-oracle"].internal == 0
    assert runs["orca-pow2"].internal > 0
    assert runs["orca-max"].rounding == 0  # every chunk is 2,048 slots
    assert runs["orca-oracle"].rounding > 0 and runs["orca-pow2"].rounding > 0


def test_only_paging_preempts_and_its_waste_is_under_a_page_per_request(
    runs: dict[str, MemoryShares], workload: Workload
) -> None:
    vllm = runs["vllm"]
    assert vllm.preemptions > 0
    assert all(runs[r].preemptions == 0 for r in RESERVATIONS if r != "vllm")
    assert vllm.rounding == 0
    assert vllm.reserved + vllm.internal < vllm.batched * workload.limits.page_size


def test_the_papers_ordering_holds_in_our_run(runs: dict[str, MemoryShares]) -> None:
    token = {r: run.share("token states") for r, run in runs.items()}
    assert token["vllm"] >= 2 * token["orca-oracle"], token
    assert token["orca-oracle"] > token["orca-pow2"] > token["orca-max"], token
    assert ordering_holds(tuple(runs.values()))


def test_the_ordering_check_can_fail(runs: dict[str, MemoryShares]) -> None:
    swapped = dict(runs)
    swapped["orca-pow2"], swapped["orca-max"] = (
        _as(runs["orca-max"], "orca-pow2"),
        _as(runs["orca-pow2"], "orca-max"),
    )
    assert not ordering_holds(tuple(swapped.values()))


def _as(run: MemoryShares, reservation: Reservation) -> MemoryShares:
    return replace(run, reservation=reservation)


def test_the_section_renders_ours_beside_the_papers(
    runs: dict[str, MemoryShares], workload: Workload
) -> None:
    blocks = figure2_section(workload, list(runs.values()), "kvsched figure2")
    text = to_markdown(blocks)
    ours = runs["orca-max"].share("internal fragmentation")
    assert re.search(
        rf"\| Orca \(Max\) +\| internal fragmentation +\| +{100 * ours:.1f} \| 57\.3 ", text
    )
    assert "holds in this run" in text
    assert "<table>" in to_html(blocks, "t")


def test_the_command_prints_the_section_writes_it_and_refuses_bad_sizes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["figure2", "--requests", "100", "--seed", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "kvsched figure2 --requests 100 --seed 2" in out
    assert (tmp_path / "report.md").read_text().strip() == out.strip()
    assert (tmp_path / "report.html").exists()
    assert main(["figure2", "--requests", "0"]) == 2
    assert "--requests: must be a positive integer" in capsys.readouterr().err
    assert main(["figure2", "--requests", "20"]) == 2  # all fit at once: nothing waits
    assert "no request ever waited" in capsys.readouterr().err


def test_the_docs_quote_the_commands_figures(
    runs: dict[str, MemoryShares], workload: Workload
) -> None:
    printed = to_markdown(figure2_section(workload, list(runs.values()), "kvsched figure2"))
    page = (ROOT / "docs" / "figure2.md").read_text()
    quoted = re.search(
        r"<!-- kvsched figure2: begin -->\n(.*)<!-- kvsched figure2: end -->", page, re.S
    )
    assert quoted is not None, "docs/figure2.md lost its markers"
    assert quoted.group(1).count("\n| ") >= 20, "docs/figure2.md lost its tables"
    assert quoted.group(1).strip() in printed, "rerun `kvsched figure2` and paste its output"
