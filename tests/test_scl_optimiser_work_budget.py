"""`solve scl`'s factored solve: its iteration budget (solvers.scl_engine.solver_iterations, SOLVER_WORK_FLOPS of
work shared by the starts and hops) counts L-BFGS-B's own work per evaluation, O(N d), besides the loss. The loss
alone undercounted mini-batch instances with many small batches: `--counts 750,750 --no-nonneg --batches` of 1497
triples modelled ~5e5 flops per evaluation (1 ms) where one took 10 ms, so 6 starts x 5000 iterations ran for
minutes. The work is counted, not timed, so the test checks the counted work, never seconds."""

from solvers import scl_engine as E
from theory import scl as T


def _work(inst, starts, hops):
    iters = E.solver_iterations(inst, starts, hops)
    per_eval = T.estimate_cost(inst)["eval_flops"] + E.OPTIMISER_FLOPS_PER_VARIABLE * inst.N * inst.d
    return iters, iters * (starts + hops) * per_eval


def test_many_small_batches_count_the_optimiser_work():
    n = 750
    batches = [tuple(range(i, i + 3)) for i in range(0, 2 * n - 2)]
    inst = T.SCLInstance((n, n), 0.5, 3, False, batches)
    iters, work = _work(inst, 6, 0)
    assert iters < E.SOLVER_MAX_ITERS  # it was capped only by SOLVER_MAX_ITERS = 5000
    assert work <= E.SOLVER_WORK_FLOPS * (1 + 1e-12)
    # the optimiser's O(N d) share dominates the loss's here: about 2 us per variable were measured besides the loss
    assert E.OPTIMISER_FLOPS_PER_VARIABLE * inst.N * inst.d > T.estimate_cost(inst)["eval_flops"]


def test_small_instances_keep_their_iterations():
    for counts in [(5, 3, 2), (4, 4, 4), (2, 2)]:
        inst = T.SCLInstance(counts, 0.5, len(counts) + 1, True, None)
        assert E.solver_iterations(inst, 6, 20) == E.SOLVER_MAX_ITERS
