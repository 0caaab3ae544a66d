"""The monitor's prefix-cache rule: a hit takes only pages that hold that prefix (PAGE-6).

The workload names what each full page holds (spec/semantics.md, 1.1): page ``i`` of a request
holds ``(group, i)`` inside the request's shared prefix, else ``(request, i)``. A page taken
fresh into a table at index ``i`` is to hold that name, but it holds tokens of it only once its
request's KV reaches into it: a page reserved ahead and never computed holds nothing, a page
partly computed only its first tokens. So the monitor remembers, for every page, the record of
its last writer and the page's index in that writer's table, which together name it. How far
the writer's KV reached is read from its record (``RequestRecord.kv``), which stops moving once
the request finishes; a preemption starts that KV again from nothing, so it freezes the pages
its request wrote first. A page taken by reference (``shared``) must hold the name the taker
expects at that position, and as many of its tokens as the hit claims, or the hit reads keys and
values nobody computed there: a page evicted and reused, a stale hash, or a page cached when it
was reserved. A hit's ``cached`` tokens must also lie within its shared pages.

Tables only grow at their end while a request runs, so a table's new pages are its last ones.
The work follows what an iteration changed: its allocations and hits, and the pages of a
request preempted. Reading a writer's KV when a hit comes, rather than naming content as each
token is computed, keeps the event-log checker's lazy counting whole: a record it has not
brought up to date yet shows less KV than was computed, never more, so its fast path may
decline a line that is clean, never take one that is not. A lazy record that finishes keeps the
KV it showed then; that covers its prompt (a request decodes only after it), so every page a
group shares reads full, and the pages short of their tokens are its own, which no later
request may take.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kvsched.checks.monitor.findings import Finding
from kvsched.reference.record import RequestRecord, as_dict
from kvsched.spec.workload import Request

Name = tuple[str, str, int]


class PrefixContent:
    """What every page that ever held KV was written as, by whom, and how far it was filled."""

    def __init__(self, page_size: int, enabled: bool) -> None:
        self.enabled = enabled
        self.page_size = page_size
        self.writers: dict[int, tuple[RequestRecord, int]] = {}
        """The record of the request that last took each page fresh, and the page's index in
        its table: the page holds what that record's KV reaches into. A finished request's
        record no longer moves, so its pages keep what it computed without a copy."""
        self.frozen: dict[int, tuple[Request, int, int]] = {}
        """For each page whose writer was preempted since: the writer's request, the page's
        index and the tokens computed into it then (the record's KV starts again from 0)."""

    def release(self, record: RequestRecord, table: Sequence[int]) -> None:
        """``record``'s request is preempted, its table ``table`` (the record's, or as the
        event-log checker's fast path keeps it): the pages it wrote hold what its KV reached."""
        if not self.enabled:
            return
        writers, frozen = self.writers, self.frozen
        for page in table:
            writer = writers.get(page)
            if writer is not None and writer[0] is record:
                del writers[page]
                frozen[page] = (record.request, writer[1], self._reach(record.kv, writer[1]))

    def content(self, page: int) -> tuple[Request, int, int] | None:
        """Who wrote ``page``, at which index of its table, and how many tokens of it: ``None``
        if no request ever took it fresh."""
        writer = self.writers.get(page)
        if writer is not None:
            record, index = writer
            return record.request, index, self._reach(record.kv, index)
        return self.frozen.get(page)

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
        # The event-log checker's fast path passes dicts, on every line that allocates.
        return self._check(
            n, as_dict(allocated), as_dict(tables), as_dict(hits), as_dict(cache), as_dict(records)
        )

    def _check(
        self,
        n: int,
        allocated: dict[str, tuple[int, ...]],
        tables: dict[str, tuple[int, ...]],
        hits: dict[str, tuple[int, ...]],
        cache: dict[str, int],
        records: dict[str, RequestRecord],
    ) -> Finding | None:
        size, writers = self.page_size, self.writers
        for rid, new in allocated.items():
            table = tables.get(rid, ())
            record = records.get(rid)
            if record is None:
                continue
            first = len(table) - len(new)
            hit = hits.get(rid) if hits else None  # most lines take no page by reference
            cached = cache.get(rid, 0) if cache else 0
            if not hit and not cached:  # the usual allocation: fresh pages, named by their writer
                for index in range(max(first, 0), len(table)):
                    writers[table[index]] = (record, index)
                continue
            shared, request = set(hit or ()), record.request
            claimed_from = -1  # where the hit's tokens start: at its first shared page
            for index in range(max(first, 0), len(table)):
                page = table[index]
                if page not in shared:
                    writers[page] = (record, index)
                    continue
                if claimed_from < 0:
                    claimed_from = index * size
                expected, content = self.name(request, index), self.content(page)
                if content is None:
                    held, tokens = None, 0
                else:
                    held, tokens = self.name(content[0], content[1]), content[2]
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
