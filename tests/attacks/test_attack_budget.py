"""A target that takes 0.3 s per call: the overall budget ends the check, stated in the verdict.

Running out of time is not a violation of the target's, and too little was judged for a pass:
the check is inconclusive (exit 4)."""

from pathlib import Path

from attack_harness import check_in_process, write_attack

from kvsched.spec.vocabulary import ExitCode

SLOW = """
import time

class Attack(Buggy):
    def schedule(self):
        time.sleep(0.3)
        return super().schedule()
"""


def test_the_budget_ends_a_slow_check(tmp_path: Path, capsys: object) -> None:
    path = write_attack(tmp_path, SLOW)
    outcome = check_in_process(capsys, f"{path}:Attack", "--budget", "2")
    assert outcome.code == ExitCode.INCONCLUSIVE, outcome
    assert outcome.out.startswith("INCONCLUSIVE  "), outcome
    for words in ("budget of 2 s ran out", "2 s for the whole check"):
        assert words in outcome.out, (words, outcome)
    assert outcome.seconds < 2 + 15
