"""A declaration as a disguise: drop every output token after the first and declare stops_early.

Ungraded that is a legitimate design (an engine that stops on an end-of-sequence token), so the
check may pass, but the verdict must say what the declaration excused, with counts. Graded, the
declaration is refused (exit 2) unless the grader allowed it, and the refusal says how to.
"""

from pathlib import Path

import pytest
from attack_harness import CONTAINED, check_in_process, write_attack

DROPS = """
from kvsched.spec.properties import TargetProperties

class Attack(ContinuousScheduler):
    properties = TargetProperties(policy="continuous", stops_early=True)

    def update_from_output(self, output):
        for seq in self.running:
            made = output.tokens.get(seq.request.id, 0)
            if made:  # done at its first token: the rest of the output is dropped
                seq.generated = seq.request.output_tokens - made
        return super().update_from_output(output)
"""
EXCUSED = "stops_early (REQ-2, BATCH-3, LIVE-2): "


def test_ungraded_the_verdict_names_the_declaration_and_what_it_excused(
    tmp_path: Path, capsys: object
) -> None:
    outcome = check_in_process(capsys, f"{write_attack(tmp_path, DROPS)}:Attack")
    assert outcome.code == 0, outcome  # a legitimate declaration, but never a silent one
    [line] = [line for line in outcome.out.splitlines() if EXCUSED in line]
    stopped, _, rest = line.partition(EXCUSED)[2].partition(" of ")
    assert int(stopped) > 0 and "requests stopped early, after 1 token each" in rest, line


@pytest.mark.parametrize("sandbox", CONTAINED)
def test_graded_the_declaration_is_refused_unless_allowed(
    tmp_path: Path, capsys: object, sandbox: str
) -> None:
    spec = f"{write_attack(tmp_path, DROPS)}:Attack"
    refused = check_in_process(capsys, spec, "--grade", "--sandbox", sandbox)
    assert refused.code == 2, refused
    assert "did not allow: stops_early relaxes REQ-2" in refused.err, refused
    assert "--allow stops_early" in refused.err, refused
    allowed = check_in_process(
        capsys, spec, "--grade", "--allow", "stops_early", "--sandbox", sandbox
    )
    assert allowed.code == 0, allowed
    # The verdict's one line first, then what the grader allowed and the limits.
    graded = allowed.out.split("\n\n")[1]
    assert graded.startswith("Graded (--grade). Declarations allowed: stops_early."), allowed
    assert "Limits: 1 s per call, 60 s for the whole check" in graded.splitlines()[0]
    assert "requests stopped early, after 1 token each" in allowed.out, allowed


def test_grading_without_a_sandbox_is_refused(tmp_path: Path, capsys: object) -> None:
    spec = f"{write_attack(tmp_path, DROPS)}:Attack"
    outcome = check_in_process(capsys, spec, "--grade", "--sandbox", "none")
    assert outcome.code == 2 and "--grade runs the target contained" in outcome.err, outcome
