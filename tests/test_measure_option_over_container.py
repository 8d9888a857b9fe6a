"""`measure c.npz --labels y.npy` where c.npz also holds labels: the option's labels are used (a relabelling is a
legitimate use), and the report says so in a note and its diagnostics instead of choosing silently; the
container's labels are not read. Without --labels the container's labels are used and there is no note."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np


def _measure(tmp_path, *extra):
    r = subprocess.run([sys.executable, "-m", "proofs_check", "measure", "c.npz", "--json", *extra],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def test_labels_option_over_the_containers_labels_is_stated(tmp_path):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 4)
    X = rng.standard_normal((12, 5)) + 4.0 * np.eye(3, 5)[y]
    np.savez(tmp_path / "c.npz", features=X, labels=y)
    y_other = np.roll(y, 1)  # a different labelling: the class counts and the class means change
    np.save(tmp_path / "y2.npy", y_other)

    own, own_err = _measure(tmp_path)
    other, other_err = _measure(tmp_path, "--labels", "y2.npy")
    note = [d for d in other["diagnostics"] if d.startswith("--labels y2.npy")]
    assert len(note) == 1 and "'labels'" in note[0] and "c.npz" in note[0] and "--labels y2.npy" in other_err
    assert not any("--labels" in d for d in own["diagnostics"]) and "--labels" not in own_err
    # the option's labels were the ones measured: NC1 of the wrong labelling is far larger
    assert other["metrics"]["nc1"] > 10 * own["metrics"]["nc1"]
