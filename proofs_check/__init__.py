"""ncproofs claim layer: claims, checks, verdicts, the registry, runner, reports and CLI.

Public API::

    from proofs_check import Claim, Check, Verdict, Provenance, RunContext, all_claims, run_claims
"""

from proofs_check.core import (Check, Claim, ClaimResult, Provenance, RunContext, Verdict, clean, worst)
from proofs_check.registry import all_claims, select
from proofs_check.runner import RunResult, run_claims

__all__ = ["Check", "Claim", "ClaimResult", "Provenance", "RunContext", "Verdict", "clean", "worst",
           "all_claims", "select", "RunResult", "run_claims"]
