"""Links planted by the target where kvsched writes: never followed.

In a sandbox the target cannot plant them (test_attack_containment.py); these run without one
(``--sandbox none``), where kvsched's own way of writing files is what protects them.
"""

from pathlib import Path

import pytest
from attack_harness import check_in_process, failed, write_attack

from kvsched.spec.vocabulary import ExitCode

NONE = ("--sandbox", "none")

PLANTS = """
import os
os.symlink("victim.txt", "report.xml")
os.makedirs("elsewhere", exist_ok=True)
os.symlink("elsewhere", ".kvsched")

class Attack(Buggy):
    pass
"""


def test_junit_xml_replaces_a_link_instead_of_following_it(tmp_path: Path, capsys: object) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    path = write_attack(tmp_path, PLANTS)
    outcome = check_in_process(
        capsys, f"{path}:Attack", "--junit-xml", "report.xml", "--save-dir", "saved", *NONE
    )
    failed(outcome, "REQ-2 violated")
    assert victim.read_text() == "precious\n"
    report = tmp_path / "report.xml"
    assert not report.is_symlink()
    assert "<failure" in report.read_text()


def test_a_linked_save_folder_is_refused(
    tmp_path: Path, capsys: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_attack(tmp_path, PLANTS)
    # A save folder in the folder the target ran in, through the link it planted there.
    saved = ("--save-dir", ".kvsched/counterexamples")
    outcome = check_in_process(capsys, f"{path}:Attack", *saved, *NONE)
    assert outcome.code == ExitCode.WRITE_FAILED, outcome  # an output missing: never a pass
    assert "--save-dir" in outcome.err
    assert not list((tmp_path / "elsewhere").iterdir())
    # The default, counterexamples/ in the cache folder, is refused as a link too.
    for planted in ("report.xml", ".kvsched"):  # the target plants them again on import
        (tmp_path / planted).unlink()
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "counterexamples").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv("KVSCHED_CACHE_DIR", str(cache))
    outcome = check_in_process(capsys, f"{path}:Attack", *NONE)
    assert outcome.code == ExitCode.WRITE_FAILED, outcome
    assert not list((tmp_path / "elsewhere").iterdir())
