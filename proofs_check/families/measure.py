"""``ncproofs measure FEATURES ...``: collapse metrics of a trained network's features (docs/measure.md).

A thin layer over :func:`proofs_check.measure.measure` (which streams the files through the
accumulators of :mod:`theory.metrics`). The output is a measurement with provenance, not a verdict.
"""

from __future__ import annotations

from proofs_check.commands import ExtraCommand


def _add_arguments(p) -> None:
    p.add_argument("features", metavar="FEATURES",
                   help="features: .npy (N x d; labels from --labels), or .npz / .pt (a dict) / .safetensors holding "
                        "'features' and 'labels' (optional 'weights' K x d, 'bias' K); or a directory / quoted glob "
                        "of checkpoint files: a table over the epochs in the names (and an NC-vs-epoch --plot)")
    p.add_argument("--labels", default=None, help="integer labels 0..K-1 (.npy, or a container with key 'labels')")
    p.add_argument("--weights", default=None, help="classifier W, K x d (.npy, or a container with key 'weights')")
    p.add_argument("--bias", default=None, help="classifier bias, K (.npy, or a container with key 'bias')")
    p.add_argument("--layout", choices=("auto", "nd", "dn"), default="auto",
                   help="sample axis: nd = rows are samples (default when unambiguous), dn = columns are samples")
    p.add_argument("--predict", choices=("ufm-ce", "ufm-mse", "scl", "auto"), default=None,
                   help="compare with the certified optimum of a model (none by default)")
    p.add_argument("--lambda-w", dest="lambda_w", type=float, default=None, help="UFM weight decay of W")
    p.add_argument("--lambda-h", dest="lambda_h", type=float, default=None, help="UFM weight decay of the features")
    p.add_argument("--tau", type=float, default=None, help="SCL temperature")
    p.add_argument("--device", default="cpu", help="cpu or cuda (torch; falls back to cpu with a note)")
    p.add_argument("--batch-size", dest="batch_size", type=int, default=None,
                   help="samples per chunk (default: about 32 MB of float64 features)")
    p.add_argument("--ood", default=None, metavar="FILE",
                   help="out-of-distribution features (.npy N_ood x d, or a container's 'features') for NC5")
    p.add_argument("--targets", default=None, metavar="FILE",
                   help="regression targets (N or N x n): report the neural regression collapse metrics NRC1-3 "
                        "(with --weights as the n x d regressor) instead of the classification metrics")
    for key, what in (("features", "features (N x d)"), ("labels", "labels"), ("weights", "classifier W (K x d)"),
                      ("bias", "bias (K)"), ("targets", "regression targets")):
        p.add_argument(f"--{key}-key", dest=f"{key}_key", default=None, metavar="KEY",
                       help=f"name of the {what} in a .npz / .pt / .safetensors container (default '{key}')")
    p.add_argument("--progress", choices=("auto", "on", "off"), default="auto",
                   help="a progress line on stderr (auto: when stderr is a terminal)")
    p.add_argument("--passes", default="auto", choices=("auto", "1", "2"),
                   help="auto (default): one pass over the features (a second one for NC4 with weights, when the "
                        "d x d scatter does not fit, or for K <= about d/4.5, where the K x K projection of the scatter "
                        "saves half the flops); 1: one pass; 2: the general two-pass route (docs/measure.md)")
    p.add_argument("--workers", type=int, default=None,
                   help="threads over fixed segments of the file in the one-pass route (default: the CPUs available, "
                        "at most 4; the numbers do not depend on it)")
    p.add_argument("--time-limit", dest="time_limit", type=float, default=120.0,
                   help="refuse before reading when the estimated work exceeds this many seconds of the cost model "
                        "(x 5e9 flop-equivalents per second: the same decision on every machine and at any load; "
                        "default 120)")
    p.add_argument("--plot", default=None, metavar="F.png", help="write a figure (class-mean cosines, distances)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _run(args) -> int:
    from proofs_check import measure

    return measure.main_from_args(args)


COMMANDS = [
    ExtraCommand(
        name="measure",
        help="collapse metrics (NC1, CDNV, equinorm, equiangularity, Gram distances, NC3, NC4) of a trained "
             "network's features, optionally next to a model's certified prediction (a measurement, not a verdict)",
        add_arguments=_add_arguments,
        run=_run,
    ),
]
