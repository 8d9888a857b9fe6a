"""Feature collapse without LayerNorm, non-uniform word frequencies: ``minimiser-zero`` at the doubles either side of
the exact threshold ||grad CE(0)||_2, computed here independently: the exact risk's gradient at Z = 0 enumerated
sentence by sentence in rationals (the frequencies as their doubles, normalised exactly) and its largest singular
value in mpmath at 60 digits. Above the threshold W = U = 0 is the unique minimiser (VERIFIED); below it it is not a
minimiser, so the statement must never be VERIFIED. The tool's reported threshold must agree to its round-off."""

import itertools
import json
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from proofs_check.cli import main


def _exact_threshold(n_c, L, s_c, freqs):
    mu = [Fraction(f) for f in freqs]
    total = sum(mu)
    mu = [m / total for m in mu]
    latents = list(itertools.product(range(n_c), repeat=L))
    K = len(latents)
    G = [[Fraction(0)] * (n_c * s_c) for _ in range(K * L)]
    for j, z in enumerate(latents):  # class j; sentence = one word per position
        for betas in itertools.product(range(s_c), repeat=L):
            p = Fraction(1, K)
            for b in betas:
                p *= mu[b]
            for l in range(L):
                w = z[l] * s_c + betas[l]
                for k in range(K):  # d CE / d score_k = softmax_k - [k = j] = 1/K - [k = j] at Z = 0
                    G[k * L + l][w] += p * (Fraction(1, K) - (1 if k == j else 0))
    with mp.workdps(60):
        A = mp.matrix([[mp.mpf(x.numerator) / x.denominator for x in row] for row in G])
        return mp.sqrt(max(mp.eigsy(A.T * A)[0]))


def _doubles_around(x):
    lo = float(x)
    if mp.mpf(lo) > x:
        lo = float(np.nextafter(lo, 0.0))
    hi = float(np.nextafter(lo, 1.0))
    assert mp.mpf(lo) < x < mp.mpf(hi)
    return lo, hi


@pytest.mark.parametrize("n_c, L, s_c, freqs", [(3, 1, 2, "0.9,0.1"), (2, 2, 3, "0.7,0.2,0.1")])
def test_minimiser_zero_at_the_doubles_around_the_exact_threshold(capsys, n_c, L, s_c, freqs):
    exact = _exact_threshold(n_c, L, s_c, [float(f) for f in freqs.split(",")])
    below, above = _doubles_around(exact)
    verdicts = {}
    for lam in (below, above):
        rc = main(["solve", "feature-collapse", "--concepts", str(n_c), "--length", str(L), "--words-per-concept",
                   str(s_c), "--dim", "3", "--freqs", freqs, "--lambda", repr(lam), "--cvxpy", "no", "--json"])
        out = json.loads(capsys.readouterr().out)
        assert rc in (0, 1)
        assert out["predicted"]["exact_threshold"] == pytest.approx(float(exact), rel=1e-14)
        claims = {c["id"]: c["verdict"] for c in out["claims"]}
        verdicts[lam] = {k: v for k, v in claims.items() if k.startswith("minimiser-")}
    assert verdicts[above] == {"minimiser-zero": "VERIFIED"}
    # below: zero is not a minimiser, and the minimiser (of scale ~1e-8) is not resolved: no minimiser statement holds
    assert verdicts[below] and "VERIFIED" not in verdicts[below].values()
    assert verdicts[below].get("minimiser-zero") in (None, "INCONCLUSIVE", "REFUTED")


def test_layernorm_two_words_value_by_hand(capsys):
    """n_c = 2, L = 1, s_c = 1, d = 2 with LayerNorm: the embeddings are +-(1, -1) and u_0 = -u_1 = c (1, -1)/sqrt 2,
    so the objective is log(1 + exp(-2 sqrt 2 c)) + lambda c^2, minimised here in one variable."""
    from scipy.optimize import minimize_scalar

    lam = 0.05
    f = lambda c: np.log1p(np.exp(-2 * np.sqrt(2) * c)) + lam * c * c  # noqa: E731
    r = minimize_scalar(f, bounds=(0, 20), method="bounded", options={"xatol": 1e-12})
    rc = main(["solve", "feature-collapse", "--concepts", "2", "--length", "1", "--words-per-concept", "1", "--dim", "2",
               "--lambda", "0.05", "--layernorm", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["verdict"] == "VERIFIED"
    assert out["predicted"]["value"] == pytest.approx(r.fun, rel=1e-9)
    assert out["predicted"]["b"] == pytest.approx(r.x, rel=1e-6)
    assert out["certificate"]["lower_bound"] <= r.fun + 1e-12
