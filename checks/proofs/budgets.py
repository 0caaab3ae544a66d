"""Z3 budgets in resource units (``rlimit``), never in seconds (spec/proofs.md, section 1).

A wall-clock timeout makes a verdict depend on the machine's load: the same proof is *proved* at
rest and *not proved* beside a busy CI job. Z3's resource counter ticks with the work it does,
not with time, so a budget in its units gives the same verdict on any load. Each check gets the
budget afresh (``solver.set("rlimit", n)`` counts from where the counter stands when the check
starts); a bounded search over many depths shares one budget across its checks, as the
searches' ``rlimit`` arguments say.

Each budget is at least 10 times the most that one query (or one whole search) of its kind
consumed at the default sizes on z3-solver 5.4.1; the induction budget also covers
``--requests 32`` about 10 times. Measured with a wrapper around ``z3.Solver.check`` that read
the ``rlimit count`` statistic before and after every check, during
``run_proofs(ProofPlan(broken=True))``, ``run_engine_proofs(EnginePlan())`` and the teaching
questions; ``kvsched prove --json`` prints the units of every line (the sum over its queries),
and ``pytest -m slow tests/nocover/test_z3_budgets.py`` checks the headroom again. The largest
single consumption, in units (about 4 to 8 million a second on the project's machine, at rest):

====================  =========================================  ==============
budget                largest consumption measured               budget
====================  =========================================  ==============
``lemma``             118,460 (new-page-at-boundary)             10,000,000
``induction``         1,764,312 (12 requests); 18,671,820 at     400,000,000
                      24, 33,143,580 at 32 (dominance)
``bmc``               6,346,858 (LIVE-1, 3 requests); a broken   100,000,000
                      scheduler's search 572,601
``engine_induction``  6,768,823 (safety, prefill-first, 2 req.)  200,000,000
``engine_search``     66,305,257 (no thrash, prefill-first,      1,000,000,000
                      3 page sizes, horizon 4)
``teaching``          58,342,633 (a reconstruction question)     600,000,000
====================  =========================================  ==============

The same command spends the same units in every run, whatever the load (a query's cost can move
a little with what the same process asked Z3 before it, which the headroom absorbs).
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Budgets:
    """Z3 resource units (``rlimit``) per query, or per search where a field says so."""

    lemma: int = 10_000_000
    """Each page lemma (:mod:`.pages`)."""
    induction: int = 400_000_000
    """Each query of the reference inductive proofs and of the dominance proof."""
    bmc: int = 100_000_000
    """The LIVE-1 bounded model check, and each broken scheduler's whole search."""
    engine_induction: int = 200_000_000
    """Each query of the engine model's inductions."""
    engine_search: int = 1_000_000_000
    """Each whole LIVE-3 search of the engine model, over its page sizes and depths."""
    teaching: int = 600_000_000
    """Each check of the teaching trace's reconstruction (``kvsched reconstruct``)."""

    def scaled(self, factor: float) -> Budgets:
        """Every budget times ``factor`` (``kvsched prove --rlimit-scale``), at least 1 unit:
        Z3 reads an rlimit of 0 as no limit at all."""
        if not factor > 0:
            raise ValueError(f"a budget scale must be > 0, got {factor}")

        scaled = {f.name: max(1, round(getattr(self, f.name) * factor)) for f in fields(self)}
        return Budgets(**scaled)


DEFAULT = Budgets()
