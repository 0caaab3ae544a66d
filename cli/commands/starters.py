"""The files ``kvsched init`` writes: one starter per kind of user, each short enough to read.

Each starter runs as written and says, in its docstring, what ``kvsched check`` answers for it;
tests/cover/test_init.py holds them to it.
"""

from __future__ import annotations

LEARNER = '''\
"""A start on the lesson's exercise (kvsched's spec/learner.md says what each function must do).

As written, this file runs and fails: `kvsched check solution.py` reports PAGE-1 (TODO 1: a
partial page gets no page), and, as nobody is admitted (TODO 2), LIVE-2 under static batching
and BATCH-3 under continuous batching (a slot left idle while the head of the queue fits). Fill
in the three TODOs, in order, and check again after each one; the check passes when all three
are done.
"""


def allocate_kv_pages(tokens, page_size=16):
    """Pages, capacity and wasted slots for `tokens` tokens in pages of `page_size` slots."""
    pages = tokens // page_size  # TODO 1: a partial page needs a whole page (ceiling division)
    capacity = pages * page_size
    return {"pages": pages, "capacity": capacity, "wastedSlots": capacity - tokens}


def schedule_iteration(state, limits, policy):
    """One iteration: admit, grow page tables, decode one token each, finish and free."""
    page_size = limits["page_size"]
    running, free_pages = state["running"], state["free_pages"]

    # TODO 2: admission. Move requests from state["waiting"] (first come, first served) to
    # running while the batch has room (limits["batch_limit"]) and the pool has pages for each
    # one's peak; static batching admits only into an empty batch, continuous at any time.

    # Page growth: room for the context including this iteration's token.
    for request in running:
        context = request["prompt_tokens"] + request["generated"] + 1
        missing = allocate_kv_pages(context, page_size)["pages"] - len(request["pages"])
        for _ in range(missing):
            request["pages"].append(free_pages.pop(0))

    # Decode: exactly one token per active request.
    for request in running:
        request["generated"] += 1

    # TODO 3: completion. A request whose "generated" reached its "output_tokens" moves to
    # state["finished"] and its pages go back to free_pages.
    return state
'''

SCHEDULER = '''\
"""A continuous-batching scheduler behind kvsched's scheduler protocol (spec/protocol.py).

First come, first served; a request is admitted when a batch slot and the pages of its peak
(prompt plus output) are free, and takes its pages as its context grows. As written it passes:
`kvsched check scheduler.py:MyScheduler` reports every invariant holds. Change it into your
design, declare what differs with TargetProperties (spec/properties.py), and check again.
"""

from __future__ import annotations

from collections import deque

from kvsched.spec.protocol import ModelOutput, ScheduledBatch, StepOutcome
from kvsched.spec.workload import Limits, Request


class MyScheduler:
    policy = "continuous"

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.free = list(range(limits.pool_pages))
        self.waiting: deque[Request] = deque()
        self.running: dict[str, Request] = {}
        self.tables: dict[str, list[int]] = {}
        self.generated: dict[str, int] = {}

    def pages_for(self, tokens: int) -> int:
        return -(-tokens // self.limits.page_size)  # ceiling division

    def add_request(self, request: Request) -> None:
        self.waiting.append(request)

    def schedule(self) -> ScheduledBatch:
        running = self.running.values()
        committed = sum(self.pages_for(r.prompt_tokens + r.output_tokens) for r in running)
        admitted = []
        while self.waiting and len(self.running) < self.limits.batch_limit:
            head = self.waiting[0]
            peak = self.pages_for(head.prompt_tokens + head.output_tokens)
            if committed + peak > self.limits.pool_pages:
                break  # nobody overtakes the head of the queue
            self.waiting.popleft()
            self.running[head.id], self.tables[head.id], self.generated[head.id] = head, [], 0
            committed += peak
            admitted.append(head.id)
        for rid, request in self.running.items():  # room for this iteration's token
            context = request.prompt_tokens + self.generated[rid] + 1
            while len(self.tables[rid]) < self.pages_for(context):
                self.tables[rid].append(self.free.pop(0))
        tables = {rid: tuple(pages) for rid, pages in self.tables.items()}
        return ScheduledBatch(tuple(admitted), tuple(self.running), tables)

    def update_from_output(self, output: ModelOutput) -> StepOutcome:
        finished, freed = [], {}
        for rid, request in list(self.running.items()):
            self.generated[rid] += output.tokens.get(rid, 0)
            if self.generated[rid] >= request.output_tokens:
                finished.append(rid)
                freed[rid] = tuple(self.tables.pop(rid))
                self.free.extend(freed[rid])
                del self.running[rid]
        return StepOutcome(tuple(finished), freed, len(self.free))
'''

LOG = '''\
"""Write an event log the way an engine would, for `kvsched check` to judge offline.

A toy engine serves three requests with continuous batching and writes one JSON line per
iteration (kvsched's spec/eventlog.md, section 8): what it admitted, the pages it allocated, the
KV it computed, the tokens it produced, what finished and the pages it freed. As written, its log
passes: `python record.py`, then `kvsched check run.jsonl` (run.jsonl is written beside this
file) reports that every invariant holds. Emit the same lines from your engine's scheduler step
instead of from `serve`.
"""

import json
from pathlib import Path

LIMITS = {"batch_limit": 2, "page_size": 4, "pool_pages": 8}
REQUESTS = [
    {"id": "a", "arrival": 0, "prompt_tokens": 3, "output_tokens": 4},
    {"id": "b", "arrival": 0, "prompt_tokens": 6, "output_tokens": 2},
    {"id": "c", "arrival": 1, "prompt_tokens": 2, "output_tokens": 3},
]


def pages_for(tokens):
    return -(-tokens // LIMITS["page_size"])


def serve(log):
    free = list(range(LIMITS["pool_pages"]))
    waiting, running, tables, generated = [], [], {}, {}
    arrivals = sorted(REQUESTS, key=lambda r: r["arrival"])
    iteration = 0
    while arrivals or waiting or running:
        iteration += 1
        ops = []
        while arrivals and arrivals[0]["arrival"] < iteration:  # arrived before this iteration
            waiting.append(arrivals.pop(0))
        committed = sum(pages_for(r["prompt_tokens"] + r["output_tokens"]) for r in running)
        while waiting and len(running) < LIMITS["batch_limit"]:
            head = waiting[0]
            peak = pages_for(head["prompt_tokens"] + head["output_tokens"])
            if committed + peak > LIMITS["pool_pages"]:
                break
            running.append(waiting.pop(0))
            tables[head["id"]], generated[head["id"]] = [], 0
            committed += peak
            ops.append(["admit", head["id"]])
        for r in running:  # pages for the context including this iteration's token
            need = pages_for(r["prompt_tokens"] + generated[r["id"]] + 1) - len(tables[r["id"]])
            if need:
                new, free[:need] = free[:need], []
                tables[r["id"]] += new
                ops.append(["alloc", r["id"], new])
        for r in running:  # the prompt plus the first token on admission, one token after
            computed = r["prompt_tokens"] + 1 if generated[r["id"]] == 0 else 1
            ops += [["compute", r["id"], computed], ["token", r["id"]]]
            generated[r["id"]] += 1
        for r in [r for r in running if generated[r["id"]] == r["output_tokens"]]:
            running.remove(r)
            free += tables[r["id"]]
            ops += [["finish", r["id"]], ["free", r["id"], tables.pop(r["id"])]]
        line = {"type": "iteration", "iteration": iteration, "ops": ops, "free_pages": len(free)}
        log.write(json.dumps(line) + "\\n")


if __name__ == "__main__":
    workload = {"format": 1, "name": "starter", "limits": LIMITS, "requests": REQUESTS}
    header = {
        "type": "header",
        "format": "kvsched-eventlog",
        "version": 2,
        "workload": workload,
        "target": {"policy": "continuous"},
    }
    path = Path(__file__).with_name("run.jsonl")
    with path.open("w") as log:
        log.write(json.dumps(header) + "\\n")
        serve(log)
    print(f"wrote {path}; now type: kvsched check {path}")
'''
