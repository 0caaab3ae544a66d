"""Z3 evidence for a check, read from the proofs' results: proved once per design, then cached.

What Z3 proves of a reference scheduler depends on the design it models (the policy), the
number of symbolic requests, the resource budget each query gets, the models' own code and the
solver's version; never on the workloads a check runs. So a check does not prove anything: it
cites the result for that key, proving it only the first time it is asked (``kvsched check
kvsched.reference:ContinuousScheduler`` once spent most of its time in Z3) and keeping it in
kvsched's cache folder.

The key hashes every module of :mod:`kvsched.checks.proofs`, so a change of a model, a lemma or
a budget proves again instead of citing a stale result. A cache file that cannot be read, or
does not say what was asked, is proved again too; one that cannot be written costs only the time.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from importlib import metadata, resources
from pathlib import Path

from kvsched.checks.proofs.budgets import DEFAULT
from kvsched.checks.proofs.evidence import proved_invariants
from kvsched.checks.search.runs import cache_folder


def cited_proofs(policy: str, requests: int, rlimit: int = DEFAULT.induction) -> tuple[str, ...]:
    """Catalogue ids Z3 proved inductive for ``requests`` symbolic requests under ``policy``:
    from the cache when these exact models were proved before, else proved now and cached."""
    key = proof_key(policy, requests, rlimit)
    path = cache_folder() / "proofs" / f"{key}.json"
    cached = _read(path, key)
    if cached is not None:
        return cached
    proved = proved_invariants(policy, requests, rlimit)
    _write(path, key, proved)
    return proved


def proof_key(policy: str, requests: int, rlimit: int) -> str:
    """What a proof's result depends on, hashed: the question, the models' code, the solver."""
    digest = hashlib.sha256()
    question = {"policy": policy, "requests": requests, "rlimit": rlimit, "z3": _z3_version()}
    digest.update(json.dumps(question, sort_keys=True).encode())
    for name, text in _model_sources():
        digest.update(name.encode() + b"\0" + text + b"\0")
    return digest.hexdigest()[:32]


def _model_sources() -> list[tuple[str, bytes]]:
    """Every module of the proofs package, by its path inside the package, in a stable order."""
    found: list[tuple[str, bytes]] = []
    pending = [("", resources.files("kvsched.checks.proofs"))]
    while pending:
        prefix, folder = pending.pop()
        for entry in folder.iterdir():
            if entry.is_dir() and entry.name != "__pycache__":
                pending.append((f"{prefix}{entry.name}/", entry))
            elif entry.name.endswith(".py"):
                found.append((prefix + entry.name, entry.read_bytes()))
    return sorted(found)


def _z3_version() -> str:
    try:
        return metadata.version("z3-solver")
    except metadata.PackageNotFoundError:
        return "unknown"


def _read(path: Path, key: str) -> tuple[str, ...] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    proved = data.get("proved")
    if not isinstance(proved, list) or not all(isinstance(i, str) for i in proved):
        return None
    return tuple(proved)


def _write(path: Path, key: str, proved: tuple[str, ...]) -> None:
    """Write atomically, so a concurrent check reads the whole file or none."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(handle, "w") as out:
            json.dump({"key": key, "proved": list(proved)}, out)
        os.replace(temporary, path)
    except OSError:
        pass  # an unwritable cache costs the next check the proof's time, nothing else
