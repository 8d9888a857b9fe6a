"""`solve feature-collapse-hier`: widths below the number of meta-concepts are refused naming --dims and
--meta-concepts. The level-2 relaxation (Theorem 3 with the chunks as words) and the constructed minimiser put a
simplex ETF of the n_m meta-concepts among LayerNorm outputs (orthogonal to 1), so d1, d2 >= n_m. Before, the
refusal came from the flat instance and named neither option ("d must be >= n_c = 3 ..., got d = 2"). At
d1 = d2 = n_m the instance runs, and layer 1 is left undecided (the witness needs d1 >= n_m + 1)."""

import json

import pytest

from proofs_check.cli import main
from theory._validate import InstanceError
from theory.feature_collapse_hier import HierInstance


@pytest.mark.parametrize("dims, named", [("2,4", "d1"), ("4,2", "d2"), ("2,2", "d1")])
def test_width_below_meta_concepts_is_refused_naming_the_options(capsys, dims, named):
    rc = main(["solve", "feature-collapse-hier", "--starts", "0", "--dims", dims])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1
    assert f"{named} (--dims)" in err and "--meta-concepts" in err and "= 3" in err


def test_instance_refuses_it_too():
    with pytest.raises(InstanceError, match=r"d2 \(--dims\) must be >= n_m \(--meta-concepts\) = 5"):
        HierInstance(n_m=5, n_c=1, s_c=1, L1=1, L2=1, d1=5, d2=4)


def test_width_equal_to_meta_concepts_runs(capsys):
    rc = main(["solve", "feature-collapse-hier", "--starts", "0", "--meta-concepts", "2", "--dims", "2,2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    verdicts = {c["id"]: c["verdict"] for c in out["claims"]}
    assert verdicts["layer-2-collapse"] == "VERIFIED"
    assert verdicts["layer-1-collapse"] == "INCONCLUSIVE"
