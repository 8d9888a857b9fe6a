"""`solve scl --method auto`: when the certificate at the predicted configuration decides every statement, the
factored solver runs only as the bounded confirmation (one start, no hops), so a typed --starts / --hops is not
used. The report now says so in `diagnostics` (it said nothing: `--starts 5` printed "1 starts"); untyped
defaults add no note, and `--method factored` uses them."""

import json

from proofs_check.cli import main


def _run(capsys, *extra):
    rc = main(["solve", "scl", "--counts", "2,2", "--tau", "0.5", *extra, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    return out


def test_typed_starts_and_hops_unused_by_the_certificate_are_noted(capsys):
    out = _run(capsys, "--starts", "5", "--hops", "3")
    assert any("confirmation-solve" == c["id"] for c in out["claims"])
    notes = [d for d in out["diagnostics"] if "not used" in d]
    assert len(notes) == 1 and "--starts" in notes[0] and "--hops" in notes[0] and "--method factored" in notes[0]


def test_defaults_add_no_note_and_factored_uses_the_starts(capsys):
    assert not [d for d in _run(capsys)["diagnostics"] if "not used" in d]
    out = _run(capsys, "--starts", "2", "--method", "factored")
    assert not [d for d in out["diagnostics"] if "not used" in d]
    assert out["solution"]["starts"] == 2
