"""``kvsched import``: a sample becomes a workload that ``replay`` and ``check`` take, and a row
that cannot be used exits 2 naming the file, the line and the column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvsched.cli import main
from kvsched.reference.traces.prefixes import shared_prefixes
from kvsched.spec.workload import load_workload

TRACES = Path(__file__).resolve().parents[1] / "traces"
MALFORMED = [
    ("azure", "azure_malformed.csv", "line 4, column 'TIMESTAMP'"),
    ("burstgpt", "burstgpt_malformed.csv", "line 4, column 'Request tokens'"),
    ("mooncake", "mooncake_malformed.jsonl", "line 3, column 'hash_ids'"),
    ("vidur", "vidur_malformed.csv", "line 4, column 'arrived_at'"),
]


def test_an_import_replays_and_checks_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "w.json"
    trace = str(TRACES / "burstgpt.csv")
    assert main(["import", "burstgpt", trace, "-o", str(out), "--pool-pages", "300"]) == 0
    said = capsys.readouterr().out
    assert "2 failed rows dropped (no output token): lines 3, 6" in said
    workload = load_workload(out)
    assert workload.limits.pool_pages == 300 and len(workload.requests) == 8
    assert "2 failed rows dropped" in workload.description
    assert main(["replay", str(out), "--format", "json"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == {"static", "continuous"}
    target = "kvsched.reference.continuous:ContinuousScheduler"
    checked = ["check", target, "--workload", str(out), "--no-hypothesis", "--z3-requests", "0"]
    assert main([*checked, "--save-dir", str(tmp_path / "saved")]) == 0
    assert "every invariant holds" in capsys.readouterr().out


@pytest.mark.parametrize(("layout", "name", "where"), MALFORMED)
def test_a_malformed_row_names_file_line_and_column(
    layout: str, name: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "w.json"
    assert main(["import", layout, str(TRACES / name), "-o", str(out)]) == 2
    assert f"{TRACES / name}, {where}" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    ("layout", "text", "message"),
    [
        ("burstgpt", "Timestamp,Model\n1,ChatGPT\n", "line 1: the header has no column"),
        ("vidur", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1\n", "line 2: 2 fields"),
        ("vidur", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,-2\n", "line 2, column"),
        ("vidur", "version https://git-lfs.github.com/spec/v1\n", "a Git LFS pointer"),
        ("mooncake", '{"timestamp": 0, "input_length": 1,\n', "line 1: not valid JSON"),
        ("mooncake", '{"timestamp": 0, "input_length": 1}\n', "line 1: missing field"),
        ("mooncake", "[1]\n", "line 1: a row must be a JSON object"),
        ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n", "no usable row"),
        ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 25:00:00,1,1\n", "line 2"),
        (
            "burstgpt",
            "Timestamp,Request tokens,Response tokens\n0,1,1\n9000000,1,1\n",
            "line 3, column 'Timestamp': arrives 9000000 s after the first request, past",
        ),
    ],
)
def test_unusable_input_exits_2_with_where_and_why(
    layout: str, text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace.txt"
    trace.write_text(text)
    assert main(["import", layout, str(trace), "-o", str(tmp_path / "w.json")]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "options",
    [["--max-model-len", "999999999"], ["--batch-limit", "0"], ["--max-requests", "0"]],
)
def test_options_out_of_range_exit_2(
    options: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = str(TRACES / "vidur.csv")
    assert main(["import", "vidur", trace, "-o", str(tmp_path / "w.json"), *options]) == 2
    assert options[0] in capsys.readouterr().err


@pytest.mark.parametrize("options", [["--rate", "-1"], ["--arrival-scale", "nan"]])
def test_numbers_that_are_not_positive_are_refused_by_the_parser(
    options: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = str(TRACES / "vidur.csv")
    with pytest.raises(SystemExit) as exited:
        main(["import", "vidur", trace, "-o", str(tmp_path / "w.json"), *options])
    assert exited.value.code == 2
    assert "must be a positive number" in capsys.readouterr().err


def _chains() -> st.SearchStrategy[list[tuple[int, ...]]]:
    """Prompts as block chains that extend or fork earlier ones, as conversations do."""

    def grow(seeds: list[tuple[int, int, int]]) -> list[tuple[int, ...]]:
        chains: list[tuple[int, ...]] = []
        for index, (parent, keep, extra) in enumerate(seeds):
            stem = chains[parent % len(chains)][:keep] if chains else ()
            chains.append(stem + tuple(1000 * index + k for k in range(extra)))
        return chains

    seed = st.tuples(st.integers(0, 30), st.integers(0, 6), st.integers(0, 4))
    return st.lists(seed, min_size=1, max_size=30).map(grow)


@given(_chains(), st.data())
def test_prefix_groups_never_claim_a_block_two_prompts_do_not_share(
    chains: list[tuple[int, ...]], data: st.DataObject
) -> None:
    prompts = [data.draw(st.integers(max(0, 4 * len(c) - 3), 4 * len(c))) for c in chains]
    groups = shared_prefixes(chains, prompts, block_tokens=4)
    for i, (group_a, tokens_a) in enumerate(groups):
        assert tokens_a <= prompts[i] and (group_a == "") == (tokens_a == 0)
        for j in range(i):
            group_b, tokens_b = groups[j]
            if group_a and group_a == group_b:
                common = 0
                while chains[i][common : common + 1] == chains[j][common : common + 1] != ():
                    common += 1
                assert min(tokens_a, tokens_b) <= 4 * common
