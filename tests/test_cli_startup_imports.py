"""Building the ``ncproofs`` argument parser (every ``--help``, ``list``, ``cite``, the start of every ``solve``)
imports no heavy library: sympy alone cost ~0.5 s of each such command (families/crh.py had read
SAFETY_WALL_S from solvers.crh, which imports theory.crh and sympy). The libraries are imported by the
functions that run a command. Checked in a fresh interpreter: this test process has them loaded already."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("sympy", "scipy", "cvxpy", "torch", "mpmath", "flint", "matplotlib")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _loaded_after(code: str) -> list[str]:
    """The HEAVY modules in sys.modules after running ``code`` in a new interpreter."""
    probe = (f"import sys\n{code}\n"
             f"import json; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSTARTUP",)}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_build_parser_imports_no_heavy_library():
    assert _loaded_after("from proofs_check import cli\np, smap, tmap, emap = cli.build_parser()\n"
                         "assert 'crh' in smap and 'crh' in tmap and 'cite' in emap") == []


@pytest.mark.parametrize("argv", [["--help"], ["solve", "crh", "--help"], ["table", "crh", "--help"],
                                  ["solve", "ufm-ce", "--help"], ["solve", "scl", "--help"], ["cite", "--help"]])
def test_help_of_a_command_imports_no_heavy_library(argv):
    code = ("import contextlib, io\nfrom proofs_check import cli\n"
            "with contextlib.redirect_stdout(io.StringIO()) as buf:\n"
            "    try:\n"
            f"        cli.main({argv!r})\n"
            "    except SystemExit as exc:\n"
            "        assert exc.code == 0, exc.code\n"
            "assert 'usage: ncproofs' in buf.getvalue()")
    assert _loaded_after(code) == []


def test_crh_time_budget_default_is_the_solver_safety_limit():
    """The value the parser shows without importing solvers.crh is the one the solver enforces."""
    from proofs_check import cli
    from solvers.crh import SAFETY_WALL_S

    p, _, _, _ = cli.build_parser()
    assert p.parse_args(["solve", "crh"]).time_budget == SAFETY_WALL_S
    assert p.parse_args(["table", "crh"]).time_budget == SAFETY_WALL_S
