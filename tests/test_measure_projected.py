"""The projected route of `ncproofs measure` (theory.metrics.ProjectedScatter, docs/measure.md "Two passes when
K is small"): for K well below d, a scatter-free first pass and then the K x K projection M_r (N Sigma_W) M_r^T
about the final means. Checked against the dense float64 reference (tests/measure_reference.py, which forms the
d x d Sigma_W and pinv(Sigma_B) literally), on nearly collapsed data far from the origin, on imbalanced data, for
any number of workers (bit for bit), and the route choice itself."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from measure_reference import reference_metrics, synthetic  # noqa: E402

from proofs_check import cli  # noqa: E402
from theory import metrics as MT  # noqa: E402

RTOL = 1e-8  # tests/test_measure.py's reproduction tolerance
KEYS = ["nc1", "nc1_trace", "cdnv_mean", "cdnv_max", "equinorm", "equiangularity", "max_equiangularity",
        "gram_distance_etf"]


def _close(got: dict, ref: dict, keys, rtol=RTOL):
    for k in keys:
        r, g = ref[k], got[k]
        assert g is not None and np.isfinite(g), k
        assert abs(g - r) <= rtol * max(abs(r), 1e-300), (k, g, r)


def _measure(tmp_path, capsys, H, y, *extra):
    np.save(tmp_path / "f.npy", H)
    np.save(tmp_path / "y.npy", y)
    rc = cli.main(["measure", str(tmp_path / "f.npy"), "--labels", str(tmp_path / "y.npy"), "--json", *extra])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    return json.loads(cap.out)


def test_route_rule_flops():
    # per sample: 2 d K + K^2 (+ the shared 6 d) against d^2: chosen where it saves at least half
    assert MT.projected_route_cheaper(512, 10) and MT.projected_route_cheaper(512, 100)
    assert not MT.projected_route_cheaper(512, 200)      # 2 * 512 * 200 + 200^2 > 0.5 * 512^2
    assert not MT.projected_route_cheaper(512, 1000)     # K >= d: the d x d scatter is needed (Sigma_B full rank)
    assert not MT.projected_route_cheaper(8, 2)          # small d: the one pass is cheaper
    assert MT.projected_route_cheaper(64, 2)
    for d in range(1, 80):
        for K in range(1, 2 * d):
            if MT.projected_route_cheaper(d, K):
                assert K < d and 2 * d * K + K * K + 6 * d <= 0.5 * (d * d + 6 * d)


def test_cli_projected_route_matches_reference_far_from_origin(tmp_path, capsys):
    # nearly collapsed (spread 1e-5 of the means' norm) around a common offset of 100 x the norm: the naive
    # one-pass formula loses ~1e14 here; both routes of measure keep 1e-8
    rng = np.random.default_rng(3)
    K, d, N = 4, 64, 4000
    means = rng.normal(size=(K, d))
    y = rng.integers(0, K, size=N)
    y[:K] = np.arange(K)
    H = 100.0 * rng.normal(size=d) + means[y] + 1e-5 * rng.normal(size=(N, d))
    out = _measure(tmp_path, capsys, H, y, "--batch-size", "97", "--workers", "2")
    assert out["instance"]["passes"].startswith("two passes (shifted sums, then the K x K projection")
    ref = reference_metrics(H, y)
    _close(out["metrics"], ref, KEYS)
    one = _measure(tmp_path, capsys, H, y, "--batch-size", "97", "--passes", "1")
    assert one["instance"]["passes"].startswith("one pass")
    _close(one["metrics"], ref, KEYS)


def test_cli_projected_route_workers_bit_for_bit(tmp_path, capsys):
    H, y, _, _ = synthetic(seed=11, N=6000, d=48, K=3, imbalance=True)
    outs = [_measure(tmp_path, capsys, H.astype(np.float32), y, "--batch-size", "50", "--workers", str(w))
            for w in (1, 2, 3)]
    assert all(o["instance"]["passes"].startswith("two passes (shifted") for o in outs)
    assert outs[0]["metrics"] == outs[1]["metrics"] == outs[2]["metrics"]
    ref = reference_metrics(H.astype(np.float32).astype(np.float64), y)
    _close(outs[0]["metrics"], ref, KEYS)


def test_cli_projected_route_with_weights_does_nc4_in_the_same_second_read(tmp_path, capsys):
    H, y, W, b = synthetic(seed=2, N=900, d=40, K=3, imbalance=True)
    np.savez(tmp_path / "a.npz", features=H, labels=y, weights=W, bias=b)
    outs = {}
    for p in ("auto", "1"):
        rc = cli.main(["measure", str(tmp_path / "a.npz"), "--json", "--passes", p, "--batch-size", "70",
                       "--predict", "ufm-ce", "--lambda-w", "1e-3", "--lambda-h", "1e-3"])
        cap = capsys.readouterr()
        assert rc == 0, cap.err
        outs[p] = json.loads(cap.out)
    assert "NC4 in the same second read" in outs["auto"]["instance"]["passes"]
    assert outs["1"]["instance"]["passes"].startswith("one pass") and "NC4" in outs["1"]["instance"]["passes"]
    ref = reference_metrics(H, y, W, b)
    for o in outs.values():
        _close(o["metrics"], ref, KEYS + ["nc3"])
        assert o["metrics"]["nc4"] == ref["nc4"]
    # the network's own objective (the CE loss accumulated in the NC4 read) is the same on both routes
    fa, f1 = outs["auto"]["network_objective"]["value"], outs["1"]["network_objective"]["value"]
    assert fa is not None and abs(fa - f1) <= 1e-12 * abs(f1)


def test_cli_projected_route_not_used_when_k_reaches_d(tmp_path, capsys):
    H2, y2, _, _ = synthetic(seed=4, N=900, d=6, K=8)
    out2 = _measure(tmp_path, capsys, H2, y2)
    assert out2["instance"]["passes"].startswith("one pass")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(K=st.integers(2, 6), extra=st.integers(0, 30), N=st.integers(20, 300), B=st.integers(5, 64),
       seed=st.integers(0, 10 ** 6), scale=st.sampled_from([1e-6, 1.0, 1e4]))
def test_projected_scatter_matches_reference_any_sizes(K, extra, N, B, seed, scale):
    d = 5 * K + 10 + extra  # inside the projected route's region
    assert MT.projected_route_cheaper(d, K)
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(K, d)) * scale
    y = rng.integers(0, K, size=max(N, K))
    y[:K] = rng.permutation(K)
    H = means[y] + 0.3 * scale * rng.normal(size=(y.size, d)) + 5.0 * scale
    pass1 = MT.ClassStats(K, d, scatter=False)
    for s in range(0, y.size, B):
        pass1.update(H[s:s + B], y[s:s + B])
    proj = MT.ProjectedScatter(pass1)
    for s in range(0, y.size, B):
        proj.update(H[s:s + B], y[s:s + B])
    got = MT.collapse_metrics(pass1, proj).metrics
    ref = reference_metrics(H, y)
    _close(got, ref, ["nc1", "nc1_trace", "cdnv_mean"], rtol=1e-7)
    for k in ("equinorm", "gram_distance_etf"):  # both are 0 in exact arithmetic at K = 2
        assert abs(got[k] - ref[k]) <= 1e-7 * max(ref[k], 1e-8), (k, got[k], ref[k])


def test_projected_scatter_misuse_is_refused():
    H, y, _, _ = synthetic(seed=1, N=200, d=20, K=3)
    full = MT.ClassStats(3, 20).update(H, y)
    with pytest.raises(TypeError):
        MT.ProjectedScatter(full)  # the first pass must be scatter-free (nothing to project otherwise)
    p1 = MT.ClassStats(3, 20, scatter=False).update(H, y)
    proj = MT.ProjectedScatter(p1).update(H[:150], y[:150])
    with pytest.raises(MT.InputError, match="second pass saw 150 samples"):
        MT.collapse_metrics(p1, proj)  # the second pass must see the same samples
    other = MT.ClassStats(3, 20, scatter=False).update(H, y)
    with pytest.raises(TypeError):
        MT.collapse_metrics(other, MT.ProjectedScatter(p1))
    bad = H.copy()
    bad[7, 3] = np.nan
    with pytest.raises(MT.InputError, match="finite"):
        MT.ProjectedScatter(p1).update(bad, y)


def test_projected_route_serves_a_dimension_whose_scatter_does_not_fit(tmp_path, capsys, monkeypatch):
    # the one-pass d x d accumulators are over the (lowered) budget; the projected route keeps no d x d matrix
    H, y, _, _ = synthetic(seed=8, N=700, d=60, K=3)
    monkeypatch.setattr(MT, "ONE_PASS_TOTAL_BYTES", 1000.0)
    out = _measure(tmp_path, capsys, H, y, "--workers", "2", "--batch-size", "64")
    assert out["instance"]["passes"].startswith("two passes (shifted sums") and out["instance"]["workers"] == 2
    _close(out["metrics"], reference_metrics(H, y), KEYS)
    assert cli.main(["measure", str(tmp_path / "f.npy"), "--labels", str(tmp_path / "y.npy"), "--passes", "1"]) == 2
    assert "--passes 1 needs" in capsys.readouterr().err


def test_projected_pass_runs_on_one_blas_thread(tmp_path, monkeypatch):
    pytest.importorskip("threadpoolctl")
    from threadpoolctl import threadpool_info

    from proofs_check import measure as PM

    seen = []
    orig = MT.ProjectedScatter.update

    def update(self, *a, **k):
        seen.append([i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"])
        return orig(self, *a, **k)

    monkeypatch.setattr(MT.ProjectedScatter, "update", update)
    H, y, _, _ = synthetic(seed=9, N=300, d=40, K=2)
    np.save(tmp_path / "f.npy", H)
    np.save(tmp_path / "y.npy", y)
    out = PM.measure(tmp_path / "f.npy", tmp_path / "y.npy", workers=2, batch_size=30)
    assert out["instance"]["passes"].startswith("two passes (shifted sums")
    assert seen and all(n == 1 for threads in seen for n in threads)


def test_time_limit_refusal_is_stated_in_work_and_does_not_depend_on_the_machine(tmp_path, capsys, monkeypatch):
    from theory import _work

    H, y, _, _ = synthetic(seed=3, N=400, d=30, K=3)
    np.save(tmp_path / "f.npy", H)
    np.save(tmp_path / "y.npy", y)
    assert MT.projected_route_cheaper(30, 3)
    work = MT.estimate_work(400, 30, 3, route="projected")["total_work"]
    limit_ok = 1.01 * work / MT.GEMM_FLOPS_PER_S  # just above the estimate: accepted
    limit_bad = 0.99 * work / MT.GEMM_FLOPS_PER_S  # just below: refused
    for rate in (1e8, 5e10, 1e13):  # a machine 500x slower, the calibration machine, 200x faster
        monkeypatch.setattr(_work, "_MEASURED", [rate])
        args = ["measure", str(tmp_path / "f.npy"), "--labels", str(tmp_path / "y.npy"), "--json"]
        assert cli.main(args + ["--time-limit", repr(limit_ok)]) == 0
        capsys.readouterr()
        assert cli.main(args + ["--time-limit", repr(limit_bad)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.count("flop-equivalents") >= 2, err
        assert f"estimated work {work:.3g} flop-equivalents" in err and "--time-limit" in err
        assert f"measured single-thread rate {rate / 1e9:.3g} Gflop/s" in err


def test_work_estimate_follows_the_route():
    # the projected route's products are d K + K^2 / 2 multiply-adds per sample, not the d^2 / 2 of the syrk
    one = MT.estimate_work(3000, 20000, 5, route="one")["passes_work"]
    proj = MT.estimate_work(3000, 20000, 5, route="projected")["passes_work"]
    elem = 20.0 * 3000 * 20000 * MT.GEMM_FLOPS_PER_S / MT.ELEMENTWISE_PER_S
    assert proj - elem == pytest.approx(3000 * (20000 * 5 + 12.5))
    assert one - elem == pytest.approx(3000 * 20000 * 10000.0)
    with pytest.raises(MT.InputError, match="route must be one of"):
        MT.estimate_work(10, 4, 2, route="fast")
