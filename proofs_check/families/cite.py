"""``ncproofs cite [--only PATTERN]``: BibTeX for the sources of the built-in claims."""

from __future__ import annotations

import sys

from proofs_check.commands import ExtraCommand


def _add_arguments(p) -> None:
    p.add_argument("--only", action="append", metavar="PATTERN",
                   help="cite the sources of the claims selected as by `run --only` (a family, an id, a glob, "
                        "a substring), or 'measure' for the papers defining the metrics of `ncproofs measure`; "
                        "repeatable; default: every built-in claim and the metric papers. The entry for ncproofs "
                        "itself is always included")
    p.add_argument("--output", "-o", default=None, help="write the .bib file here instead of stdout")
    p.add_argument("--no-header", action="store_true", help="omit the comment block mapping claims to keys")


def _run(args) -> int:
    from proofs_check import citations
    from proofs_check.outputs import check_output_path, write_text_atomic

    check_output_path(args.output, "--output")
    text = citations.bibtex(citations.select_claims(args.only), header=not args.no_header,
                            extra=citations.metric_keys(args.only))
    if args.output:
        write_text_atomic(args.output, text)
        print(f"bibliography: {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


COMMANDS = [
    ExtraCommand(
        name="cite",
        help="print BibTeX for the sources (papers and ncproofs documents) of the built-in claims",
        add_arguments=_add_arguments,
        run=_run,
    ),
]
