"""The monitor's token checks: who may compute KV and produce a token (3.4; eventlog.md 4.1).

A request's KV tokens are what it computed or took from the prefix cache since it was last
admitted; its output tokens are what it produced since it arrived. DEC-2: only the batch computes
or produces. DEC-1: at most one token per request per iteration (exactly one in the lesson
model), and never KV for more tokens than the request has. DEC-3: a token comes from KV computed
in the same iteration that covers the prompt and every earlier token.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Container, Iterable, Mapping

from kvsched.checks.monitor.findings import Finding
from kvsched.checks.monitor.requests import RequestLedger
from kvsched.reference.record import lesson_computed
from kvsched.spec.events import IterationEvent
from kvsched.spec.vocabulary import RUNNING


def computed_tokens(ledger: RequestLedger, event: IterationEvent) -> Mapping[str, int]:
    """Tokens computed per request: the event's, or the lesson model's (3.3, 3.4)."""
    if event.computed is not None:
        return event.computed
    return lesson_computed(ledger.live, ledger.active.keys(), event.admitted, event.decoded)


def check_tokens(
    ledger: RequestLedger, n: int, event: IterationEvent, computed: Mapping[str, int]
) -> Finding | None:
    """DEC-2, DEC-1, DEC-3 for the iteration's tokens and KV; then count them into the ledger.

    Each rule is first tested over the whole batch at once (set inclusion, C's loops); the
    request-by-request pass that names the request at fault runs only when that test fails."""
    decoded, cached = event.decoded, event.cached
    active, tokens = ledger.active.keys(), set(decoded)
    if not (
        len(tokens) == len(decoded)
        and active >= tokens
        and active >= computed.keys()
        and active >= cached.keys()
    ):
        finding = _who_may(ledger, n, Counter(decoded), computed, cached)
        if finding is not None:
            return finding
    # Past this point no request produced twice: ``decoded`` lists each token's request once.
    if event.computed is None and len(decoded) != len(ledger.active):
        finding = _everyone_decodes(ledger, n, tokens, event)
        if finding is not None:
            return finding
    records = ledger.records
    if not cached and _all_hold(ledger, tokens, computed):
        records.count(computed, cached, decoded)
        return None
    wrong_kv = _from_computed_kv(ledger, n, decoded, computed, cached)
    # A token past the output length needs an unfinished request at its last token, which the
    # completion check (REQ-2) reports in that iteration already.
    records.count(computed, cached, decoded)
    if wrong_kv is not None:
        # Counted first: checking on (--all-findings) must not blame the rest of the batch for
        # KV and tokens the ledger missed.
        return wrong_kv
    live = ledger.live
    for amounts in (computed, cached):
        for rid, amount in amounts.items():
            record = live.get(rid)
            if amount and record is not None and record.kv > record.known():
                message = (
                    f"request {rid!r} has KV for {record.kv} tokens by iteration {n} but "
                    f"only {record.known()} exist (its prompt plus its output so far)"
                    f"{ledger.fold_hint(rid)}"
                )
                return Finding("DEC-1", n, message, requests=(rid,))
    return None


def _all_hold(ledger: RequestLedger, tokens: Collection[str], computed: Mapping[str, int]) -> bool:
    """Whether DEC-3 and DEC-1 hold for an iteration with no prefix hit, in one pass that moves
    no count: most iterations, which then need neither the passes that word a finding nor their
    order. Each request that decoded must have computed (DEC-3); DEC-1 counts the token it just
    produced into what exists (:meth:`RequestLedger.known`, inlined)."""
    live = ledger.live
    decoding = 0
    for rid, amount in computed.items():
        record = live[rid]  # DEC-2 has shown every request that computed is in the batch
        have, known = record.kv + amount, record.known()
        if rid in tokens:
            if not amount or have < known:  # DEC-3
                return False
            known += 1
            decoding += 1
        if amount and have > known:  # DEC-1
            return False
    return decoding == len(tokens)


def _who_may(
    ledger: RequestLedger,
    n: int,
    tokens: Counter[str],
    computed: Mapping[str, int],
    cached: Mapping[str, int],
) -> Finding | None:
    """DEC-2: only the batch produces tokens or computes KV; DEC-1: one token at most."""
    for rid, count in tokens.items():
        if ledger.status(rid) is not RUNNING:
            message = (
                f"request {rid!r} produced a token in iteration {n} but is "
                f"{ledger.where(rid)}, not in the batch"
            )
            return Finding("DEC-2", n, message, requests=(rid,))
        if count > 1:
            message = (
                f"request {rid!r} produced {count} tokens in iteration {n}; a request produces "
                "at most one per iteration"
            )
            return Finding("DEC-1", n, message, requests=(rid,))
    for what, amounts in (("computed", computed), ("took cached", cached)):
        for rid, amount in amounts.items():
            if amount and ledger.status(rid) is not RUNNING:
                message = (
                    f"request {rid!r} {what} KV for {amount} tokens in iteration {n} but is "
                    f"{ledger.where(rid)}, not in the batch"
                )
                return Finding("DEC-2", n, message, requests=(rid,))
    return None


def _everyone_decodes(
    ledger: RequestLedger, n: int, tokens: Container[str], event: IterationEvent
) -> Finding | None:
    """The lesson model (3.4): every active request produces exactly one token."""
    for rid in ledger.active:
        if rid in tokens:
            continue
        if rid not in event.page_tables:
            message = (
                f"request {rid!r} is in the batch but got neither a token nor a page table in "
                f"iteration {n}: the scheduler lost it"
            )
            return Finding("REQ-2", n, message, requests=(rid,))
        message = (
            f"request {rid!r} is in the batch but produced no token in iteration {n}; in the "
            "lesson model every active request decodes exactly one token per iteration (3.4)"
        )
        return Finding("DEC-1", n, message, requests=(rid,))
    return None


def _from_computed_kv(
    ledger: RequestLedger,
    n: int,
    decoded: Iterable[str],
    computed: Mapping[str, int],
    cached: Mapping[str, int],
) -> Finding | None:
    """DEC-3: the token's KV was computed now and covers everything before it."""
    live = ledger.live
    for rid in decoded:
        now = computed.get(rid, 0)
        if not now:
            message = (
                f"request {rid!r} produced a token in iteration {n}, in which it computed no "
                "token: output needs at least one computed position"
            )
            return Finding("DEC-3", n, message, requests=(rid,))
        record = live[rid]
        have = record.kv + now + cached.get(rid, 0)
        if have < record.known():
            message = (
                f"request {rid!r} produced a token in iteration {n} with KV for {have} of its "
                f"{record.known()} tokens: a prefill short of the prompt's end produces no "
                f"token{ledger.fold_hint(rid)}"
            )
            return Finding("DEC-3", n, message, requests=(rid,))
    return None
