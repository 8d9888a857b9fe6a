"""Feature collapse, type I: `constants-identity` compares the claimed t* with a* b* and n_w a*^2 with K L b*^2. The
theory derives a* = (t*^2 K L / n_w)^(1/4) and b* = (t*^2 n_w / (K L))^(1/4) from t*, so for its own prediction
the comparison holds by construction: it is a consistency check of the claimed constants and must not count as
independent evidence (it did: `independent` was true). It still fails for inconsistent claimed constants."""

import dataclasses

from proofs_check.claims.feature_collapse import check_instance
from proofs_check.core import Verdict
from theory import feature_collapse as T
from theory.feature_collapse import FCInstance

INST = FCInstance(2, 2, 2, 3, 0.05)


def _check(rep, name):
    return next(c for c in rep.claims if c.name == name)


def test_theory_constants_are_consistent_but_not_independent():
    rep = check_instance(INST, n_starts=1, seed=0, cvxpy="no")
    c = _check(rep, "constants-identity")
    assert c.verdict is Verdict.VERIFIED and c.independent is False
    # the value and minimiser statements carry the independent evidence
    assert _check(rep, "optimal-value").independent and _check(rep, "minimiser-type-i").independent
    assert rep.verdict is Verdict.VERIFIED


def test_inconsistent_claimed_constants_are_refuted():
    def predict(inst):
        p = T.type1_prediction(inst)
        return dataclasses.replace(p, a=p.a * 1.01)

    rep = check_instance(INST, predict=predict, n_starts=1, seed=0, cvxpy="no")
    assert _check(rep, "constants-identity").verdict is Verdict.REFUTED
