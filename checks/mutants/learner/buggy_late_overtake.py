"""A solution whose admission lets later requests overtake the head, once 100 have finished.

From the 101st completion on, a head of the queue that does not fit is skipped instead of waited
for, and smaller requests behind it are admitted first: first come, first served is broken only
in a long run. ``kvsched check`` finds it on the realistic families, where a request that needs
many pages waits at the head of a crowded queue.
"""


def allocate_kv_pages(tokens, page_size=16):
    """Pages, capacity and wasted slots for ``tokens`` tokens in pages of ``page_size`` slots."""
    # bool is a subclass of int, but True is not a token count.
    if isinstance(tokens, bool) or not isinstance(tokens, int):
        raise TypeError(f"tokens must be an int, got {tokens!r}")
    if isinstance(page_size, bool) or not isinstance(page_size, int):
        raise TypeError(f"page_size must be an int, got {page_size!r}")
    if tokens < 0:
        raise ValueError(f"tokens must be >= 0, got {tokens}")
    if page_size < 1:
        raise ValueError(f"page_size must be >= 1, got {page_size}")
    pages = (tokens + page_size - 1) // page_size  # ceiling division
    capacity = pages * page_size
    return {"pages": pages, "capacity": capacity, "wastedSlots": capacity - tokens}


def peak_pages(request, page_size):
    """Pages a request holds in its last iteration: prompt plus every output token."""
    return allocate_kv_pages(request["prompt_tokens"] + request["output_tokens"], page_size)[
        "pages"
    ]


def schedule_iteration(state, limits, policy):
    """Run one iteration: admit, grow page tables, decode one token each, finish and free."""
    page_size = limits["page_size"]
    waiting, running = state["waiting"], state["running"]
    finished, free_pages = state["finished"], state["free_pages"]

    # 1. Admission: static batching admits only into an empty batch; continuous always.
    if policy == "continuous" or not running:
        committed = sum(peak_pages(r, page_size) for r in running)
        while waiting and len(running) < limits["batch_limit"]:
            fitting = [
                r for r in waiting if committed + peak_pages(r, page_size) <= limits["pool_pages"]
            ]
            if not fitting or (len(finished) <= 100 and fitting[0] is not waiting[0]):
                break  # first come, first served: nobody overtakes the head
            head = fitting[0]  # BUG: after 100 completions, the first request that fits
            running.append(waiting.pop(waiting.index(head)))
            committed += peak_pages(head, page_size)

    # 2. Page growth: room for the context including this iteration's token.
    for request in running:
        context = request["prompt_tokens"] + request["generated"] + 1
        missing = allocate_kv_pages(context, page_size)["pages"] - len(request["pages"])
        for _ in range(missing):
            request["pages"].append(free_pages.pop(0))

    # 3. Decode: exactly one token per active request.
    for request in running:
        request["generated"] += 1

    # 4. Completion: a request that produced all its tokens leaves and returns its pages.
    still_running = []
    for request in running:
        if request["generated"] == request["output_tokens"]:
            finished.append(request)
            free_pages.extend(request["pages"])  # the request keeps the list: what it gave back
        else:
            still_running.append(request)
    state["running"] = still_running
    return state
