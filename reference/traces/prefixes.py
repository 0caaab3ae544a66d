"""Shared prefixes from block hashes: Mooncake's ``hash_ids`` as kvsched's prefix groups.

A Mooncake row lists one hash per 512-token block of its prompt, and two rows that begin with
the same hashes begin with the same tokens: the rows form a tree of prefixes. A kvsched prefix
group is a line, not a tree: its members share the first ``min`` of their ``prefix_tokens``
(spec/semantics.md, section 1.1). So the tree is cut into lines (heavy-path decomposition: at
each fork the line goes on into the branch most rows take) and each row joins the line that
holds the deepest block it shares with another row. Within a line every claimed pair of shared
blocks is truly shared, so no cache hit is invented; what is lost is sharing across lines (two
branches of one fork share their stem, but sit on different lines), and a row alone on its line
joins no group. kvsched's page size then decides, as for any workload, which pages those tokens
fill.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence


def shared_prefixes(
    chains: Sequence[tuple[int, ...]], prompts: Sequence[int], block_tokens: int
) -> list[tuple[str, int]]:
    """``(prefix_group, prefix_tokens)`` of each request, in the order given; ``("", 0)`` for
    one that shares no whole block with any other."""
    # Only whole blocks count: a trace's last, partial block is never claimed, whatever its hash.
    whole = [chain[: prompt // block_tokens] for chain, prompt in zip(chains, prompts, strict=True)]
    child: dict[tuple[int, int], int] = {}
    parent = [0]
    count = [len(whole)]
    for chain in whole:
        node = 0
        for block in chain:
            key = (node, block)
            node = child.setdefault(key, len(parent))
            if node == len(parent):
                parent.append(key[0])
                count.append(0)
            count[node] += 1
    # Nodes are numbered as made, a parent before its children: one pass in order suffices.
    heavy = [0] * len(parent)
    for node in range(1, len(parent)):
        up = parent[node]
        if heavy[up] == 0 or count[node] > count[heavy[up]]:
            heavy[up] = node
    line = [0] * len(parent)
    for node in range(1, len(parent)):
        up = parent[node]
        line[node] = line[up] if heavy[up] == node else node
    deepest: list[tuple[int, int]] = []  # (line, depth) of each request's deepest shared block
    for chain in whole:
        node, depth = 0, 0
        # Counts never grow down a chain, so the blocks other rows share are a leading run.
        for block in chain:
            below = child[(node, block)]
            if count[below] < 2:
                break
            node, depth = below, depth + 1
        deepest.append((line[node], depth))
    members = Counter(on for on, depth in deepest if depth)
    names: dict[int, str] = {}
    shared: list[tuple[str, int]] = []
    for on, depth in deepest:
        if depth == 0 or members[on] < 2:  # alone on its line: it shares with no member
            shared.append(("", 0))
            continue
        shared.append((names.setdefault(on, f"p{len(names)}"), depth * block_tokens))
    return shared
