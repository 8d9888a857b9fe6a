"""`table scl` against an independent evaluation of the loss of docs/scl.md (sum over anchors of
LSE_{l != i}(G_il / tau) - mean_{j in P(i)} G_ij / tau), written here, at the collapsed orthogonal frame
(Theorem 1's bound) and the collapsed simplex ETF (the ETF value), for imbalanced, balanced and singleton counts at
tau at both ends of its range; and a profile whose class count can never fit is refused before its counts are built
(`--profile step --classes 100000000` ran for minutes before the sample-limit refusal)."""

import json

import numpy as np
import pytest
from scipy.special import logsumexp

from proofs_check.cli import main


def _loss_at_gram(G, y, tau):
    total = 0.0
    for i in range(len(y)):
        pos = [j for j in range(len(y)) if j != i and y[j] == y[i]]
        if not pos:
            continue
        others = [l for l in range(len(y)) if l != i]
        total += logsumexp(G[i, others] / tau) - np.mean(G[i, pos]) / tau
    return total


def _grams(counts):
    y = np.repeat(np.arange(len(counts)), counts)
    k = len(counts)
    same = (y[:, None] == y[None]).astype(float)
    return y, same, same + (1 - same) * (-1.0 / (k - 1))


@pytest.mark.parametrize("counts", [(5, 3, 2), (4, 4, 4), (2, 1), (3, 1, 1), (2, 2)])
def test_table_scl_rows_match_the_loss_at_the_configurations(capsys, counts):
    taus = [0.0001, 0.5, 3.0, 1e8]
    rc = main(["table", "scl", "--counts", ",".join(map(str, counts)), "--tau", ",".join(map(repr, taus)),
               "--format", "json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    cols = out["columns"]
    rows = [dict(zip(cols, r)) for r in out["rows"]]
    y, of_gram, etf_gram = _grams(counts)
    N = sum(counts)
    for row, tau in zip(rows, taus):
        assert row["tau"] == tau and row["N"] == N
        assert row["theorem1_bound"] == pytest.approx(_loss_at_gram(of_gram, y, tau), rel=1e-12, abs=1e-12)
        assert row["etf_value"] == pytest.approx(_loss_at_gram(etf_gram, y, tau), rel=1e-12, abs=1e-12)
        assert row["bound_per_sample"] == pytest.approx(row["theorem1_bound"] / N, rel=1e-14)
        lim0 = sum(n * np.log(n - 1) for n in counts if n >= 2)
        liminf = sum(n * np.log(N - 1) for n in counts if n >= 2)
        assert row["bound_tau_to_0"] == pytest.approx(lim0, rel=1e-14, abs=1e-14)
        assert row["bound_tau_to_inf"] == pytest.approx(liminf, rel=1e-14)
        if len(set(counts)) == 1:
            assert row["relu_cost"] == pytest.approx(row["theorem1_bound"] - row["etf_value"], abs=1e-12)
        else:
            assert row["relu_cost"] is None


@pytest.mark.parametrize("profile", ["step", "longtail"])
def test_profile_with_more_classes_than_samples_allowed_is_refused_first(capsys, profile):
    rc = main(["table", "scl", "--tau", "0.5", "--profile", profile, "--classes", "100000000", "--majority", "10",
               "--ratio", "2", "--format", "md"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and "--classes" in err and "200000" in err


def test_profile_counts_generators_refuse_before_building():
    from theory import scl as T
    from theory._validate import InstanceError

    with pytest.raises(InstanceError, match="--classes"):
        T.step_counts(10**12, 10, 2.0)
    with pytest.raises(InstanceError, match="--classes"):
        T.longtail_counts(10**12, 10, 2.0)
    assert T.step_counts(4, 10, 2.0, 0.5) == (10, 10, 5, 5)
