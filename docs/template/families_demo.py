"""proofs_check/families/<family>.py: argument parsing only."""

from __future__ import annotations

import argparse

from proofs_check.commands import SolveCommand


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lambda", dest="lam", type=float, required=True, help="lam > 0")


def _run(args: argparse.Namespace) -> dict:
    from docs.template.claims_demo import check_instance  # in a family: from proofs_check.claims.<family>
    from docs.template.theory_demo import DemoInstance

    return check_instance(DemoInstance(args.lam)).to_dict()  # InputError -> exit 2


# COMMANDS = [SolveCommand("demo", "the demo family", _args, _run)]   # discovered by the CLI
COMMAND = SolveCommand("demo", "the demo family", _args, _run)
