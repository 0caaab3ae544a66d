"""``kvsched check`` as a person sees it on a terminal, and as a program reads it from a pipe.

The terminal is a real pseudo-terminal (``pty``): progress, colour and the allocator's early
verdict appear only there; piped, in CI and with ``--json`` the output is plain and stderr silent.
A check also leaves the folder it runs in as it was, whatever it finds.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LEARNER = ROOT / "examples" / "learner"
MUTANTS = ROOT / "checks" / "mutants" / "learner"  # the buggy solutions, one copy
KVSCHED = [sys.executable, "-c", "import sys; from kvsched.cli import main; sys.exit(main())"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR", "TERM")}
    return {**env, "TERM": "xterm-256color", "KVSCHED_CACHE_DIR": str(tmp_path / "cache"), **extra}


def on_a_terminal(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run kvsched with stdout and stderr on one pseudo-terminal; its exit code and all it drew."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the terminal is its stdin, stdout and stderr
        os.chdir(cwd)
        os.execve(sys.executable, [*KVSCHED, *argv], env)
    drawn = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 120)
        if not ready:
            os.kill(pid, 9)
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), drawn.decode("utf-8", "replace")


def test_progress_the_early_allocator_verdict_and_the_first_line_on_a_terminal(
    tmp_path: Path,
) -> None:
    argv = ["check", str(LEARNER / "correct.py"), "--policy", "static", "--max-examples", "30"]
    code, drawn = on_a_terminal(argv, tmp_path, _env(tmp_path))
    assert code == 0, drawn
    plain = ANSI.sub("", drawn)
    # The allocator's verdict is printed as soon as it is known, before any other phase.
    allocator = re.search(r"allocate_kv_pages: holds on \d+ inputs", plain)
    assert allocator is not None, plain
    assert allocator.start() < plain.index("static: monitor on the teaching trace")
    assert re.search(r"static: Hypothesis examples .*\d+/30", plain), plain
    # Each time is named: the elapsed, then what is left.
    assert re.search(r"\d+:\d\d:\d\d elapsed, [-\d:]+ left", plain), plain
    # The verdict replaces the progress: it begins with its one line, in colour.
    assert "\x1b[1;32mPASS\x1b[0m" in drawn
    verdict = plain[plain.index("PASS  ") :]
    first = verdict.splitlines()[0]
    assert re.fullmatch(rf"PASS  {re.escape(argv[1])}: every invariant holds \(\d+\.\d s\)", first)


def test_prove_shows_which_proof_is_under_way_on_a_terminal(tmp_path: Path) -> None:
    argv = ["prove", "--requests", "2", "--bmc-requests", "2", "--policy", "static"]
    code, drawn = on_a_terminal(argv, tmp_path, _env(tmp_path))
    assert code == 0, drawn
    plain = ANSI.sub("", drawn)
    for phase in ("page lemmas", "static: induction over 2 symbolic requests"):
        assert phase in plain, plain


def test_mutants_show_which_mutant_is_checked_on_a_terminal(tmp_path: Path) -> None:
    zoo = tmp_path / "zoo.py"
    zoo.write_text("from kvsched.checks.mutants.zoo import ZOO as EVERY\nZOO = EVERY[:2]\n")
    code, drawn = on_a_terminal(["mutants", "--zoo", str(zoo)], tmp_path, _env(tmp_path))
    assert code == 0, drawn
    plain = ANSI.sub("", drawn)
    assert re.search(r"mutant 1/2, [^:]+: \w+: monitor on the teaching trace", plain), plain


def test_a_finding_is_the_first_line_coloured_on_a_terminal(tmp_path: Path) -> None:
    argv = ["check", str(MUTANTS / "buggy_leak.py"), "--policy", "static", "--max-examples", "5"]
    code, drawn = on_a_terminal(argv, tmp_path, _env(tmp_path))
    assert code == 1, drawn
    assert "\x1b[1;31mFAIL\x1b[0m" in drawn
    # The progress says so as soon as the violation is seen, while the witness is shrunk.
    plain = ANSI.sub("", drawn)
    told = re.search(r"Violation found: PAGE-3 broke at iteration \d+ of the teaching trace", plain)
    assert told is not None, plain
    assert told.start() < plain.index("FAIL  ")
    first = ANSI.sub("", drawn[drawn.index("FAIL") :]).splitlines()[0]
    assert first.startswith(
        f"FAIL  {argv[1]}: VIOLATION found: PAGE-3 in iteration 1 (static batching): "
    )
    assert re.search(r"\(\d+\.\d s\)$", first), first


@pytest.mark.parametrize("how", ["piped", "CI", "--json"])
def test_output_for_programs_is_plain_and_stderr_silent(tmp_path: Path, how: str) -> None:
    argv = ["check", str(MUTANTS / "buggy_leak.py"), "--policy", "static", "--max-examples", "5"]
    env = _env(tmp_path, **({"CI": "true"} if how == "CI" else {}))
    if how == "--json":
        argv.append("--json")
    if how == "CI":  # on a terminal still: CI is told by its variable
        code, out = on_a_terminal(argv, tmp_path, env)
        err = ""
    else:
        done = subprocess.run(
            [*KVSCHED, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        code, out, err = done.returncode, done.stdout, done.stderr
    assert code == 1
    assert not ANSI.search(out), out
    assert err == ""
    if how == "--json":
        assert json.loads(out)["exit_code"] == 1
    else:
        assert out.startswith(f"FAIL  {argv[1]}: VIOLATION found: PAGE-3 in iteration 1"), out
        assert re.search(r"allocate_kv_pages: holds on \d+ inputs", out), out
        assert out.count("allocate_kv_pages: holds") == 1  # no early copy off a terminal


def _listing(folder: Path) -> list[tuple[str, int, float]]:
    """Every file and folder below ``folder``, hidden ones too, with its size and time."""
    return sorted(
        (str(path.relative_to(folder)), path.stat().st_size, path.stat().st_mtime)
        for path in folder.rglob("*")
    )


def test_a_check_in_a_fresh_folder_leaves_it_as_it_was(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "notes.txt").write_text("mine\n")
    before = _listing(fresh)
    cache = tmp_path / "cache"
    outputs = {}
    for folder, target in ((LEARNER, "correct.py"), (MUTANTS, "buggy_leak.py")):
        argv = ["check", str(folder / target), "--policy", "static", "--max-examples", "5"]
        done = subprocess.run(
            [*KVSCHED, *argv], cwd=fresh, env=_env(tmp_path), capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert done.returncode == (0 if target == "correct.py" else 1), done.stderr
        assert _listing(fresh) == before, target
        outputs[target] = done.stdout
    # The counterexample went to kvsched's cache folder, and the output says where.
    [saved] = (cache / "counterexamples").iterdir()
    assert f"Workload file: {saved}. Replay it with:" in outputs["buggy_leak.py"]
