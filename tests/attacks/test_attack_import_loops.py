"""Import-time loops: one that swallows BaseException, one that ignores SIGALRM, one in C."""

from pathlib import Path

import pytest
from attack_harness import check_in_process, failed, write_attack

LOOPS = {
    "swallows": """
while True:
    try:
        while True:
            pass
    except BaseException:
        pass
""",
    "ignores_alarm": """
import signal
signal.signal(signal.SIGALRM, signal.SIG_IGN)
while True:
    pass
""",
    "in_c": """
import re
re.match(r"(a+)+b", "a" * 64)
""",
}


@pytest.mark.parametrize("kind", sorted(LOOPS))
def test_an_import_that_never_ends_is_a_timeout(tmp_path: Path, capsys: object, kind: str) -> None:
    path = write_attack(tmp_path, LOOPS[kind] + "\nclass Attack(Buggy): pass\n")
    outcome = check_in_process(capsys, f"{path}:Attack", timeout=0.5)
    failed(outcome, "PROTO-1", "importing", "did not return within 0.5 s")
