"""`ncproofs table ... --format latex --caption TEXT`: the caption is LaTeX source, kept verbatim where it
is LaTeX, and the table compiles with pdflatex whatever the caption holds (%, &, #, _, ^, unbalanced $ or
braces, a trailing backslash, newlines, Greek letters, arrows, other Unicode). Before the fix the caption
went into \\caption{...} as it was: '50% of runs' commented out the closing brace, 'a & b' and '#1' stopped
pdflatex (docs/outputs.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from proofs_check.latex_text import caption_source
from proofs_check.tables import Table

PREAMBLE = r"""\documentclass{article}
\usepackage{booktabs,amsmath,amssymb,siunitx,graphicx,array,longtable,caption}
\begin{document}
"""

HAVE_TEX = shutil.which("pdflatex") is not None and shutil.which("pdftotext") is not None
needs_tex = pytest.mark.skipif(not HAVE_TEX and not os.environ.get("CI"), reason="pdflatex/pdftotext not installed")

HOSTILE = [
    "Rates 50% & a_b #1 $x { } \\ é→ λ",
    "100% of runs",
    "a & b",
    "#1 result",
    "snake_case and x^2 outside math",
    "unbalanced $dollar",
    "unbalanced {brace",
    "closing } first {",
    "trailing backslash \\",
    "line one\n\nline two\ttab",
    "Greek τ, λ_W, ≥ 0 and → and 漢字 ✓",
    "$\\lambda_W$ with é inside math $é$",
    "\\( a_b \\) then \\) stray",
    "quotes \"q\" 'single' ~ tilde | bar < > ",
    "\\\\ double backslash and \\% escaped % raw",
    "C:\\Users\\x\\file.txt and $\\undefinedmacro x$ and \\mbox",
    "\\mbox{kept} \\textbf{bold} \\cite{zhu2021geometric} $\\alpha \\to \\infty$",
]


def _compile(tmp_path, body: str, name: str) -> str:
    tex = tmp_path / f"{name}.tex"
    tex.write_text(PREAMBLE + body + "\n\\end{document}\n", encoding="utf-8")
    proc = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", tex.name], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    log = (tmp_path / f"{name}.log").read_text(errors="replace")
    errors = [line for line in log.splitlines() if line.startswith("!")]
    assert proc.returncode == 0 and not errors, f"pdflatex failed on {body[:200]!r}: {errors[:5]}"
    return subprocess.run(["pdftotext", f"{name}.pdf", "-"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60).stdout


@needs_tex
def test_every_hostile_caption_compiles_in_one_document(tmp_path):
    t = Table(["k", "value"], [[3, 0.5], [5, 0.25]], caption="plain", meta={"family": "ufm"})
    body = "\n".join(t.render("latex", caption=cap, label=f"tab:c{i}") for i, cap in enumerate(HOSTILE))
    text = _compile(tmp_path, body, "all")
    assert "100% of runs" in text and "a & b" in text and "#1 result" in text
    assert "snake" in text and "bar < >" in text  # < and > typeset as themselves, not OT1's inverted marks


@needs_tex
@pytest.mark.parametrize("cap", ["50% & a_b #1 $x", "a } b", "x \\"])
def test_hostile_caption_compiles_alone_and_in_a_longtable(tmp_path, cap):
    t = Table(["k", "value"], [[3, 0.5]], caption="plain", meta={"family": "ufm"})
    _compile(tmp_path, t.render("latex", caption=cap), "float")
    _compile(tmp_path, t.render("latex", caption=cap, longtable=True), "long")


def test_latex_source_captions_stay_verbatim():
    for cap in ["My $x$ caption", r"The $\alpha_1^2$ table, see \cite{zhu2021geometric} and \emph{Fig.~1}",
                r"Error at most 5\% \& $\|W\|_F^2 \le 1$", r"inline \(x_i\) math"]:
        assert caption_source(cap) == cap


def test_commands_that_a_caption_cannot_rely_on_are_text():
    assert caption_source(r"C:\Users\x") == r"C:\textbackslash{}Users\textbackslash{}x"
    assert caption_source(r"$\nomacro$") == r"$\backslash nomacro$"
    # kept: known commands, and any command with an argument (the user's own macros, natbib's \citep)
    for kept in [r"\lambda \to 0", r"\citep[p.~3]{k}", r"\mymacro{} text", r"\LaTeX"]:
        assert caption_source(kept) == kept


def test_characters_that_cannot_be_meant_are_escaped():
    assert caption_source("50% of runs") == r"50\% of runs"
    assert caption_source("a & b #1") == r"a \& b \#1"
    assert caption_source("a_b $c_d$") == r"a\_b $c_d$"
    assert caption_source("λ and $λ$") == r"\ensuremath{\lambda} and ${\lambda}$"
    # not LaTeX source: escaped as text whole
    assert caption_source("unbalanced $x") == r"unbalanced \$x"
    assert caption_source("x \\") == r"x \textbackslash{}"
    assert caption_source("} {") == r"\} \{"
    assert "\n" not in caption_source("a\n\nb")


def test_cli_caption_goes_through_the_same_path(tmp_path, capsys):
    from proofs_check.cli import main
    rc = main(["table", "scl", "--counts", "3,3", "--tau", "1", "--format", "latex", "--caption", "50% & #1"])
    out = capsys.readouterr().out
    assert rc == 0
    cap = re.search(r"\\caption\{(.*)\}\n", out).group(1)
    assert cap.startswith(r"50\% \& \#1")
