"""Structured references for the sources of the claims, as BibTeX.

A claim's ``source`` is a string such as ``"Kini et al., ICLR 2024 (arXiv 2306.07960); docs/scl.md,
Theorem 1"``. :func:`cite_source` maps it to structured references: the papers it names
(matched by :data:`SOURCE_PATTERNS`, looked up in :data:`REFERENCES`), the ncproofs document it
cites (``docs/<name>.md``, an ``@misc`` entry) and the locator (theorem, corollary, section) it
gives. A source that names nothing known (a user's claim with a free-text source) becomes an
``@misc`` entry with the string as its note, keyed by a hash of the string.

``ncproofs cite [--only PATTERN]`` prints the BibTeX of the sources of the selected claims;
tables cite the keys in their LaTeX captions (``\\cite{...}``) and the HTML report lists them.

Bibliographic data: only fields we are sure of (authors, title, venue, year; arXiv identifiers
as given in the papers' listings and in docs/*.md). A field we were unsure of is left out rather
than guessed (no page numbers, no DOIs).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from theory._validate import InputError


@dataclass(frozen=True)
class Reference:
    """One bibliography entry."""

    key: str
    entry_type: str  # "inproceedings", "article", "misc"
    title: str
    authors: tuple[str, ...] = ()  # "Last, First" each
    year: int | None = None
    venue: str | None = None  # booktitle of an inproceedings
    venue_short: str | None = None  # e.g. "ICLR 2024" (for the HTML report)
    arxiv: str | None = None
    doi: str | None = None
    volume: str | None = None
    series: str | None = None
    howpublished: str | None = None
    note: str | None = None
    journal: str | None = None  # of an article
    number: str | None = None
    version: str | None = None  # of software (the ncproofs entry)
    url: str | None = None

    def fields(self) -> list[tuple[str, str]]:
        out = []
        if self.authors:
            out.append(("author", " and ".join(self.authors)))
        out.append(("title", self.title))
        if self.venue:
            out.append(("booktitle", self.venue))
        if self.journal:
            out.append(("journal", self.journal))
        if self.series:
            out.append(("series", self.series))
        if self.volume:
            out.append(("volume", self.volume))
        if self.number:
            out.append(("number", self.number))
        if self.version:
            out.append(("version", self.version))
        if self.year is not None:
            out.append(("year", str(self.year)))
        if self.arxiv:
            out += [("eprint", self.arxiv), ("archivePrefix", "arXiv")]
        if self.doi:
            out.append(("doi", self.doi))
        if self.howpublished:
            out.append(("howpublished", self.howpublished))
        if self.url:
            out.append(("url", self.url))
        if self.note:
            out.append(("note", self.note))
        return out

    def bibtex(self) -> str:
        body = ",\n".join(f"  {k} = {{{_bib_value(v)}}}" for k, v in self.fields())
        return f"@{self.entry_type}{{{self.key},\n{body}\n}}\n"

    def short(self) -> str:
        """'Kini et al., ICLR 2024' style, for reports."""
        if self.authors:
            first = self.authors[0].split(",")[0].strip()
            who = first + (" et al." if len(self.authors) > 2 else
                           f" and {self.authors[1].split(',')[0].strip()}" if len(self.authors) == 2 else "")
            return f"{who}, {self.venue_short or self.year or ''}".rstrip(", ")
        return self.title


def _bib_value(v: str) -> str:
    """A BibTeX field value inside braces: braces must balance; backslashes and other TeX
    specials of a free-text note are escaped."""
    v = " ".join(str(v).split())
    if _balanced_braces(v) and "\\" not in v:
        return v.replace("%", r"\%").replace("&", r"\&").replace("#", r"\#")
    from proofs_check.latex_text import latex_escape

    return latex_escape(v)


def _balanced_braces(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += ch == "{"
        depth -= ch == "}"
        if depth < 0:
            return False
    return depth == 0


_ICLR = "International Conference on Learning Representations (ICLR)"
_NEURIPS = "Advances in Neural Information Processing Systems (NeurIPS)"
_ICML = "International Conference on Machine Learning (ICML)"
_PMLR = "Proceedings of Machine Learning Research"

#: the papers the built-in claims rely on
REFERENCES: dict[str, Reference] = {r.key: r for r in [
    Reference("kini2024symmetric", "inproceedings",
              "Symmetric Neural-Collapse Representations with Supervised Contrastive Loss: "
              "The Impact of {ReLU} and Batching",
              ("Kini, Ganesh Ramachandra", "Vakilian, Vala", "Behnia, Tina", "Gill, Jaidev",
               "Thrampoulidis, Christos"), 2024, _ICLR, "ICLR 2024", arxiv="2306.07960"),
    Reference("graf2021dissecting", "inproceedings", "Dissecting Supervised Contrastive Learning",
              ("Graf, Florian", "Hofer, Christoph", "Niethammer, Marc", "Kwitt, Roland"), 2021, _ICML,
              "ICML 2021", series=_PMLR, volume="139"),
    Reference("zhu2021geometric", "inproceedings",
              "A Geometric Analysis of Neural Collapse with Unconstrained Features",
              ("Zhu, Zhihui", "Ding, Tianyu", "Zhou, Jinxin", "Li, Xiao", "You, Chong", "Sulam, Jeremias",
               "Qu, Qing"), 2021, _NEURIPS, "NeurIPS 2021", arxiv="2105.02375"),
    Reference("zhou2022optimization", "inproceedings",
              "On the Optimization Landscape of Neural Collapse under {MSE} Loss: Global Optimality with "
              "Unconstrained Features",
              ("Zhou, Jinxin", "Li, Xiao", "Ding, Tianyu", "You, Chong", "Qu, Qing", "Zhu, Zhihui"), 2022, _ICML,
              "ICML 2022", series=_PMLR, volume="162"),
    Reference("han2022neural", "inproceedings",
              "Neural Collapse Under {MSE} Loss: Proximity to and Dynamics on the Central Path",
              ("Han, X. Y.", "Papyan, Vardan", "Donoho, David L."), 2022, _ICLR, "ICLR 2022", arxiv="2106.02073"),
    Reference("laurent2024feature", "inproceedings", "Feature Collapse",
              ("Laurent, Thomas", "von Brecht, James", "Bresson, Xavier"), 2024, _ICLR, "ICLR 2024",
              arxiv="2305.16162"),
    Reference("seleznova2023neural", "inproceedings", "Neural (Tangent Kernel) Collapse",
              ("Seleznova, Mariia", "Weitzner, Dana", "Giryes, Raja", "Kutyniok, Gitta", "Chou, Hung-Hsu"), 2023,
              _NEURIPS, "NeurIPS 2023", arxiv="2305.16427"),
    Reference("ziyin2025formation", "inproceedings", "Formation of Representations in Neural Networks",
              ("Ziyin, Liu", "Chuang, Isaac", "Galanti, Tomer", "Poggio, Tomaso"), 2025, _ICLR, "ICLR 2025",
              arxiv="2410.03006"),
    # cross-entropy UFM papers cited by `table ufm --loss ce` (FAMILY_KEYS["ufm-ce"])
    Reference("ji2022unconstrained", "inproceedings", "An Unconstrained Layer-Peeled Perspective on Neural Collapse",
              ("Ji, Wenlong", "Lu, Yiping", "Zhang, Yiliang", "Deng, Zhun", "Su, Weijie J."), 2022, _ICLR,
              "ICLR 2022", arxiv="2110.02796"),
    Reference("lu2022neural", "article", "Neural Collapse under Cross-Entropy Loss",
              ("Lu, Jianfeng", "Steinerberger, Stefan"), 2022, venue_short="ACHA 2022",
              journal="Applied and Computational Harmonic Analysis", volume="59", arxiv="2012.08465"),
    # the sources of the collapse metrics (docs/metrics.md) and of regression collapse (docs/ufm_general.md)
    Reference("papyan2020prevalence", "article",
              "Prevalence of Neural Collapse during the Terminal Phase of Deep Learning Training",
              ("Papyan, Vardan", "Han, X. Y.", "Donoho, David L."), 2020, venue_short="PNAS 2020",
              journal="Proceedings of the National Academy of Sciences", volume="117", number="40"),
    Reference("galanti2022role", "inproceedings", "On the Role of Neural Collapse in Transfer Learning",
              ("Galanti, Tomer", "Gyorgy, Andras", "Hutter, Marcus"), 2022, _ICLR, "ICLR 2022"),
    Reference("wu2024linguistic", "inproceedings", "Linguistic Collapse: Neural Collapse in (Large) Language Models",
              ("Wu, Robert", "Papyan, Vardan"), 2024, _NEURIPS, "NeurIPS 2024"),
    Reference("andriopoulos2024prevalence", "inproceedings",
              "The Prevalence of Neural Collapse in Neural Multivariate Regression",
              ("Andriopoulos, George", "Dong, Zixuan", "Guo, Li", "Zhao, Zifan", "Ross, Keith"), 2024, _NEURIPS,
              "NeurIPS 2024"),
    # the deep unconstrained features model (docs/deep_ufm.md)
    Reference("dang2023neural", "inproceedings", "Neural Collapse in Deep Linear Networks: From Balanced to "
              "Imbalanced Data", ("Dang, Hien", "Tran, Tho", "Osher, Stanley", "Tran-The, Hung", "Ho, Nhat",
                                  "Nguyen, Tan"), 2023, _ICML, "ICML 2023"),
    Reference("sukenik2023deep", "inproceedings",
              "Deep Neural Collapse Is Provably Optimal for the Deep Unconstrained Features Model",
              ("Súkeník, Peter", "Mondelli, Marco", "Lampert, Christoph"), 2023, _NEURIPS, "NeurIPS 2023",
              arxiv="2305.13165"),
    Reference("sukenik2024neural", "inproceedings",
              "Neural Collapse versus Low-rank Bias: Is Deep Neural Collapse Really Optimal?",
              ("Súkeník, Peter", "Lampert, Christoph", "Mondelli, Marco"), 2024, _NEURIPS, "NeurIPS 2024",
              arxiv="2405.14468"),
    Reference("garrod2025persistence", "inproceedings", "The Persistence of Neural Collapse Despite Low-Rank Bias",
              ("Garrod, Connall", "Keating, Jonathan P."), 2025, _NEURIPS, "NeurIPS 2025", arxiv="2410.23169"),
]}

#: the papers that define the metrics of ``ncproofs measure`` (``ncproofs cite --only measure``)
METRIC_KEYS = ["papyan2020prevalence", "han2022neural", "galanti2022role", "wu2024linguistic",
               "andriopoulos2024prevalence"]
#: names ``ncproofs cite --only`` accepts for the metric papers (not claim families)
METRIC_NAMES = ("measure", "metrics")


def ncproofs_reference() -> Reference:
    """The entry for ncproofs itself (cite the version you used; CITATION.cff has the same data)."""
    from proofs_check.envelope import ncproofs_version

    v = ncproofs_version()
    return Reference("ncproofs", "misc",
                     "ncproofs: symbolic and certified numerical checks of theorems about neural collapse",
                     ("{ncproofs contributors}",), NCPROOFS_YEAR, version=v,
                     howpublished=f"Python package, version {v}", note="MIT License")


#: year of the ncproofs release the entry describes (CITATION.cff: date-released)
NCPROOFS_YEAR = 2026

#: (regular expression searched in a source string, reference key). A source may match several.
SOURCE_PATTERNS: list[tuple[str, str]] = [
    (r"\bKini\b|2306\.07960", "kini2024symmetric"),
    (r"\bGraf\b", "graf2021dissecting"),
    (r"\bZhu\b|2105\.02375", "zhu2021geometric"),
    (r"\bZhou\b", "zhou2022optimization"),
    (r"Han, Papyan|\bHan et al\.|2106\.02073", "han2022neural"),
    (r"Papyan et al\.,? (PNAS )?2020|Papyan, Han", "papyan2020prevalence"),
    (r"Galanti, Gy[oö]rgy|Galanti et al\.,? (ICLR )?2022", "galanti2022role"),
    (r"Wu (&|and) Papyan", "wu2024linguistic"),
    (r"\bAndriopoulos\b", "andriopoulos2024prevalence"),
    (r"\bLaurent\b|2305\.16162", "laurent2024feature"),
    (r"\bSeleznova\b|2305\.16427", "seleznova2023neural"),
    (r"\bZiyin\b|2410\.03006", "ziyin2025formation"),
    (r"\bDang et al\.", "dang2023neural"),
    (r"2305\.13165", "sukenik2023deep"),
    (r"S[uú]ken[ií]k|2405\.14468", "sukenik2024neural"),
    (r"\bGarrod\b|2410\.23169", "garrod2025persistence"),
]

#: which table families rely on which papers (tables cite these keys)
FAMILY_KEYS: dict[str, list[str]] = {
    "scl": ["kini2024symmetric", "graf2021dissecting"],
    "ufm": ["zhu2021geometric", "zhou2022optimization", "han2022neural"],
    "ufm-ce": ["zhu2021geometric", "ji2022unconstrained", "lu2022neural"],
    "ufm-mse": ["zhou2022optimization", "han2022neural"],
    "feature-collapse": ["laurent2024feature"],
    "ntk": ["seleznova2023neural"],
    "crh": ["ziyin2025formation"],
    "deep-ufm": ["dang2023neural", "sukenik2023deep", "sukenik2024neural", "garrod2025persistence"],
}

_DOCS_RE = re.compile(r"\bdocs/([A-Za-z0-9_\-]+)\.md\b")
_LOCATOR_RE = re.compile(r"\b(Theorems?|Thm\.?|Corollary|Lemma|Proposition|Section|Sec\.|Remark|Figure|Eq\.)"
                         r"\s*[0-9][0-9.]*(?:\s*[-–]\s*[0-9][0-9.]*)?")


#: the folder of the documents shipped with ncproofs (docs/<name>.md beside the packages in a checkout)
DOCS_DIR = Path(__file__).resolve().parents[1] / "docs"


def shipped_doc(name: str) -> bool:
    """True when ``docs/<name>.md`` is a document of ncproofs: a source naming another ``docs/....md`` (a user's
    own notes, a typo) is free text (``@misc`` with the string as note), never an entry claiming a page "in the
    ncproofs distribution" that does not exist. Where the documents are not installed beside the packages every
    name counts (nothing to check against)."""
    if not DOCS_DIR.is_dir():
        return True
    return (DOCS_DIR / f"{name}.md").is_file()


def docs_reference(name: str) -> Reference:
    """The ``@misc`` entry of a document shipped with ncproofs (``docs/<name>.md``)."""
    return Reference(f"ncproofs-docs-{name}".replace("_", "-"), "misc",
                     f"ncproofs documentation: docs/{name}.md", ("{ncproofs contributors}",), NCPROOFS_YEAR,
                     howpublished=f"docs/{name}.md in the ncproofs distribution",
                     note="conventions, formulas and derivations the checks rely on")


def misc_reference(source: str) -> Reference:
    """A free-text source (e.g. of a user claim) as ``@misc`` with the string as note."""
    h = hashlib.sha1(source.encode("utf-8")).hexdigest()[:10]
    return Reference(f"source-{h}", "misc", "Source of a claim checked with ncproofs", note=source)


@dataclass(frozen=True)
class Citation:
    """The structured form of one claim's source."""

    source: str
    references: tuple[Reference, ...]
    locator: str | None = None  # "Theorem 1", "Corollary", ...
    docs: tuple[str, ...] = field(default=())  # docs/<name>.md named by the source

    @property
    def keys(self) -> list[str]:
        return [r.key for r in self.references]

    @property
    def known(self) -> bool:
        """True when the source names a paper or an ncproofs document of the registry."""
        return any(r.entry_type != "misc" or r.key.startswith("ncproofs-docs-") for r in self.references)

    def to_dict(self) -> dict:
        return {"source": self.source, "keys": self.keys, "locator": self.locator, "docs": list(self.docs),
                "references": [{"key": r.key, "short": r.short(), "title": r.title,
                                "arxiv": r.arxiv, "year": r.year} for r in self.references]}


def cite_source(source: str) -> Citation:
    """Structured references of a source string (see the module docstring)."""
    if not isinstance(source, str):
        raise TypeError(f"source must be a string, got {type(source).__name__}")
    refs: list[Reference] = []
    for pattern, key in SOURCE_PATTERNS:
        if re.search(pattern, source) and REFERENCES[key] not in refs:
            refs.append(REFERENCES[key])
    docs = tuple(d for d in dict.fromkeys(_DOCS_RE.findall(source)) if shipped_doc(d))
    refs += [docs_reference(d) for d in docs]
    m = _LOCATOR_RE.search(source)
    locator = m.group(0) if m else None
    if not refs:
        refs = [misc_reference(source)] if source.strip() else []
    return Citation(source, tuple(refs), locator, docs)


def cite_claim(claim) -> Citation:
    """:func:`cite_source` of a claim's ``source``."""
    return cite_source(getattr(claim, "source", "") or "")


def keys_for_family(family: str) -> list[str]:
    """BibTeX keys a table of ``family`` cites ([] for an unknown family)."""
    return list(FAMILY_KEYS.get(family, FAMILY_KEYS.get(family.replace("_", "-"), [])))


def references_for(claims: Iterable) -> list[Reference]:
    """The distinct references of the claims' sources, papers first (in registry order), then
    ncproofs documents, then free-text sources."""
    seen: dict[str, Reference] = {}
    for c in claims:
        for r in cite_claim(c).references:
            seen.setdefault(r.key, r)
    order = {k: i for i, k in enumerate(REFERENCES)}
    return sorted(seen.values(), key=lambda r: (0, order[r.key]) if r.key in order else
                  (1, r.key) if r.key.startswith("ncproofs-docs-") else (2, r.key))


def bibtex(claims: Sequence, *, header: bool = True, extra: Sequence[str] = (), tool: bool = True) -> str:
    """BibTeX of the sources of ``claims`` (plus the :data:`REFERENCES` keys in ``extra`` and, with
    ``tool``, the entry for ncproofs itself); with ``header``, a comment block that says which claim
    cites which keys and locator (BibTeX ignores text outside entries)."""
    claims = list(claims)
    refs = [REFERENCES[k] for k in extra]
    refs += [r for r in references_for(claims) if r not in refs]
    if tool:
        refs.append(ncproofs_reference())
    out = []
    if header:
        out.append(f"% BibTeX for the sources of {len(claims)} claim(s), generated by `ncproofs cite`.")
        out.append("% claim id: keys [locator]")
        for c in claims:
            ci = cite_claim(c)
            out.append(f"%   {c.id}: {', '.join(ci.keys)}" + (f" [{ci.locator}]" if ci.locator else ""))
        if extra:
            out.append(f"% metrics of `ncproofs measure` (docs/metrics.md): {', '.join(extra)}")
        if tool:
            out.append("% the tool itself: ncproofs (CITATION.cff)")
        out.append("")
    out += [r.bibtex() for r in refs]
    return "\n".join(out)


def select_claims(only: Sequence[str] | None):
    """Built-in claims selected like ``ncproofs run --only`` (all without patterns; an unmatched
    pattern is bad input with "did you mean"). ``measure``/``metrics`` select no claim (the metric
    papers: :func:`metric_keys`)."""
    from proofs_check import registry

    rest = [p for p in (only or []) if p not in METRIC_NAMES]
    if only and not rest:
        return []
    claims = registry.select(registry.all_claims(), rest or None, strict=True)
    if not claims:
        raise InputError(f"--only {list(only or [])}: no claim matches (see `ncproofs list`)")
    return claims


def metric_keys(only: Sequence[str] | None) -> list[str]:
    """The metric papers when ``--only`` names ``measure`` (or ``metrics``), or when nothing is selected
    (every built-in source plus the metric papers)."""
    keys = list(METRIC_KEYS) if not only or any(p in METRIC_NAMES for p in only) else []
    if not only:  # a plain `ncproofs cite` also holds every paper a table caption cites (FAMILY_KEYS)
        for k in (k for ks in FAMILY_KEYS.values() for k in ks):
            if k in REFERENCES and k not in keys:
                keys.append(k)
    return keys
