"""`ncproofs cite`: BibTeX for the sources of the claims (parsed with bibtexparser, a test extra:
pip install bibtexparser)."""

from __future__ import annotations

import pathlib
import re

import os

import pytest

from proofs_check import citations, registry
from proofs_check.cli import main

if os.environ.get("CI"):
    import bibtexparser  # a test extra: required in CI
else:
    bibtexparser = pytest.importorskip("bibtexparser", reason="pip install bibtexparser (test extra)")

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"


def _parse(text: str):
    lib = bibtexparser.parse_string(text)
    assert not lib.failed_blocks, [b.raw[:200] for b in lib.failed_blocks]
    return {e.key: e for e in lib.entries}


def _field(entry, name):
    f = entry.fields_dict.get(name)
    return None if f is None else f.value


def test_cite_all_parses_and_every_builtin_claim_maps_to_an_entry(capsys):
    assert main(["cite"]) == 0
    entries = _parse(capsys.readouterr().out)
    claims = registry.all_claims()
    assert claims
    for c in claims:
        ci = citations.cite_claim(c)
        assert ci.known, f"{c.id}: source {c.source!r} maps to no paper or ncproofs document"
        for key in ci.keys:
            assert key in entries, f"{c.id}: key {key} missing from `ncproofs cite`"
        # a source naming a paper's author cites that paper (not only the docs page)
        for author, key in (("Kini", "kini2024symmetric"), ("Graf", "graf2021dissecting"),
                            ("Zhu", "zhu2021geometric"), ("Laurent", "laurent2024feature"),
                            ("Seleznova", "seleznova2023neural"), ("Ziyin", "ziyin2025formation")):
            if re.search(rf"\b{author}\b", c.source):
                assert key in ci.keys, f"{c.id}: names {author} but does not cite {key}"


def test_paper_entries_have_required_fields():
    text = citations.bibtex(registry.all_claims(), header=False)
    entries = _parse(text)
    # what a plain `ncproofs cite` adds to the claims' sources: the metric papers and the table captions' papers
    entries.update(_parse(citations.bibtex([], header=False, extra=citations.metric_keys(None))))
    for key, ref in citations.REFERENCES.items():
        e = entries[key]
        assert e.entry_type.lower() in ("inproceedings", "article")
        venue = "booktitle" if e.entry_type.lower() == "inproceedings" else "journal"
        for f in ("author", "title", venue, "year"):
            assert _field(e, f), f"{key}: no {f}"
        assert re.fullmatch(r"(19|20)\d\d", _field(e, "year"))


def test_every_entry_of_cite_has_author_and_year(capsys):
    """BibTeX styles warn on entries without author or year: every entry `ncproofs cite` prints has both,
    the documents and the entry for ncproofs itself included."""
    assert main(["cite"]) == 0
    entries = _parse(capsys.readouterr().out)
    assert "ncproofs" in entries and any(k.startswith("ncproofs-docs-") for k in entries)
    assert set(citations.METRIC_KEYS) <= set(entries)  # a plain `cite` includes the metric papers
    for key, e in entries.items():
        assert _field(e, "author"), f"{key}: no author"
        assert re.fullmatch(r"(19|20)\d\d", _field(e, "year") or ""), f"{key}: no year"
    tool = entries["ncproofs"]
    from proofs_check.envelope import ncproofs_version

    assert _field(tool, "version") == ncproofs_version()


def test_cite_only_measure_gives_the_metric_papers(capsys):
    assert main(["cite", "--only", "measure"]) == 0
    entries = _parse(capsys.readouterr().out)
    assert set(entries) == {*citations.METRIC_KEYS, "ncproofs"}
    papyan = entries["papyan2020prevalence"]
    assert _field(papyan, "year") == "2020" and "Papyan" in _field(papyan, "author")
    assert "Galanti" in _field(entries["galanti2022role"], "author")
    # the metric sources named in docs/metrics.md map to these keys
    assert "papyan2020prevalence" in citations.cite_source("Papyan et al. 2020 (NC2, equinorm)").keys
    assert "galanti2022role" in citations.cite_source("Galanti, Gyorgy & Hutter, ICLR 2022").keys
    assert "andriopoulos2024prevalence" in citations.cite_source("Andriopoulos et al. 2024").keys
    # the CRH paper's co-author Galanti does not pull in the transfer-learning paper
    assert "galanti2022role" not in citations.cite_source("Ziyin, Chuang, Galanti, Poggio, ICLR 2025").keys


def test_license_and_citation_cff_agree_with_pyproject():
    import tomllib

    root = DOCS.parent
    meta = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "MIT"
    lic = (root / "LICENSE").read_text()
    assert lic.startswith("MIT License") and "THE SOFTWARE IS PROVIDED \"AS IS\"" in lic
    cff = (root / "CITATION.cff").read_text()
    assert "cff-version: 1.2.0" in cff and "license: MIT" in cff
    assert f'version: "{meta["version"]}"' in cff
    assert re.search(r"^authors:\n  - name: ", cff, re.M) and re.search(r'^title: "ncproofs', cff, re.M)


def test_arxiv_ids_agree_with_the_shipped_docs():
    """Each arXiv id of the registry is the one docs/*.md gives next to the same paper (the docs
    were written from the papers, independently of the registry)."""
    docs = " ".join(p.read_text() for p in DOCS.glob("*.md"))
    for key, ref in citations.REFERENCES.items():
        if ref.arxiv and ref.key not in ("zhu2021geometric", "han2022neural"):  # not named in docs/
            assert f"arXiv {ref.arxiv}" in docs, f"{key}: arXiv {ref.arxiv} not in docs/*.md"
        first_author = ref.authors[0].split(",")[0].strip()
        if ref.arxiv and f"arXiv {ref.arxiv}" in docs:
            i = docs.index(f"arXiv {ref.arxiv}")
            assert first_author.split()[-1] in docs[max(0, i - 400):i], f"{key}: docs name another paper"


def test_only_selects_sources(capsys):
    assert main(["cite", "--only", "scl"]) == 0
    entries = _parse(capsys.readouterr().out)
    assert {"kini2024symmetric", "graf2021dissecting", "ncproofs-docs-scl"} <= set(entries)
    assert "ziyin2025formation" not in entries and "laurent2024feature" not in entries
    assert main(["cite", "--only", "no-such-claim-xyz"]) == 2
    assert "no-such-claim-xyz" in capsys.readouterr().err


def test_cite_output_file(tmp_path, capsys):
    out = tmp_path / "refs.bib"
    assert main(["cite", "--only", "ntk", "--output", str(out)]) == 0
    entries = _parse(out.read_text())
    assert set(entries) == {"seleznova2023neural", "ncproofs-docs-ntk", "ncproofs"}
    assert main(["cite", "--output", str(tmp_path / "missing" / "x.bib")]) == 2


def test_user_plain_string_source_is_misc_with_note():
    src = "My notes, 2025 {draft} & appendix 50%"
    ci = citations.cite_source(src)
    assert not ci.known and len(ci.references) == 1
    ref = ci.references[0]
    assert ref.entry_type == "misc"
    entries = _parse(ref.bibtex())
    note = _field(entries[ref.key], "note")
    assert "My notes, 2025" in note and "appendix" in note
    # the same string gets the same key; another string another key
    assert citations.cite_source(src).keys == ci.keys
    assert citations.cite_source(src + "!").keys != ci.keys


def test_locator_and_docs_are_structured():
    ci = citations.cite_source("Kini et al., ICLR 2024 (arXiv 2306.07960); docs/scl.md, Theorem 1 (limits)")
    assert ci.locator == "Theorem 1"
    assert ci.docs == ("scl",)
    assert ci.keys == ["kini2024symmetric", "ncproofs-docs-scl"]
    both = citations.cite_source("Zhou et al., ICML 2022; Han, Papyan & Donoho, ICLR 2022 (UFM, MSE); docs/ufm.md")
    assert both.keys[:2] == ["zhou2022optimization", "han2022neural"]


def test_table_families_cite_registered_keys():
    for fam in ("scl", "ufm", "feature-collapse", "ntk", "crh"):
        keys = citations.keys_for_family(fam)
        assert keys and all(k in citations.REFERENCES for k in keys), fam
