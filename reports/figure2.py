"""The vLLM paper's Figure 2 reproduced: the reservation family's KV memory, ours beside the
paper's (docs/figure2.md).

Every figure in "ours" is read off the runs (:func:`kvsched.reference.reservation.measure`);
the paper's come from :mod:`kvsched.spec.vllm_paper`. Sentences that compare the two compute what
they say, so a rerun that changes a figure changes the sentence with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean

from kvsched.reference.memory_use import MemoryShares
from kvsched.spec.vllm_paper import (
    MAX_MODEL_LEN,
    MEAN_OUTPUT_TOKENS,
    MEAN_PROMPT_TOKENS,
    PAPER,
    PUBLISHED_BATCH,
    PUBLISHED_SHARES,
    TOKEN_SLOTS,
    VLLM_UNSPLIT_REST,
)
from kvsched.spec.vocabulary import MEMORY_USES, Reservation
from kvsched.spec.workload import Workload

from . import numbers
from .render import Block, Bullets, Code, Heading, Paragraph, Table

SYSTEMS: dict[Reservation, str] = {
    "orca-max": "Orca (Max)",
    "orca-pow2": "Orca (Pow2)",
    "orca-oracle": "Orca (Oracle)",
    "vllm": "vLLM",
}
"""The paper's names for the members of the reservation family."""


def _pp(fraction: float) -> str:
    return f"{100 * fraction:.1f}"


def ordering_holds(runs: Sequence[MemoryShares]) -> bool:
    """The paper's ordering of token states: vLLM far above (at least twice) Orca (Oracle),
    then Pow2, then Max."""
    share = {run.reservation: run.share("token states") for run in runs}
    return (
        share["vllm"] >= 2 * share["orca-oracle"]
        and share["orca-oracle"] > share["orca-pow2"] > share["orca-max"]
    )


def figure2_section(workload: Workload, runs: Sequence[MemoryShares], command: str) -> list[Block]:
    """The section: set-up, the table beside the paper's, the breakdown, and the differences."""
    by = {run.reservation: run for run in runs}
    assert set(by) == set(SYSTEMS), sorted(by)
    if any(run.iterations == 0 for run in runs):
        raise ValueError("a run in which no request waited measured nothing")
    prompts = fmean(r.prompt_tokens for r in workload.requests)
    outputs = fmean(r.output_tokens for r in workload.requests)
    pool = by["vllm"].pool_slots
    blocks: list[Block] = [
        Heading("The vLLM paper's Figure 2: where KV memory goes"),
        Paragraph(
            f"{PAPER} measure how much of the KV cache holds token states under Orca's three "
            "ways of reserving memory and under vLLM's paging (their Figure 2). Here the same "
            f"four run on {numbers.counted(len(workload.requests), 'request')} with ShareGPT-"
            f"like lengths (drawn: mean {prompts:.1f} prompt and {outputs:.1f} output tokens; "
            f"the paper's {MEAN_PROMPT_TOKENS} and {MEAN_OUTPUT_TOKENS}), all waiting at "
            f"iteration 0, on a pool of {numbers.count(pool)} token slots (the paper's "
            f"{TOKEN_SLOTS / 1000:.1f}K for OPT-13B on an A100-40GB, in whole pages of "
            f"{workload.limits.page_size}). Shares are averaged over the iterations in which a "
            "request waited, when the pool is under full demand. Regenerate with:"
        ),
        Code(command),
        _shares_table(by),
        Paragraph(_ordering_words(by)),
        Heading("What fills the rest", 3),
        _breakdown_table(by),
        Heading("Why ours differ from the paper's", 3),
        Bullets(_differences(by, workload, prompts + outputs)),
    ]
    return blocks


def _shares_table(by: dict[Reservation, MemoryShares]) -> Table:
    rows = []
    for reservation, system in SYSTEMS.items():
        run, paper = by[reservation], PUBLISHED_SHARES[reservation]
        for use in MEMORY_USES:
            ours, theirs = run.share(use), paper[use]
            if theirs is None and reservation == "vllm" and use != "token states":
                shown, diff = f"({VLLM_UNSPLIT_REST} for all three)", ""
            elif theirs is None:
                shown, diff = "—", ""
            else:
                shown, diff = f"{theirs:.1f}", f"{100 * ours - theirs:+.1f}"
            rows.append((system, use, _pp(ours), shown, diff))
    return Table(("system", "KV memory holds", "ours, %", "paper, %", "ours - paper"), tuple(rows))


def _breakdown_table(by: dict[Reservation, MemoryShares]) -> Table:
    rows = tuple(
        (
            system,
            "—" if r == "vllm" else _pp(by[r].rounding / by[r].total),  # pages do not round
            _pp(by[r].free / by[r].total),
            f"{by[r].mean_batch:.2f}",
            f"{PUBLISHED_BATCH[r]:.2f}",
            numbers.count(by[r].preemptions),
            f"{numbers.count(by[r].iterations)} of {numbers.count(by[r].all_iterations)}",
        )
        for r, system in SYSTEMS.items()
    )
    headers = (
        "system",
        "buddy rounding, %",
        "free, %",
        "batched requests",
        "paper's (Fig. 13)",
        "preemptions",
        "iterations measured",
    )
    return Table(headers, rows)


def _ordering_words(by: dict[Reservation, MemoryShares]) -> str:
    shares = ", ".join(
        f"{system} {_pp(by[r].share('token states'))}%" for r, system in reversed(SYSTEMS.items())
    )
    verdict = "holds" if ordering_holds(tuple(by.values())) else "does **not** hold"
    return (
        "The paper's ordering of token states (vLLM far above Oracle, here at least twice it, "
        f"then Pow2, then Max) "
        f"{verdict} in this run: {shares}."
    )


def _differences(
    by: dict[Reservation, MemoryShares], workload: Workload, mean_length: float
) -> tuple[str, ...]:
    oracle, pow2, vllm = by["orca-oracle"], by["orca-pow2"], by["vllm"]
    largest = max(
        (abs(100 * by[r].share(u) - t), SYSTEMS[r], u)
        for r in SYSTEMS
        for u in MEMORY_USES
        if (t := PUBLISHED_SHARES[r][u]) is not None
    )
    page = workload.limits.page_size
    slack = (vllm.reserved + vllm.internal) / vllm.batched if vllm.batched else 0.0
    return (
        "The paper measured OPT-13B on a GPU serving the real ShareGPT trace under Poisson "
        "arrivals (its Figure 13 runs 2 requests/s), averaged over its experiment. This is a "
        "simulation: lengths drawn from a log-logistic shape with the paper's means (the "
        "dataset's shape is not known here), every request waiting from the start, each "
        "iteration counted once whatever its batch. A queue that sometimes empties leaves "
        "memory free, which the paper's average takes in and ours, measured only while "
        "requests wait, leaves out; on a GPU a larger batch's iteration takes longer, which an "
        "average over wall time would weigh.",
        f"The paper gives Orca (Oracle) no internal fragmentation, so the buddy allocator's "
        f"rounding of each chunk up to a power of two must sit in its external fragmentation & "
        f"other, and here it does: rounding is {_pp(oracle.rounding / oracle.total)}% of the "
        f"pool under Oracle and {_pp(pow2.rounding / pow2.total)}% under Pow2, free slots "
        f"{_pp(oracle.free / oracle.total)}% and {_pp(pow2.free / pow2.total)}%. Under Max "
        f"every chunk is {numbers.count(MAX_MODEL_LEN)} slots, already a power of two: no "
        f"rounding, and the free part is the pool's tail too small for another chunk.",
        f"A long request stays in the batch longer, so the time average weighs requests by "
        f"their length: a batched request holds a sequence of {vllm.mean_length_held:.0f} "
        f"tokens on average under vLLM ({by['orca-max'].mean_length_held:.0f} under Max), "
        f"against the workload's mean of {mean_length:.0f}. This is why token states and "
        "reservation take more of the pool than the mean lengths suggest, in the paper as here.",
        f"The paper gives vLLM's {VLLM_UNSPLIT_REST}% outside token states as one figure; "
        f"ours is {_pp(1 - vllm.share('token states'))}%, and it splits into reservation "
        f"(the unwritten slots of each request's last page, "
        f"{_pp(vllm.share('reservation'))}%), internal fragmentation (a last page past the "
        f"request's final token, {_pp(vllm.share('internal fragmentation'))}%) and free pages "
        f"({_pp(vllm.free / vllm.total)}%, the 1% that admission leaves free among them): "
        f"{slack:.1f} slots per batched request, under one page of {page}. Admission takes "
        "only a request's prompt pages, so the batch outgrows the pool and preemption by "
        f"recompute settles it ({numbers.count(vllm.preemptions)} times).",
        f"The largest difference is {largest[1]}'s {largest[2]}, {largest[0]:.1f} points. "
        "Which blocks a buddy allocator splits, and so how its holes fall, depends on the "
        "order requests come and go, which the paper's trace and arrivals set and ours do not "
        "copy; ours takes the lowest-offset block of the smallest fitting size.",
    )
