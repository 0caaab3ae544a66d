"""A target that allocates without end meets the memory limit: a failing verdict."""

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from attack_harness import SANDBOXES, check_in_process, failed, readable_folder, write_attack


@pytest.fixture
def folder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = readable_folder(monkeypatch)
    yield path
    shutil.rmtree(path, ignore_errors=True)


HOG = """
class Attack(Buggy):
    def schedule(self):
        hoard = []
        while True:
            hoard.append(bytearray(1 << 30))  # far over the limit at once: no time spent filling
"""


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_memory_is_limited(folder: Path, sandbox: str, capsys: object) -> None:
    path = write_attack(folder, HOG)
    limits = ("--memory-mb", "256", "--sandbox", sandbox)
    outcome = check_in_process(capsys, f"{path}:Attack", *limits, timeout=5.0)
    failed(outcome, "PROTO-1", "MemoryError")
