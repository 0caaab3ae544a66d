"""Mutating the frozen ``Request`` and ``Limits`` it was given: only the host's copies change."""

from pathlib import Path

from attack_harness import check_in_process, failed, write_attack

MUTATE = """
from kvsched.reference import ContinuousScheduler

class Attack(ContinuousScheduler):
    def __init__(self, limits):
        object.__setattr__(limits, "batch_limit", 10**6)
        super().__init__(limits)

    def add_request(self, request):
        object.__setattr__(request, "output_tokens", 1)
        super().add_request(request)
"""


def test_shortened_requests_are_caught(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, MUTATE)
    failed(check_in_process(capsys, f"{path}:Attack"), "violated")
