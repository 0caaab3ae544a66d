"""Workloads as Z3 terms, and the page function the model counts pages with.

A :class:`SymbolicWorkload` is a workload whose numbers are Z3 terms: fresh constants when a
proof ranges over every workload of some size, or values when the model replays a real workload.
Its requests are numbered in *admission order* (by arrival, ties in declared order), the order
the reference's waiting queue keeps; spec/proofs.md (section 3) says why every workload is one of
these after renaming its requests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from kvsched.checks.proofs.lesson_scope import workload_scope
from kvsched.checks.proofs.page_lemmas import ceil_pages, lemma_instances
from kvsched.spec.workload import Limits, Request, Workload, arrival_order


@dataclass(frozen=True)
class PageFunction:
    """``pages(tokens)``: the reference's ceiling for a page size (a value or a Z3 constant), or
    an uninterpreted function the transition constrains only by instances of the page lemmas."""

    apply: Callable[[Any], Any]
    page_size: Any = None
    """The page size as a Z3 term; None for the uninterpreted function (any page size)."""

    def __call__(self, tokens: Any) -> Any:
        return self.apply(tokens)


def exact_pages(page_size: Any) -> PageFunction:
    """The reference's ``ceil(tokens / page_size)``; ``page_size`` an int or a Z3 integer."""
    size = z3.IntVal(page_size) if isinstance(page_size, int) else page_size
    return PageFunction(lambda tokens: ceil_pages(tokens, size), page_size=size)


def abstract_pages() -> PageFunction:
    return PageFunction(z3.Function("pages", z3.IntSort(), z3.IntSort()))


@dataclass(frozen=True)
class SymbolicWorkload:
    """A workload whose numbers are Z3 terms: fresh constants (proofs) or values (cross-checks)."""

    arrival: tuple[Any, ...]
    prompt: tuple[Any, ...]
    output: tuple[Any, ...]
    batch_limit: Any
    pool_pages: Any
    pages: PageFunction
    ids: tuple[str, ...] = ()
    """Request ids by index, for a concrete workload."""

    @property
    def size(self) -> int:
        return len(self.arrival)

    def peak(self, i: int) -> Any:
        """Peak pages of request i: its prompt plus all its output (section 1)."""
        return self.pages(self.prompt[i] + self.output[i])

    def last_arrival(self) -> Any:
        return self.arrival[-1]  # numbered in admission order, so the last arrives last

    def valid(self) -> list[Any]:
        """Section 1: lengths and limits in range, every request fits the pool at its peak."""
        facts = [self.batch_limit >= 1, self.pool_pages >= 1]
        if self.pages.page_size is not None:
            facts.append(self.pages.page_size >= 1)
        # Numbered in admission order: every workload is one of these after renaming its
        # requests, since the reference reads declared order only to break arrival ties.
        facts += [self.arrival[i] <= self.arrival[i + 1] for i in range(self.size - 1)]
        for i in range(self.size):
            facts += [self.arrival[i] >= 0, self.prompt[i] >= 0, self.output[i] >= 1]
            facts.append(self.peak(i) <= self.pool_pages)
            facts += lemma_instances(self.pages, self.prompt[i], self.prompt[i] + self.output[i])
        return facts


def symbolic_workload(size: int, pages: PageFunction, tag: str = "w") -> SymbolicWorkload:
    def ints(name: str) -> tuple[Any, ...]:
        return tuple(z3.Int(f"{tag}_{name}_{i}") for i in range(size))

    return SymbolicWorkload(
        arrival=ints("arrival"),
        prompt=ints("prompt"),
        output=ints("output"),
        batch_limit=z3.Int(f"{tag}_batch_limit"),
        pool_pages=z3.Int(f"{tag}_pool_pages"),
        pages=pages,
    )


def concrete_workload(workload: Workload) -> SymbolicWorkload:
    """The model of a real workload: requests in admission order, exact page arithmetic."""
    workload_scope(workload).require("the Z3 model")
    requests = arrival_order(workload.requests)  # the engine's own ordering (section 3.1)
    return SymbolicWorkload(
        arrival=tuple(z3.IntVal(r.arrival) for r in requests),
        prompt=tuple(z3.IntVal(r.prompt_tokens) for r in requests),
        output=tuple(z3.IntVal(r.output_tokens) for r in requests),
        batch_limit=z3.IntVal(workload.limits.batch_limit),
        pool_pages=z3.IntVal(workload.limits.pool_pages),
        pages=exact_pages(workload.limits.page_size),
        ids=tuple(r.id for r in requests),
    )


def workload_from_model(model: Any, w: SymbolicWorkload, name: str) -> Workload:
    """The workload Z3 chose for ``w`` (a counterexample or a synthesized one), ids r0, r1, ...

    ``w`` must use exact pages: the uninterpreted page function has no page size to write down.
    """
    if w.pages.page_size is None:
        raise ValueError("a workload with abstract pages has no page size")

    def value(term: Any) -> int:
        return int(model.eval(term, model_completion=True).as_long())

    requests = tuple(
        Request(f"r{i}", value(w.arrival[i]), value(w.prompt[i]), value(w.output[i]))
        for i in range(w.size)
    )
    limits = Limits(value(w.batch_limit), value(w.pages.page_size), value(w.pool_pages))
    return Workload(name=name, limits=limits, requests=requests)
