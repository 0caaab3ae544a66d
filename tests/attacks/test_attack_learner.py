"""A learner's file that hangs in ``allocate_kv_pages`` or returns what cannot cross the wire."""

from pathlib import Path

from attack_harness import check_in_process, failed

LEARNER = """
def allocate_kv_pages(tokens, page_size=16):
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass

def schedule_iteration(state, limits, policy):
    return state
"""

STRANGE = """
def schedule_iteration(state, limits, policy):
    state["running"].append({"id": object(), "generated": 0, "pages": []})
    return state
"""


def test_a_hanging_allocator_is_a_timeout(tmp_path: Path, capsys: object) -> None:
    path = tmp_path / "solution.py"
    path.write_text(LEARNER)
    outcome = check_in_process(capsys, str(path), timeout=0.5)
    failed(outcome, "PROTO-1", "allocate_kv_pages(0)", "did not return within 0.5 s")


def test_a_state_that_is_not_plain_data_is_proto_1(tmp_path: Path, capsys: object) -> None:
    path = tmp_path / "solution.py"
    path.write_text(STRANGE)
    failed(check_in_process(capsys, str(path)), "PROTO-1", "not plain data")
