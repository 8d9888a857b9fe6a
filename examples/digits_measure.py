"""End-to-end example: train a small network with weight decay on scikit-learn's handwritten digits,
save its penultimate features, classifier and labels at a few epochs, and measure them with
``ncproofs measure`` against the certified UFM prediction (docs/measure.md).

    python examples/digits_measure.py [--out DIR] [--plot docs/measure_digits.png] [--epochs 0,25,100,400,1500]

Needs the optional extras torch and scikit-learn (``sklearn.datasets.load_digits`` ships with
scikit-learn: no download). The training set is balanced (the first 174 images of each digit: the
smallest class has 174), so the balanced UFM closed form applies.

The network: 64 -> 256 -> ReLU -> 32 (the features h, no activation) -> 10 (W, b), full-batch Adam
(lr 3e-3, cosine decay) on exactly the UFM objective of docs/ufm.md,

    (1/N) sum_i CE(W h_i + b, y_i) + lambda_w/2 ||W||^2 + lambda_h/2 ||H||^2,

with lambda_w = 5e-3 and lambda_h = 5e-3 / N (a per-sample feature penalty of 5e-3), bias
unregularised, and no weight decay on the body (the UFM treats the features as free variables; the
over-parameterised body is what makes them nearly free). Then s = sqrt(n lambda_w lambda_h) = 7e-4
< 1/K = 0.1: the closed form predicts collapse onto a self-dual simplex ETF, certified by the
class-reduced KKT certificate (docs/ufm.md). The network is not the UFM, so this is a model of the
trained network, not a statement about it: the example shows the measured geometry moving toward
the prediction.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

LAMBDA_W = 5e-3
#: per-sample feature penalty; the UFM's lambda_h is this divided by N (the penalty is on ||H||_F^2, not its mean)
FEATURE_DECAY = 5e-3
DEFAULT_EPOCHS = (0, 10, 30, 100, 300, 800)


def balanced_digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    n = int(np.bincount(y).min())
    keep = np.concatenate([np.flatnonzero(y == c)[:n] for c in range(10)])
    X = X[keep] / 16.0
    return (X - X.mean(axis=0)).astype(np.float32), y[keep].astype(np.int64)


def train_and_save(out: Path, epochs=DEFAULT_EPOCHS, seed: int = 0) -> list[Path]:
    """Train; at each epoch in ``epochs`` save {features, labels, weights, bias} to out/epoch_<e>.npz."""
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    X, y = balanced_digits()
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    body = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 32))
    head = torch.nn.Linear(32, 10)
    params = list(body.parameters()) + list(head.parameters())
    last = max(epochs)
    opt = torch.optim.Adam(params, lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(last, 1))
    lambda_h = FEATURE_DECAY / len(y)
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    for epoch in range(last + 1):
        if epoch in epochs:
            with torch.no_grad():
                H = body(Xt)
            path = out / f"epoch_{epoch}.npz"
            np.savez(path, features=H.numpy().astype(np.float64), labels=y,
                     weights=head.weight.detach().numpy().astype(np.float64),
                     bias=head.bias.detach().numpy().astype(np.float64))
            saved.append(path)
        if epoch == last:
            break
        opt.zero_grad()
        H = body(Xt)
        loss = torch.nn.functional.cross_entropy(head(H), yt)
        reg = LAMBDA_W / 2 * head.weight.pow(2).sum() + lambda_h / 2 * H.pow(2).sum()  # the UFM penalties
        (loss + reg).backward()
        opt.step()
        sched.step()
    return saved


def measure_all(paths: list[Path]) -> list[dict]:
    from proofs_check.measure import measure

    N = len(balanced_digits()[1])
    return [measure(p, predict="ufm-ce", lambda_w=LAMBDA_W, lambda_h=FEATURE_DECAY / N) for p in paths]


def plot(epochs, reports, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [("nc1", "NC1"), ("gram_distance_predicted", "Gram distance to the prediction (ETF)"),
            ("gram_distance_of", "Gram distance to the OF"), ("nc3", "NC3 (self-duality)"), ("equinorm", "equinorm"),
            ("cdnv_mean", "CDNV (mean)")]
    x = [max(e, 1) for e in epochs]
    fig, ax = plt.subplots(figsize=(7, 4))
    for k, lab in keys:
        ax.plot(x, [r["metrics"][k] for r in reports], marker="o", label=lab)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("epoch (full batch; epoch 0 plotted at 1)")
    ax.set_ylabel("metric")
    ax.set_title("digits, 64-256-32-10 MLP, CE + UFM penalties: toward the certified ETF")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="digits example for ncproofs measure")
    ap.add_argument("--out", default="digits_features")
    ap.add_argument("--plot", default=None)
    ap.add_argument("--epochs", default=",".join(map(str, DEFAULT_EPOCHS)))
    args = ap.parse_args(argv)
    epochs = tuple(int(e) for e in args.epochs.split(","))
    paths = train_and_save(Path(args.out), epochs)
    reports = measure_all(paths)
    cols = ["nc1", "cdnv_mean", "equinorm", "equiangularity", "gram_distance_predicted", "gram_distance_of", "nc3",
            "nc4"]
    print("| epoch | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for e, r in zip(epochs, reports):
        print(f"| {e} | " + " | ".join(f"{r['metrics'][c]:.3g}" for c in cols) + " |")
    pred = reports[-1]["predicted"]
    print(f"\nprediction: {pred['geometry']} ({pred['source']}); certificate: {pred['certificate']['method']}, "
          f"{pred['certificate']['verdict_of_the_model_check']} for the model")
    print("last epoch: " + "; ".join(reports[-1]["labels"]))
    print(f"class-mean norm: measured {reports[-1]['scale']['mean_centred_class_mean_norm']:.3g}, "
          f"UFM optimum {pred.get('predicted_mean_norm', float('nan')):.3g}")
    if args.plot:
        plot(epochs, reports, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
