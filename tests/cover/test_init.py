"""``kvsched init``: each starter runs, and ``kvsched check`` answers what the starter says it will.

Each test follows the user: ``kvsched init KIND DIR``, then the command it printed, typed in a
shell from the folder ``init`` ran in.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KVSCHED = f"{sys.executable} -c 'import sys; from kvsched.cli import main; sys.exit(main())'"
QUICK = "--max-examples 20"


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KVSCHED_CACHE_DIR": str(cwd / ".." / "cache")}
    env.pop("CI", None)
    return subprocess.run(
        command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )


def init(kind: str, cwd: Path) -> str:
    """``kvsched init KIND starter``; the command it says to type next."""
    done = shell(f"{KVSCHED} init {kind} starter", cwd)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == "Next, type:", done.stdout
    return lines[2].strip().replace("kvsched ", f"{KVSCHED} ")


@pytest.fixture
def here(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def test_the_scheduler_starter_passes(here: Path) -> None:
    typed = shell(f"{init('scheduler', here)} {QUICK}", here)
    assert typed.returncode == 0, typed.stdout + typed.stderr
    assert typed.stdout.startswith("PASS  starter/scheduler.py:MyScheduler: every invariant holds")


def test_the_log_starter_writes_a_log_that_passes(here: Path) -> None:
    typed = shell(init("log", here), here)
    assert typed.returncode == 0, typed.stdout + typed.stderr
    assert "PASS  starter/run.jsonl: every invariant holds" in typed.stdout


def test_the_learner_starter_fails_as_it_says_until_its_todos_are_done(here: Path) -> None:
    command = f"{init('learner', here)} {QUICK}"
    typed = shell(command, here)
    assert typed.returncode == 1, typed.stdout + typed.stderr
    first = typed.stdout.splitlines()[0]
    assert first.startswith(
        "FAIL  starter/solution.py: VIOLATION found: PAGE-1 (allocate_kv_pages): "
    ), first
    assert "LIVE-2 violated in iteration 1" in typed.stdout
    # The three TODOs, done as spec/learner.md asks: the starter then passes.
    solution = here / "starter" / "solution.py"
    text = solution.read_text()
    text = text.replace("pages = tokens // page_size", "pages = -(-tokens // page_size)")
    text = text.replace(
        "    # TODO 2: admission.",
        "    waiting = state['waiting']\n"
        "    if policy == 'continuous' or not running:\n"
        "        committed = sum(allocate_kv_pages(r['prompt_tokens'] + r['output_tokens'],\n"
        "                        page_size)['pages'] for r in running)\n"
        "        while waiting and len(running) < limits['batch_limit']:\n"
        "            peak = allocate_kv_pages(waiting[0]['prompt_tokens']\n"
        "                                     + waiting[0]['output_tokens'], page_size)['pages']\n"
        "            if committed + peak > limits['pool_pages']:\n"
        "                break\n"
        "            running.append(waiting.pop(0))\n"
        "            committed += peak\n"
        "    # admission.",
    )
    text = text.replace(
        "    return state\n",
        "    for request in [r for r in running if r['generated'] == r['output_tokens']]:\n"
        "        running.remove(request)\n"
        "        state['finished'].append(request)\n"
        "        free_pages.extend(request['pages'])\n"
        "    return state\n",
    )
    solution.write_text(text)
    done = shell(command, here)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("PASS  starter/solution.py: every invariant holds")


def test_the_learner_starter_says_what_the_check_reports_under_each_policy(here: Path) -> None:
    """What ``init`` prints, the starter's docstring and docs/getting-started.md name, policy by
    policy, is what the check reports: the ids each names are exactly the violated ones."""
    from kvsched.commands.init import KINDS
    from kvsched.commands.starters import LEARNER

    typed = shell(f"{init('learner', here)} {QUICK} --json", here)
    assert typed.returncode == 1, typed.stdout + typed.stderr
    verdict = json.loads(typed.stdout)
    allocator = {verdict["allocator"]["finding"]["invariant"]}
    by_policy = {
        v["policy"]: {i["id"] for i in v["invariants"] if i["verdict"] == "violated"}
        for v in verdict["verdicts"]
    }
    assert allocator == {"PAGE-1"} and set(by_policy) == {"static", "continuous"}, by_policy
    table = (ROOT / "docs" / "getting-started.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| `learner` |"))
    said = (KINDS["learner"][4], " ".join(LEARNER.split('"""')[1].split()), row)
    for text in said:
        named = re.findall(r"\b([A-Z]+-\d+) under (static|continuous)", text)
        assert "PAGE-1 (" in text, text
        assert {(i, p) for i, p in named} == {
            (i, p) for p, ids in by_policy.items() for i in ids - allocator
        }, text
        assert all(ids >= allocator for ids in by_policy.values())


def test_init_leaves_an_existing_file_alone(here: Path) -> None:
    init("log", here)
    record = here / "starter" / "record.py"
    record.write_text("# mine\n")
    again = shell(f"{KVSCHED} init log starter", here)
    assert again.returncode == 2
    assert "starter/record.py exists already" in again.stderr
    assert record.read_text() == "# mine\n"


def test_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kvsched", "--version"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0
    from importlib.metadata import version

    assert done.stdout == f"kvsched {version('kvsched')}\n"
