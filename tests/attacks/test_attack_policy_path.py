"""A declared policy used as a path (``../../x``) is an invalid declaration; nothing is written."""

from pathlib import Path

from attack_harness import check_in_process, write_attack

DECLARES = """
class Attack(Buggy):
    policy = "../../escaped"
"""


def test_a_policy_outside_the_vocabulary_is_exit_2(tmp_path: Path, capsys: object) -> None:
    saves = tmp_path / "a" / "b" / "saves"
    path = write_attack(tmp_path, DECLARES)
    outcome = check_in_process(capsys, f"{path}:Attack", "--save-dir", str(saves))
    assert outcome.code == 2, outcome
    assert "declares policy '../../escaped'" in outcome.err
    assert "one of static, continuous" in outcome.err
    assert not list(tmp_path.rglob("*escaped*"))
