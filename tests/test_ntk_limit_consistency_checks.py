"""`solve ntk` small-initialisation limits: `||mu_c - h_bar||^2` and `||W||_F^2 of the predicted limit` compare the
stated norms with those of M = sqrt(gram_scale) J_C and W = self_duality M^T. The theory states mean_sq_norm =
gram_scale (1 - 1/C) and W_fro_sq = (C - 1)/gram_scale with self_duality = 1/gram_scale, so for its own limits the
comparison holds by construction: a consistency check, not independent evidence (it counted as independent). Wrong
stated norms are still REFUTED, and the fixed-point residuals and the rates stay independent."""

from proofs_check.claims import ntk as cl
from proofs_check.core import Verdict
from theory import ntk as th


def test_norm_checks_are_consistency_checks():
    inst = th.NTKInstance(3, 4, (1.0, 0.6, 0.2))
    lim = th.small_init_limits(inst)
    # the relations that make the comparison hold by construction, evaluated here
    r = lim["gram_scale"]
    assert abs(lim["mean_sq_norm"] - r * (1 - 1 / 3)) <= 1e-15 and abs(lim["W_fro_sq"] - 2 / r) <= 1e-14
    checks = {c.name.split(" of the predicted")[0]: c for c in cl.limit_fixed_point_checks(inst, lim)}
    for name in ("||mu_c - h_bar||^2", "||W||_F^2"):
        assert checks[name].verdict is Verdict.VERIFIED and checks[name].independent is False
    independent = [c for c in checks.values() if c.independent]
    assert independent and all(c.verdict is Verdict.VERIFIED for c in independent)
    assert any(n.startswith("zero loss") for n in checks) and any(n.startswith("E = 0") for n in checks)


def test_wrong_stated_norms_are_refuted():
    inst = th.NTKInstance(2, 3, (2.0, 0.1, 0.4))
    for key in ("mean_sq_norm", "W_fro_sq"):
        lim = dict(th.small_init_limits(inst))
        lim[key] *= 1.001
        assert any(c.verdict is Verdict.REFUTED for c in cl.limit_fixed_point_checks(inst, lim)), key
