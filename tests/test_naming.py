"""One naming grammar: claim ids ``<family>.<segment>(.<segment>)*`` over the whole registry, former
ids kept as aliases, and ``--only NAME`` (family first, then ids, then globs, then substrings, else
"did you mean"), and one keyword for a claim factory's id (``claim_id=``)."""

import ast
import json
from pathlib import Path

import pytest

from proofs_check import registry as R
from proofs_check.cli import main
from proofs_check.core import Check, Claim, Provenance, Verdict
from theory._validate import InputError

CLAIMS = R.all_claims()

# ids that the family issues name for claims being added: they must fit the grammar unchanged
NEW_IDS = ["ntk.general.nc1-at-e-zero", "ntk.assumption.consequences", "feature_collapse.trainable-ln.attained",
           "feature_collapse.no-decay.no-minimum", "scl.theorem1.low_dim_gap", "scl.thread.eq1-eq2",
           "deep_ufm.linear-mse.optimum", "deep_ufm.dnc.optimal-shallow", "ufm.relu.balanced-geometry",
           "crh.magnitude.first-moment", "crh.noise-injection.rga"]


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.id for c in CLAIMS])
def test_every_registered_id_follows_the_grammar(claim):
    assert claim.family in R.FAMILIES, f"{claim.id}: family {claim.family!r} is not one of {R.FAMILIES}"
    assert R.valid_id(claim.id, claim.family), (
        f"{claim.id!r} does not follow <family>.<segment>(.<segment>)* with family {claim.family!r} "
        f"and segments {R.SEGMENT}")


@pytest.mark.parametrize("claim_id", NEW_IDS)
def test_ids_named_by_the_family_issues_fit(claim_id):
    assert R.valid_id(claim_id)


@pytest.mark.parametrize("bad", ["ufm-ls-optimal-value", "UFM.ce.value", "ufm", "ufm.", "ufm..x", "ufm.ce value",
                                 "feature-collapse.thm1", "ufm.-x", "scl.theorem1.", "mse.optimal-value"])
def test_grammar_rejects(bad):
    assert not R.valid_id(bad)


def test_aliases_point_to_registered_ids_and_never_shadow_one():
    ids = {c.id for c in CLAIMS}
    assert len(ids) == len(CLAIMS)
    for old, new in R.ALIASES.items():
        assert new in ids, f"alias {old!r} points to {new!r}, which is not registered"
        assert old not in ids and not R.valid_id(old)


def test_family_spellings_select_the_same_claims():
    a = R.select(CLAIMS, "feature-collapse")
    assert a and a == R.select(CLAIMS, "feature_collapse") == R.select(CLAIMS, "Feature-Collapse")
    assert {c.family for c in a} == {"feature_collapse"}


def test_only_ufm_is_the_classic_model_only():
    ufm = R.select(CLAIMS, "ufm")
    assert ufm and {c.family for c in ufm} == {"ufm"}
    both = R.select(CLAIMS, "ufm*")
    assert {c.family for c in both} >= {"ufm", "ufm_general"}


def test_former_id_selects_its_claim_and_get_resolves_it():
    assert [c.id for c in R.select(CLAIMS, "ufm-ls-optimal-value")] == ["ufm_general.label-smoothing.optimal-value"]
    assert R.get("ufm-ce-optimal-value").id == "ufm.ce.optimal-value"
    assert R.get("ntk-e-zero").id == "ntk.e-zero"
    # a former family-like prefix still selects by substring of the former ids
    assert {c.id for c in R.select(CLAIMS, "ufm-ce")} == {c.id for c in CLAIMS if c.id.startswith("ufm.ce.")}


def test_selection_order_exact_before_substring():
    # an exact id selects that claim only, even where it is a substring of another id
    fake = [Claim("scl.a", "scl", "s", "src", Provenance.DERIVED, lambda ctx: iter(())),
            Claim("scl.a.b", "scl", "s", "src", Provenance.DERIVED, lambda ctx: iter(()))]
    assert [c.id for c in R.select(fake, "scl.a")] == ["scl.a"]
    assert [c.id for c in R.select(fake, "a.b")] == ["scl.a.b"]
    assert [c.id for c in R.select(fake, "scl.a*")] == ["scl.a", "scl.a.b"]
    assert [c.id for c in R.select(fake, "scl")] == ["scl.a", "scl.a.b"]


def test_unknown_name_gets_did_you_mean():
    with pytest.raises(InputError, match="did you mean feature_collapse"):
        R.select(CLAIMS, "feature-colapse", strict=True)
    with pytest.raises(InputError, match=r"did you mean scl\b"):
        R.select(CLAIMS, "scll", strict=True)
    with pytest.raises(InputError, match="did you mean"):
        R.get("ufm.ce.optimal-valeu")
    assert R.select(CLAIMS, "scll") == []  # not strict: an API caller gets an empty list


def test_cli_unknown_only_is_exit_2_with_suggestion(capsys):
    assert main(["run", "--only", "feature-colapse", "--quiet", "--report", "", "--json", ""]) == 2
    err = capsys.readouterr().err
    assert "did you mean feature_collapse" in err and len(err.strip().splitlines()) == 1
    assert main(["list", "--only", "feature-collapse", "--only", "nosuchthing"]) == 2


def test_list_json_shows_aliases(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["list", "--only", "ufm_general", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["claims"] if isinstance(out, dict) else out
    by_id = {r["id"]: r for r in rows}
    assert by_id["ufm_general.label-smoothing.optimal-value"]["aliases"] == ["ufm-ls-optimal-value"]


def test_counts_from_a_report_saved_with_former_ids():
    rep = {"claims": [{"id": "ufm-ce-optimal-value", "checks": [{"verdict": "VERIFIED", "independent": True}]}]}
    assert R.counts_from_report(rep)["ufm.ce.optimal-value"]["independent"] == 1


def test_cli_accepts_the_family_spelling_for_solve_and_table(capsys):
    from proofs_check.cli import build_parser

    _, smap, tmap, _ = build_parser()
    assert smap["feature_collapse"] is smap["feature-collapse"] and tmap["feature_collapse"] is tmap["feature-collapse"]
    assert smap["ufm_general"] is smap["ufm"]  # the any-loss engine, claim family ufm_general
    outs = []
    for name in ("feature-collapse", "feature_collapse"):
        assert main(["table", name, "--concepts", "2", "--length", "2", "--words-per-concept", "2",
                     "--lambdas", "0.01", "--format", "csv"]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and outs[0].count("\n") >= 2


def test_list_text_shows_former_ids(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["list", "--only", "ntk.e-zero"]) == 0
    assert "(former id: ntk-e-zero)" in capsys.readouterr().out


def test_a_statement_with_a_corrected_sibling_is_expected_refuted():
    """By the naming convention, ``X-corrected`` registered means ``X`` is false as written: REFUTED is
    its expected answer (it does not fail ``ncproofs run``), with or without the expect-refuted tag."""
    from proofs_check import runner
    from proofs_check.core import ClaimResult

    ids = {c.id for c in CLAIMS}
    pairs = [c for c in CLAIMS if f"{c.id}-corrected" in ids]
    if not pairs:
        pytest.skip("no X / X-corrected pair registered")
    x = pairs[0]
    refuted = ClaimResult(x, Verdict.REFUTED, "witness", [Check("w", Verdict.REFUTED, "witness")], 0.0)
    assert runner.refuted_as_expected(refuted)
    other = next(c for c in CLAIMS if f"{c.id}-corrected" not in ids and "expect-refuted" not in c.tags)
    assert not runner.refuted_as_expected(ClaimResult(other, Verdict.REFUTED, "w", [], 0.0))
    run = runner.RunResult([refuted], __import__("proofs_check.core", fromlist=["RunContext"]).RunContext(), 0.0)
    assert run.exit_status == 0


CLAIMS_DIR = Path(R.__file__).resolve().parent / "claims"
FORMER_ID_KEYWORDS = ("id", "id_")


def id_keywords(source: str, filename: str = "<source>") -> list[str]:
    """``name:line:param`` for every public function (module level or a public class's method) of ``source``
    that takes a parameter spelled ``id`` or ``id_`` (positional, keyword-only or positional-only)."""
    found = []

    def scan(fn, owner=""):
        a = fn.args
        for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
            if p.arg in FORMER_ID_KEYWORDS:
                found.append(f"{filename}:{fn.lineno}:{owner}{fn.name}({p.arg}=)")

    for node in ast.parse(source, filename).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            scan(node)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and not sub.name.startswith("_"):
                    scan(sub, f"{node.name}.")
    return found


def test_the_id_keyword_scan_finds_id_and_id_underscore():
    src = ("def a_claim(x, *, id='f.x'):\n    pass\n"
           "def b_claim(id_, /):\n    pass\n"
           "def c_claim(*, claim_id='f.c'):\n    pass\n"
           "def _private(id=None):\n    pass\n"
           "class Maker:\n    def make(self, id=None):\n        pass\n")
    assert id_keywords(src, "m.py") == ["m.py:1:a_claim(id=)", "m.py:3:b_claim(id_=)", "m.py:10:Maker.make(id=)"]


def test_no_claim_factory_takes_its_id_as_id_or_id_underscore():
    """docs/DEVELOPING.md "Naming": every factory in proofs_check/claims/*.py takes the claim's id as
    ``claim_id=`` (crh's factories took ``id=``, deep_ufm's and ntk's ``id_=``)."""
    files = sorted(CLAIMS_DIR.glob("*.py"))
    assert len(files) > 10, f"expected the claim modules under {CLAIMS_DIR}"
    offenders = [hit for f in files for hit in id_keywords(f.read_text(), f.name)]
    assert not offenders, "take the claim id as claim_id=: " + ", ".join(offenders)
