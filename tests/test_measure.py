"""ncproofs measure: metrics reproduced against an independent dense implementation (tests/measure_reference.py)
in every file format and layout, closed-form configurations, undefined metrics, predictions, bad inputs."""

from __future__ import annotations

import json
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from measure_reference import reference_metrics, synthetic  # noqa: E402

from proofs_check import cli  # noqa: E402
from proofs_check import measure as PM  # noqa: E402
from theory import metrics as MT  # noqa: E402

RTOL = 1e-8  # the reproduction tolerance (float64 sums agree to ~1e-14 in practice)


def _close(got: dict, ref: dict, keys=None):
    for k in keys or ref:
        r, g = ref[k], got[k]
        if r is None:
            assert g is None, k
            continue
        assert g is not None, k
        assert abs(g - r) <= RTOL * max(abs(r), 1e-300) or (r == 0 and abs(g) < 1e-12), (k, g, r)


def run_cli(capsys, *argv):
    rc = cli.main(["measure", *map(str, argv)])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def run_json(capsys, *argv):
    rc, out, err = run_cli(capsys, *argv, "--json")
    assert rc == 0, err
    return json.loads(out)


# ---------------------------------------------------------------------------------------------
# Formats and layouts
# ---------------------------------------------------------------------------------------------

def _write(fmt: str, tmp_path, H, y, W=None, b=None, layout="nd"):
    Hs = H if layout == "nd" else np.ascontiguousarray(H.T)
    arrays = {"features": Hs, "labels": y}
    if W is not None:
        arrays["weights"] = W
    if b is not None:
        arrays["bias"] = b
    if fmt == "npy":
        np.save(tmp_path / "f.npy", Hs)
        np.save(tmp_path / "y.npy", y)
        args = [tmp_path / "f.npy", "--labels", tmp_path / "y.npy"]
        if W is not None:
            np.save(tmp_path / "w.npy", W)
            args += ["--weights", tmp_path / "w.npy"]
        if b is not None:
            np.save(tmp_path / "b.npy", b)
            args += ["--bias", tmp_path / "b.npy"]
        return args
    if fmt == "npy-fortran":
        np.save(tmp_path / "f.npy", np.asfortranarray(Hs))
        np.save(tmp_path / "y.npy", y)
        return [tmp_path / "f.npy", "--labels", tmp_path / "y.npy"] + (
            ["--weights", _save(tmp_path / "w.npy", W)] if W is not None else []) + (
            ["--bias", _save(tmp_path / "b.npy", b)] if b is not None else [])
    if fmt == "npz":
        np.savez(tmp_path / "a.npz", **arrays)
        return [tmp_path / "a.npz"]
    if fmt == "npz-compressed":
        np.savez_compressed(tmp_path / "a.npz", **arrays)
        return [tmp_path / "a.npz"]
    if fmt == "pt":
        torch = pytest.importorskip("torch", reason="torch is an optional extra ([torch]); .pt needs it")
        torch.save({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}, tmp_path / "a.pt")
        return [tmp_path / "a.pt"]
    if fmt == "safetensors":
        st = pytest.importorskip("safetensors.numpy", reason="the safetensors package (an optional extra) writes "
                                                             "the test file; reading needs no package")
        st.save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, str(tmp_path / "a.safetensors"))
        return [tmp_path / "a.safetensors"]
    raise AssertionError(fmt)


def _save(path, a):
    np.save(path, a)
    return path


FORMATS = ["npy", "npy-fortran", "npz", "npz-compressed", "pt", "safetensors"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("layout", ["nd", "dn"])
def test_every_format_and_layout_reproduces_reference(tmp_path, capsys, fmt, layout):
    H, y, W, b = synthetic(seed=3, N=700, d=6, K=9, imbalance=True)  # K > d: d x d scatter route
    ref = reference_metrics(H, y, W, b)
    out = run_json(capsys, *_write(fmt, tmp_path, H, y, W, b, layout), "--batch-size", 64)
    assert out["instance"]["layout"] == layout
    assert out["classes"] == 9 and out["samples"] == 700 and out["dim"] == 6
    assert out["counts"] == np.bincount(y).tolist()
    _close(out["metrics"], ref, [k for k in ref if k != "gram_distance_predicted"])
    assert out["metrics"]["gram_distance_predicted"] is None
    assert "verdict" not in out


@pytest.mark.parametrize("K,d", [(4, 20), (12, 3), (2, 1), (30, 30)])
def test_arrays_reproduce_reference_shapes(K, d):
    H, y, W, b = synthetic(seed=K + d, N=40 * K, d=d, K=K)
    ref = reference_metrics(H, y, W, b)
    got = MT.measure_arrays(H, y, W, b, batch_size=37).metrics
    _close(got, ref, [k for k in ref if k != "gram_distance_predicted"])


def test_tiles_and_predicted_gram_match_reference():
    H, y, W, b = synthetic(seed=5, N=900, d=7, K=15)
    K = 15
    rng = np.random.default_rng(2)
    A = rng.normal(size=(K, 3))
    P = A @ A.T
    ref = reference_metrics(H, y, W, b, P)
    acc = MT.ClassMeans()
    for s in range(0, 900, 111):
        acc.update(H[s:s + 111], y[s:s + 111])
    sc = MT.ClassScatter(acc, W, b, tile_bytes=8 * 7 * K * 2)  # 2-row tiles, 8 tiles
    for s in range(0, 900, 50):
        sc.update(H[s:s + 50], y[s:s + 50])
    got = MT.collapse_metrics(acc, sc, predicted=MT.PredictedGram("dense", matrix=P)).metrics
    _close(got, ref)
    # the structured form a I + b 11^T against its dense matrix
    E = np.eye(K) - 1.0 / K
    ref_e = reference_metrics(H, y, None, None, E)
    got_e = MT.measure_arrays(H, y, predicted=MT.PredictedGram("etf", 1.0, None)).metrics
    _close(got_e, ref_e)
    assert got_e["gram_distance_predicted"] == pytest.approx(got_e["gram_distance_etf"], rel=1e-12)


def test_torch_tensors_and_float32_accumulation():
    torch = pytest.importorskip("torch", reason="torch is an optional extra ([torch])")
    H, y, W, b = synthetic(seed=8, N=500, d=5, K=6)
    ref = reference_metrics(H, y, W, b)
    got = MT.measure_arrays(torch.tensor(H), torch.tensor(y), torch.tensor(W), torch.tensor(b), batch_size=64).metrics
    _close(got, ref, [k for k in ref if k != "gram_distance_predicted"])
    # float32 accumulation is less accurate but close (1e-4 relative on this well-conditioned set)
    g32 = MT.measure_arrays(H, y, W, b, dtype="float32").metrics
    assert g32["nc1"] == pytest.approx(ref["nc1"], rel=1e-4)


def test_centring_is_the_mean_of_class_means_not_the_global_mean():
    """Imbalance must not move the centre: two classes with means +-e1 and 9:1 counts still have an exact
    antipodal (K = 2 simplex ETF) centred Gram."""
    d = 3
    H = np.zeros((100, d))
    H[:90, 0] = 1.0
    H[90:, 0] = -1.0
    y = np.r_[np.zeros(90, int), np.ones(10, int)]
    m = MT.measure_arrays(H, y).metrics
    assert m["gram_distance_etf"] == pytest.approx(0.0, abs=1e-14)
    assert m["equinorm"] == pytest.approx(0.0, abs=1e-14)


# ---------------------------------------------------------------------------------------------
# Closed-form configurations (independent of any implementation)
# ---------------------------------------------------------------------------------------------

def test_collapsed_simplex_etf_has_zero_metrics():
    K, d, n = 5, 6, 4
    from theory.geometry import simplex_etf

    Mu = simplex_etf(K, d, 2.0).T  # K x d, norms 2
    y = np.repeat(np.arange(K), n)
    H = Mu[y] + 3.0  # shifted: the centre is the mean of the class means
    # the bias cancels the shift, so the logits are <mu_c', mu_c>: largest at c' = c (self-dual ETF)
    m = MT.measure_arrays(H, y, weights=Mu, bias=-Mu @ np.full(d, 3.0)).metrics
    assert m["nc1"] == 0.0 and m["nc1_trace"] == 0.0 and m["cdnv_mean"] == 0.0 and m["cdnv_max"] == 0.0
    assert m["gram_distance_etf"] < 1e-14 and m["equinorm"] < 1e-14 and m["equiangularity"] < 1e-14
    assert m["max_equiangularity"] < 1e-14 and m["nc3"] < 1e-14 and m["nc4"] == 0.0
    # cos = -1/(K-1) exactly at an ETF; the OF distance of a shifted ETF is not zero
    assert m["gram_distance_of"] > 0.1


def test_orthogonal_frame_distance_and_known_cdnv():
    K = 4
    y = np.repeat(np.arange(K), 2)
    # class c: samples e_c +- s e_{K} (within-class variance s^2), means e_c
    s = 0.1
    H = np.zeros((2 * K, K + 1))
    H[np.arange(2 * K), y] = 1.0
    H[:, K] = np.tile([s, -s], K)
    m = MT.measure_arrays(H, y).metrics
    assert m["gram_distance_of"] == pytest.approx(0.0, abs=1e-14)
    # ||mu_c - mu_c'||^2 = 2, sigma_c^2 = s^2: V = 2 s^2 / (2 * 2) = s^2 / 2
    assert m["cdnv_mean"] == pytest.approx(s * s / 2, rel=1e-13)
    assert m["cdnv_max"] == pytest.approx(s * s / 2, rel=1e-13)
    # NC1: Sigma_W = s^2 e_K e_K^T is orthogonal to the range of Sigma_B: NC1 = 0, trace ratio > 0
    assert m["nc1"] == pytest.approx(0.0, abs=1e-14)
    # tr Sigma_W = s^2, tr Sigma_B = (1/K) sum ||e_c - 1/K||^2 = (K-1)/K
    assert m["nc1_trace"] == pytest.approx(s * s / ((K - 1) / K), rel=1e-13)


# ---------------------------------------------------------------------------------------------
# Undefined metrics: null with a reason
# ---------------------------------------------------------------------------------------------

def test_single_class_metrics_are_null_with_reasons():
    H = np.random.default_rng(0).normal(size=(10, 3)) + 1.0
    res = MT.measure_arrays(H, np.zeros(10, int))
    for k in ("nc1", "nc1_trace", "cdnv_mean", "cdnv_max", "equinorm", "equiangularity", "max_equiangularity",
              "gram_distance_etf"):
        assert res.metrics[k] is None and res.reasons[k], k
    assert res.metrics["gram_distance_of"] == pytest.approx(0.0, abs=1e-14)  # one nonzero mean: U/|U| = I/1


def test_zero_between_class_scatter_is_null():
    rng = np.random.default_rng(1)
    H = rng.normal(size=(40, 3))
    H[20:] = H[:20]  # both classes: the same samples, the same mean
    y = np.r_[np.zeros(20, int), np.ones(20, int)]
    res = MT.measure_arrays(H, y, weights=rng.normal(size=(2, 3)))
    assert res.metrics["nc1"] is None and "zero between-class scatter" in res.reasons["nc1"]
    assert res.metrics["cdnv_mean"] is None and "same mean" in res.reasons["cdnv_mean"]
    assert res.metrics["nc3"] is None and res.metrics["nc4"] is not None
    assert res.metrics["gram_distance_etf"] is None


def test_zero_centred_mean_makes_cosines_null():
    # three classes on a line: means -1, 0, +1: the middle one is the centre
    H = np.array([[-1.0], [-1.0], [0.0], [0.0], [1.0], [1.0]]) + np.array([[0.1], [-0.1]] * 3)
    y = np.repeat(np.arange(3), 2)
    res = MT.measure_arrays(H, y)
    assert res.metrics["equiangularity"] is None and "class 1" in res.reasons["equiangularity"]
    assert res.metrics["cdnv_mean"] is not None and res.metrics["gram_distance_etf"] is not None


# ---------------------------------------------------------------------------------------------
# Predictions
# ---------------------------------------------------------------------------------------------

def _balanced(K=4, n=30, d=6, seed=0):
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(K, d)) * 2
    y = np.repeat(np.arange(K), n)
    return means[y] + 0.3 * rng.normal(size=(K * n, d)), y


def test_ufm_prediction_balanced_with_certificate(tmp_path, capsys):
    H, y = _balanced()
    np.savez(tmp_path / "a.npz", features=H, labels=y)
    out = run_json(capsys, tmp_path / "a.npz", "--predict", "ufm-ce", "--lambda-w", "1e-3", "--lambda-h", "1e-3")
    E = np.eye(4) - 0.25
    ref = reference_metrics(H, y, P=E)
    _close(out["metrics"], ref, ["gram_distance_predicted", "gram_distance_etf"])
    pred = out["predicted"]
    assert pred["geometry"] == "simplex-etf" and pred["trivial"] is False
    assert pred["certificate"]["run"] is True and pred["certificate"]["statements"]["geometry-simplex-etf"] == "VERIFIED"
    assert "Zhu et al." in out["provenance"]["prediction"]
    lab = [s for s in out["labels"] if "predicted" in s][0]
    assert f"{ref['gram_distance_predicted']:.3g}" in lab


def test_ufm_prediction_imbalanced_from_the_any_loss_engine_and_trivial(tmp_path, capsys):
    H, y, _, _ = synthetic(seed=1, N=300, d=5, K=3, imbalance=True)
    np.savez(tmp_path / "a.npz", features=H, labels=y)
    out = run_json(capsys, tmp_path / "a.npz", "--predict", "ufm-mse", "--lambda-w", "1e-3", "--lambda-h", "1e-3")
    pred = out["predicted"]
    assert pred["certificate"]["run"] and pred["certificate"]["statements"]["minimiser-unique"] == "VERIFIED"
    assert "not available" not in json.dumps(out)
    P = np.array(pred["predicted_centred_gram"])
    # the distance to the predicted Gram, computed by the dense reference from the reported matrix
    ref = reference_metrics(H, y, P=P)
    _close(out["metrics"], ref, ["gram_distance_predicted"])
    # features whose class means have exactly the predicted centred Gram are at distance 0 from it
    w, V = np.linalg.eigh(P)
    Mu = (V * np.sqrt(np.clip(w, 0, None)))[:, -2:]  # K x 2 (rank K-1 = 2)
    Mu = np.c_[Mu, np.zeros((3, 3))] + 5.0
    H2 = Mu[y] + 0.01 * np.random.default_rng(0).normal(size=(300, 5))
    H2 -= np.stack([H2[y == c].mean(0) for c in range(3)])[y] - Mu[y]
    np.savez(tmp_path / "c.npz", features=H2, labels=y)
    out2 = run_json(capsys, tmp_path / "c.npz", "--predict", "ufm-mse", "--lambda-w", "1e-3", "--lambda-h", "1e-3")
    assert out2["metrics"]["gram_distance_predicted"] == pytest.approx(0.0, abs=1e-8)
    H, y = _balanced(K=3, n=50)
    np.savez(tmp_path / "b.npz", features=H, labels=y)
    # s = sqrt(n lw lh) = sqrt(50) * 1 >= 1/K: trivial phase
    out = run_json(capsys, tmp_path / "b.npz", "--predict", "ufm-ce", "--lambda-w", "1", "--lambda-h", "1")
    assert out["predicted"]["trivial"] is True and out["metrics"]["gram_distance_predicted"] is None
    assert "W = H = 0" in out["reasons"]["gram_distance_predicted"]


def test_scl_prediction_nonnegative_features_is_orthogonal_frame(tmp_path, capsys):
    H, y = _balanced(K=3, n=20, d=5)
    H = np.abs(H)
    np.savez(tmp_path / "a.npz", features=H, labels=y)
    out = run_json(capsys, tmp_path / "a.npz", "--predict", "auto", "--tau", "0.5")
    assert out["predicted"]["geometry"] == "orthogonal-frame"
    assert out["predicted"]["compare_key"] == "gram_distance_of"
    ref = reference_metrics(H, y)
    assert any(f"{ref['gram_distance_of']:.3g}" in s and "predicted orthogonal-frame" in s for s in out["labels"])


def test_no_predict_means_null_prediction(tmp_path, capsys):
    H, y = _balanced()
    np.savez(tmp_path / "a.npz", features=H, labels=y)
    out = run_json(capsys, tmp_path / "a.npz")
    assert out["predicted"] is None and out["metrics"]["gram_distance_predicted"] is None
    assert "no prediction" in out["reasons"]["gram_distance_predicted"]


def test_grades_are_words_with_numbers():
    assert PM.grade(0.04) == "close to" and PM.grade(0.1) == "near" and PM.grade(0.3) == "partway to"
    assert PM.grade(1.2) == "far from" and PM.grade(None) is None
    labs = PM.graded_labels({"gram_distance_etf": 0.04, "gram_distance_of": 0.9}, None)
    assert labs == ["close to simplex ETF: Gram distance 0.04", "far from orthogonal frame: Gram distance 0.9"]


def test_plot_is_written(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="matplotlib is the optional [plots] extra")
    H, y = _balanced()
    np.savez(tmp_path / "a.npz", features=H, labels=y)
    rc, out, err = run_cli(capsys, tmp_path / "a.npz", "--plot", tmp_path / "m.png")
    assert rc == 0, err
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------------------------
# Bad inputs: one line, exit 2, naming the file or option
# ---------------------------------------------------------------------------------------------

def _bad(capsys, *argv, expect: str):
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 2, (rc, out, err)
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert expect in lines[0], lines[0]
    return lines[0]


def test_bad_files(tmp_path, capsys):
    H, y, W, b = synthetic(seed=0, N=60, d=4, K=3)
    f = tmp_path / "f.npy"
    np.save(f, H)
    lab = tmp_path / "y.npy"
    np.save(lab, y)
    _bad(capsys, tmp_path / "missing.npy", "--labels", lab, expect="no such file")
    (tmp_path / "empty").mkdir()
    _bad(capsys, tmp_path / "empty", "--labels", lab, expect="holds no checkpoint files")
    _bad(capsys, f, "--labels", tmp_path / "nope.npy", expect="--labels: no such file")
    _bad(capsys, f, expect="--labels")
    (tmp_path / "x.csv").write_text("1,2\n")
    _bad(capsys, tmp_path / "x.csv", expect="unknown format")
    np.save(tmp_path / "one.npy", H[:, 0])
    _bad(capsys, tmp_path / "one.npy", "--labels", lab, expect="2-dimensional")
    np.save(tmp_path / "three.npy", H.reshape(60, 2, 2))
    _bad(capsys, tmp_path / "three.npy", "--labels", lab, expect="reshape")
    np.save(tmp_path / "short.npy", y[:-1])
    _bad(capsys, f, "--labels", tmp_path / "short.npy", expect="59 labels")
    neg = y.copy()
    neg[5] = -1
    np.save(tmp_path / "neg.npy", neg)
    _bad(capsys, f, "--labels", tmp_path / "neg.npy", expect=">= 0")
    np.save(tmp_path / "frac.npy", y + 0.5)
    _bad(capsys, f, "--labels", tmp_path / "frac.npy", expect="integers")
    gap = y.copy()
    gap[gap == 1] = 2
    np.save(tmp_path / "gap.npy", gap)
    _bad(capsys, f, "--labels", tmp_path / "gap.npy", expect="class 1 has no sample")
    big = y.copy()
    big[0] = 10 ** 12
    np.save(tmp_path / "big.npy", big)
    _bad(capsys, f, "--labels", tmp_path / "big.npy", expect="has no sample")
    np.save(tmp_path / "w.npy", W)
    far = y.copy()
    far[0] = 3
    np.save(tmp_path / "far.npy", far)
    _bad(capsys, f, "--labels", tmp_path / "far.npy", "--weights", tmp_path / "w.npy", expect="--weights: W has 3 rows")
    np.save(tmp_path / "wt.npy", W.T.copy())
    _bad(capsys, f, "--labels", lab, "--weights", tmp_path / "wt.npy", expect="transpose")
    Hn = H.copy()
    Hn[17, 2] = np.nan
    np.save(tmp_path / "nan.npy", Hn)
    _bad(capsys, tmp_path / "nan.npy", "--labels", lab, expect="sample 17, coordinate 2")
    np.save(tmp_path / "b.npy", np.zeros(5))
    _bad(capsys, f, "--labels", lab, "--weights", tmp_path / "w.npy", "--bias", tmp_path / "b.npy",
         expect="--bias")
    _bad(capsys, f, "--labels", lab, "--bias", tmp_path / "b.npy", expect="without weights")
    np.savez(tmp_path / "nolab.npz", features=H)
    _bad(capsys, tmp_path / "nolab.npz", expect="no array 'labels'")
    (tmp_path / "junk.npy").write_bytes(b"not an array at all")
    _bad(capsys, tmp_path / "junk.npy", "--labels", lab, expect="not a valid .npy")
    trunc = tmp_path / "trunc.npy"
    trunc.write_bytes(f.read_bytes()[:-40])
    _bad(capsys, trunc, "--labels", lab, expect="truncated")
    (tmp_path / "junk.safetensors").write_bytes(b"\xff" * 20)
    _bad(capsys, tmp_path / "junk.safetensors", expect="safetensors")


def test_ambiguous_layout_is_refused_naming_the_option(tmp_path, capsys):
    rng = np.random.default_rng(0)
    H = rng.normal(size=(6, 6))
    y = np.array([0, 1, 2, 0, 1, 2])
    np.savez(tmp_path / "sq.npz", features=H, labels=y)
    line = _bad(capsys, tmp_path / "sq.npz", expect="--layout nd")
    assert "--layout dn" in line
    out = run_json(capsys, tmp_path / "sq.npz", "--layout", "dn")
    _close(out["metrics"], reference_metrics(H.T, y), ["nc1_trace", "gram_distance_etf"])
    _bad(capsys, tmp_path / "sq.npz", "--layout", "nd", "--labels", _save(tmp_path / "y7.npy", np.arange(7) % 3),
         expect="7 labels")


def test_bad_prediction_options(tmp_path, capsys):
    H, y = _balanced()
    np.savez(tmp_path / "a.npz", features=H, labels=y)
    a = tmp_path / "a.npz"
    _bad(capsys, a, "--tau", "0.5", expect="--tau is given without --predict")
    _bad(capsys, a, "--predict", "scl", expect="--tau")
    _bad(capsys, a, "--predict", "ufm-ce", "--lambda-w", "1e-3", expect="--lambda-h")
    _bad(capsys, a, "--predict", "ufm-ce", "--lambda-w", "1e-300", "--lambda-h", "1", expect="--lambda-w")
    _bad(capsys, a, "--predict", "auto", expect="--predict auto needs")
    _bad(capsys, a, "--predict", "scl", "--tau", "1e-9", expect="--tau")
    _bad(capsys, a, "--predict", "auto", "--tau", "1", "--lambda-w", "1", "--lambda-h", "1", expect="together")
    _bad(capsys, a, "--batch-size", "0", expect="--batch-size")
    _bad(capsys, a, "--device", "tpu", expect="--device")
    _bad(capsys, a, "--time-limit", "1e-9", expect="raise it with --time-limit")
    _bad(capsys, a, "--time-limit", "-1", expect="--time-limit")


def test_time_estimate_scales_with_the_sizes():
    small = MT.estimate_seconds(10 ** 6, 256, 100, weights=True)
    assert small["total_s"] < 120  # the benchmark size is accepted by default
    big = MT.estimate_seconds(10 ** 5, 1024, 50_000)
    assert big["pairs_s"] > 120 and big["pairs_s"] > 20 * MT.estimate_seconds(10 ** 5, 1024, 10_000)["pairs_s"]


def test_plot_path_is_checked_before_work(tmp_path, capsys, monkeypatch):
    H, y = _balanced()
    np.savez(tmp_path / "a.npz", features=H, labels=y)
    called = []
    monkeypatch.setattr(PM, "measure", lambda *a, **k: called.append(1))
    _bad(capsys, tmp_path / "a.npz", "--plot", tmp_path / "no" / "dir" / "m.png", expect="--plot")
    assert not called


def test_api_errors_are_input_errors():
    H, y, W, b = synthetic(seed=0, N=30, d=3, K=3)
    with pytest.raises(MT.InputError, match="finite"):
        Hn = H.copy()
        Hn[0, 0] = np.inf
        MT.measure_arrays(Hn, y)
    with pytest.raises(MT.InputError, match="class 1 has no sample"):
        MT.ClassScatter(MT.ClassMeans(3).update(H[y != 1], y[y != 1]))
    with pytest.raises(MT.InputError, match="K x d"):
        MT.measure_arrays(H, y, W[:, :2])
    with pytest.raises(MT.InputError, match="layout"):
        MT.measure_arrays(H, y, layout="xy")
    with pytest.raises(MT.InputError, match="GB"):
        MT.check_state_budget(10 ** 6, 10 ** 4)
