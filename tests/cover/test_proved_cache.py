"""Z3 evidence is proved once per design and cited from kvsched's cache after that."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvsched.checks.judge import proved


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, int, int]]:
    monkeypatch.setenv("KVSCHED_CACHE_DIR", str(tmp_path))
    made: list[tuple[str, int, int]] = []

    def prove(policy: str, requests: int, rlimit: int) -> tuple[str, ...]:
        made.append((policy, requests, rlimit))
        return ("PAGE-1", f"{policy}-{requests}")

    monkeypatch.setattr(proved, "proved_invariants", prove)
    return made


def test_a_proof_is_made_once_and_cited_after(calls: list[tuple[str, int, int]]) -> None:
    first = proved.cited_proofs("continuous", 3, 1000)
    second = proved.cited_proofs("continuous", 3, 1000)
    assert first == second == ("PAGE-1", "continuous-3")
    assert calls == [("continuous", 3, 1000)]


def test_another_question_is_proved_on_its_own(calls: list[tuple[str, int, int]]) -> None:
    proved.cited_proofs("continuous", 3, 1000)
    proved.cited_proofs("static", 3, 1000)
    proved.cited_proofs("continuous", 4, 1000)
    proved.cited_proofs("continuous", 3, 2000)
    assert len(calls) == 4


@pytest.mark.parametrize("text", ["", "{", "[]", '{"key": "x", "proved": ["PAGE-1"]}', "null"])
def test_a_cache_file_that_says_anything_else_is_proved_again(
    calls: list[tuple[str, int, int]], tmp_path: Path, text: str
) -> None:
    key = proved.proof_key("continuous", 3, 1000)
    folder = tmp_path / "proofs"
    folder.mkdir()
    (folder / f"{key}.json").write_text(text)
    assert proved.cited_proofs("continuous", 3, 1000) == ("PAGE-1", "continuous-3")
    assert len(calls) == 1


def test_the_key_covers_every_model_module(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = proved._model_sources()
    names = [name for name, _ in sources]
    assert {"model.py", "induction.py", "engine/system.py", "teaching/model.py"} <= set(names)
    assert "__pycache__" not in " ".join(names)
    # A model that changes, in any folder, is proved again: its key is another.
    before = proved.proof_key("continuous", 3, 1000)
    changed = [(n, t + b"#" if n == "engine/system.py" else t) for n, t in sources]
    monkeypatch.setattr(proved, "_model_sources", lambda: changed)
    assert proved.proof_key("continuous", 3, 1000) != before


def test_an_unwritable_cache_costs_only_time(
    calls: list[tuple[str, int, int]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("KVSCHED_CACHE_DIR", str(blocked / "below-a-file"))
    assert proved.cited_proofs("continuous", 3, 1000) == ("PAGE-1", "continuous-3")
    assert proved.cited_proofs("continuous", 3, 1000) == ("PAGE-1", "continuous-3")
    assert len(calls) == 2
