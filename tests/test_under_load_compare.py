"""The comparison of benchmarks/under_load.py (same verdict and values at any load, issue 28) can fail: a value
that differs is found, a timing that differs is not."""

import copy
import math
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import under_load as UL  # noqa: E402

QUIET = {
    "verdict": "VERIFIED",
    "reason": "all 5 applicable statements hold; solved in 1.52 s",
    "seconds": 1.52,
    "solution": {"value": 0.22339592217878498, "evaluations": 1371, "start_values": [0.5, 0.25]},
    "routes": {"factored": {"wall_s": 0.8, "cpu_seconds": 0.7, "n_starts": 3, "max_steps": 400,
                            "time_budget": 1800, "elapsed": 0.1, "passes_s": [0.2, None],
                            "stopped_by_wall_safety": False, "message": "work budget not reached"}},
    "instance": {"s": 1.0, "s_c": 3, "S_eigenvalues": [1.0, 0.5], "smallest_eigenvalue_of_S": 0.5},
    "claims": [{"id": "optimal-value", "verdict": "VERIFIED", "evidence": {"gap": 1.8e-13}},
               {"id": "geometry", "verdict": "INCONCLUSIVE", "evidence": {"gap": None}}],
    "diagnostics": ["estimated work 4.02e+08 flop-equivalents (limit 4e+08; this machine's measured single-thread "
                    "rate 52.3 Gflop/s: about 0.576 s here)"],
}


def _loaded():
    return copy.deepcopy(QUIET)


def test_identical_documents_agree():
    assert UL.compare(QUIET, _loaded()) == []


def test_a_value_one_ulp_apart_is_a_difference():
    b = _loaded()
    b["solution"]["value"] = math.nextafter(QUIET["solution"]["value"], 1.0)  # the next float up
    assert b["solution"]["value"] != QUIET["solution"]["value"]
    diffs = UL.compare(QUIET, b)
    assert len(diffs) == 1 and diffs[0].startswith("$.solution.value: ")


def test_differences_in_verdicts_counts_lists_and_keys_are_found():
    b = _loaded()
    b["claims"][1]["verdict"] = "VERIFIED"
    b["solution"]["evaluations"] = 1372
    b["solution"]["start_values"].append(0.125)
    b["routes"]["factored"]["n_starts"] = 2  # "_s" inside a word is not a seconds unit: compared
    b["routes"]["factored"]["max_steps"] = 399
    del b["claims"][0]["evidence"]["gap"]
    diffs = UL.compare(QUIET, b)
    paths = sorted(d.split(":")[0] for d in diffs)
    assert paths == ["$.claims[0].evidence.gap", "$.claims[1].verdict", "$.routes.factored.max_steps",
                     "$.routes.factored.n_starts", "$.solution.evaluations", "$.solution.start_values"]


def test_an_int_and_an_equal_float_differ():
    b = _loaded()
    b["solution"]["evaluations"] = 1371.0
    assert UL.compare(QUIET, b) != []


def test_a_stopped_message_differs():
    b = _loaded()
    b["routes"]["factored"]["message"] = ("stopped by the wall-clock safety limit (1800 s); the work budget was "
                                          "not reached")
    assert [d.split(":")[0] for d in UL.compare(QUIET, b)] == ["$.routes.factored.message"]


def test_timings_alone_do_not_differ():
    b = _loaded()
    b["seconds"] = 17.9
    f = b["routes"]["factored"]
    f["wall_s"], f["cpu_seconds"], f["time_budget"], f["elapsed"] = 9.1, 3.3, 600, 4.4
    f["passes_s"] = [0.7, 0.1]
    b["reason"] = "all 5 applicable statements hold; solved in 17.9 s"
    b["diagnostics"][0] = b["diagnostics"][0].replace("52.3 Gflop/s: about 0.576 s", "11.7 Gflop/s: about 2.58 s")
    skipped = set()
    assert UL.compare(QUIET, b, skipped=skipped) == []
    assert skipped == {"seconds", "wall_s", "cpu_seconds", "time_budget", "elapsed", "passes_s"}


def test_a_flag_under_a_timing_key_is_compared():
    b = _loaded()
    b["routes"]["factored"]["stopped_by_wall_safety"] = True
    assert [d.split(":")[0] for d in UL.compare(QUIET, b)] == ["$.routes.factored.stopped_by_wall_safety"]


def test_parameters_named_like_units_are_compared():
    b = _loaded()
    b["instance"] = {"s": 2.0, "s_c": 2, "S_eigenvalues": [1.0, 0.25], "smallest_eigenvalue_of_S": 0.25}
    assert sorted(d.split(":")[0] for d in UL.compare(QUIET, b)) == [
        "$.instance.S_eigenvalues[1]", "$.instance.s", "$.instance.s_c", "$.instance.smallest_eigenvalue_of_S"]


def test_count_leaves_skips_the_timings_only():
    n = UL.count_leaves(QUIET)
    # numbers: value, evaluations, 2 start values, n_starts, max_steps, gap, s, s_c, 2 S_eigenvalues, smallest
    assert n["numbers"] == 12
    # strings: verdict, reason, message, 2 ids, 2 verdicts, 1 diagnostic
    assert n["strings"] == 8


def test_a_number_in_text_that_is_not_a_duration_is_compared():
    b = _loaded()
    b["diagnostics"][0] = b["diagnostics"][0].replace("4.02e+08", "4.03e+08")
    assert len(UL.compare(QUIET, b)) == 1


@pytest.mark.parametrize("key, timing", [("seconds", True), ("certificate_seconds", True), ("wall_s", True),
                                         ("solve_ms", True), ("cpu", True), ("load_average", True),
                                         ("measured_rate", True), ("pass1_s", True), ("Time", True),
                                         ("n_starts", False), ("max_steps", False), ("class_sizes", False),
                                         ("value", False), ("steps", False), ("s", False), ("s_c", False),
                                         ("S_eigenvalues", False), ("s_plus", False)])
def test_timing_keys(key, timing):
    assert UL.is_timing_key(key) is timing


def test_sweep_exports_compare_by_row_key_and_skip_the_seconds_column():
    cols = ["key", "verdict", "seconds", "gap"]
    a = UL.normalise({"columns": cols, "index": [0, 1], "data": [["x", "VERIFIED", 0.3, 1e-13],
                                                                  ["y", "VERIFIED", 0.2, 2e-13]]})
    b = UL.normalise({"columns": cols, "index": [0, 1], "data": [["y", "VERIFIED", 0.9, 2e-13],
                                                                  ["x", "VERIFIED", 0.1, 1e-13]]})
    assert UL.compare(a["rows"], b["rows"]) == []
    assert a["order"] != b["order"]
    c = UL.normalise({"columns": cols, "index": [0, 1], "data": [["x", "VERIFIED", 0.3, 1e-13],
                                                                  ["y", "INCONCLUSIVE", 0.2, 2e-13]]})
    assert [d.split(":")[0] for d in UL.compare(a["rows"], c["rows"])] == ["$.y.verdict"]
