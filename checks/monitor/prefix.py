"""The monitor's prefix-cache rule: a hit takes only pages that hold that prefix (PAGE-6).

The workload names what each full page holds (spec/semantics.md, 1.1): page ``i`` of a request
holds ``(group, i)`` inside the request's shared prefix, else ``(request, i)``. A page taken
fresh into a table at index ``i`` is to hold that name, but it holds tokens of it only once its
request's KV reaches into it: a page reserved ahead and never computed holds nothing, a page
partly computed only its first tokens. So the monitor remembers, for every page, the name its
last writer gave it and who that writer is; how far the writer's KV reached is read from its
record (``RequestRecord.kv``) while it holds the page, and frozen when it lets the page go
(preempted or finished). A page taken by reference (``shared``) must hold the name the taker
expects at that position, and as many of its tokens as the hit claims, or the hit reads keys and
values nobody computed there: a page evicted and reused, a stale hash, or a page cached when it
was reserved. A hit's ``cached`` tokens must also lie within its shared pages.

Tables only grow at their end while a request runs, so a table's new pages are its last ones.
The work follows what an iteration changed: its allocations and hits, and the pages of a
request that lets its pages go. Reading a writer's KV when a hit comes, rather than naming
content as each token is computed, keeps the event-log checker's lazy counting whole: a record
it has not brought up to date yet shows less KV than was computed, never more, so its fast path
may decline a line that is clean, never take one that is not.
"""

from __future__ import annotations

from collections.abc import Mapping

from kvsched.checks.monitor.findings import Finding
from kvsched.reference.record import RequestRecord
from kvsched.spec.workload import Request, Workload

Name = tuple[str, str, int]


class PrefixContent:
    """What every page that ever held KV was written as, by whom, and how far it was filled."""

    def __init__(self, workload: Workload, enabled: bool) -> None:
        self.enabled = enabled
        self.page_size = workload.limits.page_size
        self.requests = {r.id: r for r in workload.requests}
        self.names: dict[int, Name] = {}
        """The name each page was last taken fresh for."""
        self.writers: dict[int, tuple[RequestRecord, int]] = {}
        """The record of the request writing each page it still holds, and the page's index in
        its table: the page holds what that record's KV reaches into."""
        self.filled: dict[int, int] = {}
        """Tokens computed into each page whose writer let it go, as they stood then."""
        self.written: dict[str, dict[int, None]] = {}
        """The pages each request writes, for freezing them when it lets them go."""

    def declare(self, request: Request) -> None:
        self.requests[request.id] = request

    def forget(self, rid: str) -> None:
        """``rid`` finished: its pages hold what its KV reached. A record the event-log checker
        counts lazily may show less KV than it computed; what it shows covers its prompt (a
        request decodes only after it), so every page a group shares reads full, and the
        pages short of their tokens are its own, which no later request may take."""
        self.requests.pop(rid, None)
        self.release(rid)

    def release(self, rid: str) -> None:
        """``rid`` lets its pages go (preempted or finished): their content is frozen."""
        if not self.enabled:
            return
        pages = self.written.pop(rid, None)
        if not pages:
            return
        writers, filled = self.writers, self.filled
        for page in pages:
            writer = writers.pop(page, None)
            if writer is not None:
                filled[page] = self._reach(writer[0].kv, writer[1])

    def held(self, page: int) -> int:
        """Tokens of its name ``page`` holds: computed into it, or 0."""
        writer = self.writers.get(page)
        if writer is not None:
            return self._reach(writer[0].kv, writer[1])
        return self.filled.get(page, 0)

    def _reach(self, kv: int, index: int) -> int:
        size = self.page_size
        tokens = kv - index * size
        return size if tokens > size else max(tokens, 0)

    def name(self, request: Request, index: int) -> Name:
        if request.prefix_group and (index + 1) * self.page_size <= request.prefix_tokens:
            return ("group", request.prefix_group, index)
        return ("request", request.id, index)

    def check(
        self,
        n: int,
        allocated: Mapping[str, tuple[int, ...]],
        tables: Mapping[str, tuple[int, ...]],
        hits: Mapping[str, tuple[int, ...]],
        cache: Mapping[str, int],
        records: Mapping[str, RequestRecord],
    ) -> Finding | None:
        """PAGE-6 for iteration ``n``'s hits (``hits`` the pages each request took by
        reference, ``cache`` the tokens it took from them), then record who writes the fresh
        pages of ``allocated``; ``tables`` holds the tables of the requests allocated,
        ``records`` the live requests' records, whose KV says how far each page was filled."""
        if not self.enabled:
            return None
        size = self.page_size
        for rid, new in allocated.items():
            table = tables.get(rid, ())
            request = self.requests.get(rid)
            record = records.get(rid)
            if request is None or record is None:
                continue
            shared = set(hits.get(rid, ()))
            first = len(table) - len(new)
            cached = cache.get(rid, 0)
            claimed_from = -1  # where the hit's tokens start: at its first shared page
            written = self.written.setdefault(rid, {})
            for index in range(max(first, 0), len(table)):
                page, expected = table[index], self.name(request, index)
                if page not in shared:
                    self.names[page] = expected
                    self.writers[page] = (record, index)
                    self.filled.pop(page, None)
                    written[page] = None
                    continue
                if claimed_from < 0:
                    claimed_from = index * size
                held = self.names.get(page)
                tokens = self.held(page) if held is not None else 0
                claimed = min(size, claimed_from + cached - index * size)
                if held != expected or tokens == 0 or tokens < claimed:
                    at, counts = (page, index), (tokens, claimed)
                    return self._wrong_hit(n, rid, at, held, expected, counts)
            if cached > len(shared) * size:
                message = (
                    f"request {rid!r} took {cached} tokens from the prefix cache in iteration "
                    f"{n} but only {len(shared)} shared pages of {size} tokens hold them"
                )
                return Finding("PAGE-6", n, message, requests=(rid,))
        return None

    def _wrong_hit(
        self,
        n: int,
        rid: str,
        at: tuple[int, int],
        held: Name | None,
        expected: Name,
        tokens: tuple[int, int],
    ) -> Finding:
        (page, index), (computed, claimed) = at, tokens
        taken = f"request {rid!r} took page {page} from the prefix cache in iteration {n} as page "
        if held is None:
            what = "no KV yet"
        else:
            kind = "group" if held[0] == "group" else "request"
            what = f"page {held[2]} of {kind} {held[1]!r}"
        if held != expected:
            message = (
                f"{taken}{index} of its prompt, but the page holds {what}: the hit reads another "
                "request's keys and values (an evicted page reused, or a stale hash)"
            )
        else:  # the right name, but its KV was never (or not all) computed into it
            message = (
                f"{taken}{index} of its prompt, claiming {max(claimed, 0)} of its tokens, but only "
                f"{computed} were ever computed into it, as {what}: the hit reads keys and values "
                "nobody computed (a page cached when it was reserved, not when it was written)"
            )
        return Finding("PAGE-6", n, message, requests=(rid,), pages=(page,))
