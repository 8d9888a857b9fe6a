"""A source naming `docs/<name>.md` cites the ncproofs page only when that page exists: before the fix a user
claim with source "Theorem 1 of docs/nonexistent.md" got `@misc{ncproofs-docs-nonexistent, howpublished =
{docs/nonexistent.md in the ncproofs distribution}}`, a reference to a document that does not exist, and
`Citation.known` was True (docs/outputs.md, "Citations")."""

from __future__ import annotations

import re
from pathlib import Path

import bibtexparser

from proofs_check import citations
from proofs_check.registry import all_claims

ROOT = Path(__file__).resolve().parents[1]


def test_a_missing_docs_page_is_free_text_not_an_ncproofs_document():
    ci = citations.cite_source("Theorem 1 of docs/nonexistent.md")
    assert "ncproofs-docs-nonexistent" not in ci.keys
    assert not ci.known and ci.docs == ()
    (ref,) = ci.references
    assert ref.entry_type == "misc" and "docs/nonexistent.md" in ref.note
    lib = bibtexparser.parse_string(citations.bibtex([], extra=[]) + "\n" + ref.bibtex())
    assert not lib.failed_blocks


def test_an_existing_page_is_still_cited_beside_a_missing_one():
    ci = citations.cite_source("docs/ufm.md and docs/no_such_page.md")
    assert ci.keys == ["ncproofs-docs-ufm"] and ci.docs == ("ufm",)


def test_every_docs_entry_of_the_built_in_claims_is_a_file_of_the_repository():
    names = set()
    for c in all_claims():
        for r in citations.cite_claim(c).references:
            if r.key.startswith("ncproofs-docs-"):
                m = re.search(r"docs/([A-Za-z0-9_\-]+)\.md", r.title)
                assert m, r.title
                names.add(m.group(1))
    assert names and all((ROOT / "docs" / f"{n}.md").is_file() for n in names), sorted(names)
