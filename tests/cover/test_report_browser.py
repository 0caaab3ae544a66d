"""A report as a team lead sees it: opened in headless Chromium at 1400x900, from report.html alone.

A probe script is appended to a copy of the page (the report itself has no scripts). Once the
page has loaded it records, into the DOM that ``--dump-dom`` prints, the viewport, whether each
image decoded, and where the verdict banner sits. Every image must load and the whole banner,
breached metrics included, must sit in the first screen. Skipped, saying why, where Chromium is
not installed (Debian: ``apt-get install chromium``); .ci/run installs it and runs this file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kvsched.cli import main
from kvsched.spec.teaching import load_teaching_trace
from kvsched.spec.workload import workload_to_json

WIDTH, HEIGHT = 1400, 900
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
BROWSER = os.environ.get("KVSCHED_CHROMIUM") or next(filter(None, map(shutil.which, BROWSERS)), "")
# Without the networking switches headless Chromium waits on connections that are refused here.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    f"--window-size={WIDTH},{HEIGHT}",
    "--virtual-time-budget=10000",
)
PROBE = """<script>
addEventListener("load", () => {
  const box = (el) => { const r = el.getBoundingClientRect(); return [r.top, r.bottom]; };
  const banner = document.querySelector("section.banner");
  const table = banner && banner.querySelector("table");
  const out = {
    viewport: [innerWidth, innerHeight],
    images: [...document.images].map((i) => [i.complete, i.naturalWidth, i.naturalHeight]),
    shown: [...document.images].map((i) => [i.getBoundingClientRect().width,
                                            i.getBoundingClientRect().height]),
    banner: banner ? box(banner) : null,
    bannerShown: banner ? getComputedStyle(banner).display !== "none" : false,
    breaches: table ? box(table) : null,
    title: document.title,
  };
  const pre = document.createElement("pre");
  pre.id = "kvsched-probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""

pytestmark = pytest.mark.skipif(
    not BROWSER,
    reason="Chromium is not installed (Debian: apt-get install chromium; or set "
    "KVSCHED_CHROMIUM): the browser test of report.html is skipped",
)


def probe(report: Path, tmp_path: Path) -> dict[str, object]:
    """Open a copy of ``report`` alone in a folder of its own, as a kept artifact is opened."""
    alone = tmp_path / "alone"
    alone.mkdir()
    page = report.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>")
    (alone / "report.html").write_text(page, encoding="utf-8")
    profile = tmp_path / "profile"
    done = subprocess.run(
        [
            BROWSER,
            *FLAGS,
            f"--user-data-dir={profile}",
            "--dump-dom",
            (alone / "report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = re.search(r'<pre id="kvsched-probe">(.*?)</pre>', done.stdout, re.DOTALL)
    assert found, f"the probe did not run (exit {done.returncode}): {done.stderr[-2000:]}"
    result: dict[str, object] = json.loads(found.group(1).replace("&quot;", '"'))
    # A 1400x900 window: its viewport is the full width and at most that height (Chromium keeps
    # some for its own frame), so a banner inside the viewport is inside the first screen.
    width, height = result["viewport"]  # type: ignore[misc]
    assert width == WIDTH and 0 < height <= HEIGHT
    return result


def test_a_failing_gate_shows_its_banner_and_every_plot_in_the_first_screen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["report", "--out", str(tmp_path / "base"), "--no-plots"]) == 0
    document = workload_to_json(load_teaching_trace())
    for request in document["requests"]:
        if request["id"] in ("g", "h"):
            request["arrival"] = 20  # waits rise: the gate fails
    crowded = tmp_path / "crowded.json"
    crowded.write_text(json.dumps(document))
    argv = ["report", str(crowded), "--name", "teaching", "--out", str(tmp_path / "new")]
    argv += ["--baseline", str(tmp_path / "base" / "teaching"), "--fail-on", "p95_wait>+5%"]
    assert main(argv) == 1
    seen = probe(tmp_path / "new" / "teaching" / "report.html", tmp_path)
    assert str(seen["title"]).startswith("Gate failed")
    images = seen["images"]
    assert isinstance(images, list) and len(images) == 3
    assert all(complete and width > 0 and height > 0 for complete, width, height in images)
    assert seen["bannerShown"]
    assert seen["banner"] is not None and seen["breaches"] is not None
    top, bottom = seen["banner"]  # type: ignore[misc]
    assert top >= 0 and bottom <= HEIGHT, seen
    assert seen["breaches"][1] <= HEIGHT  # type: ignore[index]


def test_a_large_report_loads_its_timeline(tmp_path: Path) -> None:
    argv = ["report", "family:poisson-short-tight:400:2", "--name", "big", "--out", str(tmp_path)]
    assert main(argv) == 0
    seen = probe(tmp_path / "big" / "report.html", tmp_path)
    images = seen["images"]
    assert isinstance(images, list) and len(images) == 3
    assert all(complete and width > 0 for complete, width, _ in images)
    top, bottom = seen["banner"]  # type: ignore[misc]
    assert top >= 0 and bottom <= HEIGHT


def test_a_history_of_26_cases_stays_readable(tmp_path: Path) -> None:
    """26 cases over 5 commits: a panel each, the movers first, each panel wide enough to read
    on a 1400-pixel screen, instead of 26 lines in repeated colours under one legend."""
    from kvsched.reports.provenance import Provenance
    from kvsched.reports.results import CaseResult, ResultSet, write_results

    kept = tmp_path / "kept"
    for day, commit in enumerate(("1111111", "2222222", "3333333", "4444444", "5555555")):
        cases = tuple(
            CaseResult(f"family-{n}", "continuous", {"p95_wait": 10.0 + n + (n == 7) * day}, {})
            for n in range(26)
        )
        when = f"2026-01-{day + 1:02d}T00:00:00Z"
        provenance = Provenance("0.1.0", commit * 5 + "aaaaa", False, when)
        (kept / commit).mkdir(parents=True)
        write_results(
            ResultSet("runs", cases, provenance=provenance), kept / commit / "results.json"
        )
    out = tmp_path / "out"
    assert main(["report", "--history", str(kept), "--metric", "p95_wait", "--out", str(out)]) == 0
    page = out / "history" / "history.html"
    assert "one panel per case, the cases that moved most first" in page.read_text()
    seen = probe(page, tmp_path)
    [(complete, width, height)] = seen["images"]  # type: ignore[misc]
    [(shown_width, shown_height)] = seen["shown"]  # type: ignore[misc]
    assert complete and width > 0 and height > 0
    # 7 rows of 4 panels: each at least 300 pixels wide and 150 high as the page shows it.
    assert shown_width <= WIDTH
    assert shown_width / 4 >= 300 and shown_height / 7 >= 150, (shown_width, shown_height)
    markdown = (out / "history" / "history.md").read_text()
    assert "`55555555` (family-7 / continuous)" in markdown
