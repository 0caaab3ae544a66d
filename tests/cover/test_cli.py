"""The command line: the README's commands, exit codes and error messages."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kvsched import cli

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"^    (python3 -m venv .*)$", text[:1500], flags=re.MULTILINE)


def test_readme_opens_with_the_two_commands_and_ci_runs_the_second() -> None:
    main_job, tests = readme_commands()[:2]
    assert main_job.endswith("kvsched replay")
    assert tests.endswith("pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests.replace("pip install -q", "pip install") in ci.replace(
        "pip install -q", "pip install"
    )


def test_replay_prints_the_table_and_the_storyboard(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["replay"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^iterations\s+116\s+88$", out, flags=re.MULTILINE)
    # The lesson's 61% and 86%, written as a report writes a fraction (kvsched.reports.numbers).
    assert re.search(r"^utilization\s+60\.9%\s+86\.2%$", out, flags=re.MULTILINE)
    assert "a finishes, frees 4 pages" in out
    assert re.search(r"^\s+15\s+d join; b c d decode", out, flags=re.MULTILINE)


def test_replay_rejects_a_bad_workload_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": 1, "limits": {}, "requests": []}))
    assert cli.main(["replay", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.json: limits: missing field 'batch_limit'" in err
    assert "Traceback" not in err


def test_an_internal_error_exits_3_and_says_it_is_ours(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kvsched.commands import replay

    def broken(*args: object) -> None:
        raise KeyError("oops")

    monkeypatch.setattr(replay, "render_table", broken)
    assert cli.main(["replay"]) == 3
    assert "internal error (a bug in kvsched" in capsys.readouterr().err


def test_python_m_kvsched_works_from_the_source_root() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kvsched", "replay", "--timeline", "none"],
        capture_output=True,
        text=True,
        cwd=ROOT,  # the source root must not shadow the installed package
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "continuous" in result.stdout


def test_synth_refuses_a_question_one_request_cannot_answer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["synth", "reuse", "--requests", "1"]) == 2
    assert "'reuse' needs --requests >= 2, got 1" in capsys.readouterr().err


def test_z3_takes_checks_again_after_an_interrupted_command() -> None:
    """The watchdog cancels Z3's context to stop a solve; a process that calls ``main`` again
    (a test, an embedding program) must find Z3 usable, not "push canceled"."""
    import z3

    cli._interrupt_solvers()  # without what follows, the push below is "push canceled"
    cli._solvers_usable_again()
    z3.Solver().push()
    # A call refused once leaves its error for the next call to raise: cleared too.
    cli._interrupt_solvers()
    with pytest.raises(z3.Z3Exception, match="canceled"):
        z3.Solver().push()
    cli._solvers_usable_again()
    z3.Solver().push()
