"""The monitor's prefix-cache rule: a hit takes only pages that hold that prefix (PAGE-6).

The workload names what each full page holds (spec/semantics.md, 1.1): page ``i`` of a request
holds ``(group, i)`` inside the request's shared prefix, else ``(request, i)``. The monitor
remembers the name of the content every page last received, when it was taken fresh into a table
(the request writes it); a page taken by reference (``shared``) must hold the name the taker
expects at that position, or the hit reads another request's keys and values: a page evicted and
reused, or a hash that collided. A hit's ``cached`` tokens must also lie within its shared pages.
Tables only grow at their end while a request runs, so a table's new pages are its last ones.
"""

from __future__ import annotations

from collections.abc import Mapping

from kvsched.checks.monitor.findings import Finding
from kvsched.spec.workload import Request, Workload

Name = tuple[str, str, int]


class PrefixContent:
    """The content name of every page that ever held KV, kept from the events' allocations."""

    def __init__(self, workload: Workload, enabled: bool) -> None:
        self.enabled = enabled
        self.page_size = workload.limits.page_size
        self.requests = {r.id: r for r in workload.requests}
        self.names: dict[int, Name] = {}

    def declare(self, request: Request) -> None:
        self.requests[request.id] = request

    def forget(self, rid: str) -> None:
        self.requests.pop(rid, None)

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
    ) -> Finding | None:
        """PAGE-6 for iteration ``n``'s hits (``hits`` the pages each request took by
        reference, ``cache`` the tokens it took from them), then record what the fresh pages of
        ``allocated`` now hold; ``tables`` holds the tables of the requests allocated."""
        if not self.enabled:
            return None
        for rid, new in allocated.items():
            table = tables.get(rid, ())
            request = self.requests.get(rid)
            if request is None:
                continue
            shared = set(hits.get(rid, ()))
            first = len(table) - len(new)
            for index in range(max(first, 0), len(table)):
                page, expected = table[index], self.name(request, index)
                if page not in shared:
                    self.names[page] = expected
                    continue
                held = self.names.get(page)
                if held != expected:
                    return self._wrong_hit(n, rid, page, index, held)
            cached = cache.get(rid, 0)
            if cached > len(shared) * self.page_size:
                message = (
                    f"request {rid!r} took {cached} tokens from the prefix cache in iteration "
                    f"{n} but only {len(shared)} shared pages of {self.page_size} tokens hold them"
                )
                return Finding("PAGE-6", n, message, requests=(rid,))
        return None

    def _wrong_hit(self, n: int, rid: str, page: int, index: int, held: Name | None) -> Finding:
        what = (
            "no KV yet"
            if held is None
            else f"page {held[2]} of {'group' if held[0] == 'group' else 'request'} {held[1]!r}"
        )
        message = (
            f"request {rid!r} took page {page} from the prefix cache in iteration {n} as page "
            f"{index} of its prompt, but the page holds {what}: the hit reads another request's "
            "keys and values (an evicted page reused, or a stale hash)"
        )
        return Finding("PAGE-6", n, message, requests=(rid,), pages=(page,))
