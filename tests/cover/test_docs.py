"""The README and the docs site: short, every page in the site's nav, and their figures rerun.

CI builds the site itself (`mkdocs build --strict` in .ci/run), which also checks every link and
anchor; these run in the test suite, without mkdocs.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from kvsched.cli import main

ROOT = Path(__file__).resolve().parents[2]
README_LINES = 150


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


def spec_pages() -> dict[str, str]:
    """The site's pages read from spec/ by mkdocs_hooks.py (imported without mkdocs)."""
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    pages: dict[str, str] = hooks.SPEC_PAGES
    return pages


def test_every_page_of_docs_is_in_the_sites_nav_and_in_the_readme() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    in_nav = set(re.findall(r"^  - [^:]+: (\S+\.md)$", config, flags=re.MULTILINE))
    pages = {path.name for path in (ROOT / "docs").glob("*.md")}
    assert in_nav == pages | set(spec_pages())
    readme = (ROOT / "README.md").read_text()
    assert all(f"docs/{page}" in readme for page in pages - {"index.md"})


def test_the_learner_contract_is_a_page_of_the_site_read_from_spec() -> None:
    """Where the learner starter sends people (spec/learner.md) is on the site, as that file."""
    pages = spec_pages()
    assert pages["learner.md"] == "spec/learner.md"
    assert all((ROOT / source).is_file() for source in pages.values())
    assert "mkdocs_hooks.py" in (ROOT / "mkdocs.yml").read_text()
    assert not (ROOT / "docs" / "learner.md").exists()  # no second copy to keep in step


def test_the_first_page_installs_from_the_repository() -> None:
    """kvsched is not on PyPI: the site's first page says to clone and install from there."""
    index = (ROOT / "docs" / "index.md").read_text()
    assert not re.search(r"pip install kvsched\b", index)
    assert "git clone" in index and "pip install ." in index


@pytest.mark.parametrize("page", ["README.md", "docs/teaching-trace.md"])
def test_the_teaching_trace_table_is_what_replay_prints(
    page: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", "--format", "json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    text = (ROOT / page).read_text()
    for policy in ("static", "continuous"):
        row = re.search(rf"^\| {policy} batching \| (\d+) \| (\d+)% \| (\d+) \|$", text, re.M)
        assert row is not None, policy
        metrics = figures[policy]
        assert int(row.group(1)) == metrics["iterations"]
        assert int(row.group(2)) == round(100 * metrics["utilization"])
        assert int(row.group(3)) == metrics["p95_wait"]


def test_the_efficiency_figures_quoted_for_sarathi_are_what_check_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = str(ROOT / "tests" / "engines" / "vidur_like.py") + ":VidurSarathi"
    assert main(["check", target, "--no-hypothesis"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    quoted = re.search(
        r"(Efficiency on the teaching trace .*?recomputed tokens \d+\.)",
        " ".join((ROOT / "docs" / "checking.md").read_text().split()),
    )
    assert quoted is not None
    assert quoted.group(1) in printed


def test_the_claims_docs_proofs_counts_are_what_prove_proves(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The count does not depend on the sizes: small ones rerun it in a second.
    from kvsched.checks.proofs.catalogue import ProofPlan

    said = re.search(r"(\d+) claims for (\d+) requests", (ROOT / "docs" / "proofs.md").read_text())
    assert said is not None
    assert int(said.group(2)) == ProofPlan().requests
    assert main(["prove", "--requests", "2", "--bmc-requests", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["results"]) == int(said.group(1))
