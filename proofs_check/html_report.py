"""One self-contained HTML report: ``ncproofs run --html F`` and ``ncproofs solve ... --html F``.

The file needs no network: CSS and JavaScript are inline, figures are ``data:`` URIs (PNG) or
inline SVG, and a Content-Security-Policy forbids every other source. It holds

- the summary (overall verdict and reason, counts per verdict, profile, time, environment) and a
  chart of the verdicts per family (inline SVG, no matplotlib needed);
- a filterable table of the claims (search text; family, verdict and provenance menus; a count
  of the visible rows); each claim opens to its statement, source with the BibTeX keys of
  :mod:`proofs_check.citations`, reason, key numbers and every check with its evidence;
- for ``solve``: the instance, prediction, solution, the certificate numbers, the geometry, each
  statement with its evidence and reason, the diagnostics, and the Gram figure of
  :mod:`proofs_check.plots` when matplotlib is installed;
- the references (authors, title, venue, arXiv) cited by the claims shown.

Evidence is shortened for the page (long arrays keep their first entries and say how many were
left out; see :data:`EVIDENCE_LIMITS`), so ``ncproofs run`` stays under :data:`MAX_BYTES`; the
JSON report keeps everything. The output path is checked before any work and the file is written
atomically (:mod:`proofs_check.outputs`).
"""

from __future__ import annotations

import base64
import html
import json
import math
import time
from typing import Any, Iterable

#: the report must stay below this size (the issue's limit for `ncproofs run`)
MAX_BYTES = 5_000_000
#: (longest list kept, longest string kept, deepest nesting shown) for evidence, tried in order
#: until the page fits in MAX_BYTES
EVIDENCE_LIMITS = ((40, 4000, 8), (12, 1000, 6), (4, 300, 4), (2, 120, 3))

VERDICTS = ("VERIFIED", "NOT_APPLICABLE", "INCONCLUSIVE", "REFUTED", "ERROR")
_COLOURS = {"VERIFIED": "#1a7f37", "NOT_APPLICABLE": "#6e7781", "INCONCLUSIVE": "#9a6700", "REFUTED": "#cf222e",
            "ERROR": "#8250df"}

_CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
        "base-uri 'none'; form-action 'none'")

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:1.5em auto;max-width:1200px;
 padding:0 1em;color:#1f2328;line-height:1.45}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #d0d7de}
.verdict{display:inline-block;padding:0 .45em;border-radius:.3em;color:#fff;font-weight:600;font-size:.85em}
table{border-collapse:collapse;width:100%;font-size:.9em} th,td{border-bottom:1px solid #d0d7de;padding:.25em .4em;
 text-align:left;vertical-align:top} th{background:#f6f8fa}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.filters{display:flex;flex-wrap:wrap;gap:.6em;align-items:center;margin:.6em 0}
.filters input,.filters select{font-size:.95em;padding:.2em .3em}
pre{background:#f6f8fa;padding:.5em;overflow:auto;max-height:24em;font-size:.82em;white-space:pre-wrap}
details>summary{cursor:pointer} .muted{color:#57606a} .small{font-size:.85em}
tbody.claim tr.head:hover{background:#f6f8fa} .kv td:first-child{white-space:nowrap;color:#57606a;width:14em}
figure{margin:1em 0} figure img{max-width:100%;height:auto;border:1px solid #d0d7de}
"""

_JS = """
(function(){
  var q=document.getElementById('f-text'), fam=document.getElementById('f-family'),
      ver=document.getElementById('f-verdict'), prov=document.getElementById('f-provenance'),
      count=document.getElementById('f-count');
  if(!q){return;}
  var rows=Array.prototype.slice.call(document.querySelectorAll('tbody.claim'));
  function apply(){
    var t=q.value.trim().toLowerCase(), f=fam.value, v=ver.value, p=prov.value, shown=0;
    rows.forEach(function(r){
      var ok=(!f||r.dataset.family===f)&&(!v||r.dataset.verdict===v)&&(!p||r.dataset.provenance===p)&&
             (!t||r.dataset.search.indexOf(t)>=0);
      r.hidden=!ok; if(ok){shown++;}
    });
    count.textContent=shown+' of '+rows.length+' claims shown';
  }
  [q,fam,ver,prov].forEach(function(el){el.addEventListener('input',apply);el.addEventListener('change',apply);});
  document.getElementById('f-reset').addEventListener('click',function(){q.value='';fam.value='';ver.value='';
    prov.value='';apply();});
  apply();
})();
"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _badge(v: str | None) -> str:
    v = v or "none"
    return f'<span class="verdict" style="background:{_COLOURS.get(v, "#57606a")}">{_e(v)}</span>'


def _num(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return "null" if x is None else str(x).lower()
    if isinstance(x, float):
        return f"{x:.10g}" if math.isfinite(x) else "null"
    return str(x)


def truncate(obj: Any, max_list: int = 40, max_str: int = 4000, depth: int = 8) -> Any:
    """A copy of ``obj`` (JSON data) for display: lists/dicts longer than ``max_list`` keep their
    first entries plus a note of how many were left out, strings longer than ``max_str`` are cut,
    structures deeper than ``depth`` are summarised."""
    if isinstance(obj, str):
        return obj if len(obj) <= max_str else obj[:max_str] + f"… ({len(obj) - max_str} more characters)"
    if isinstance(obj, (list, tuple)):
        if depth <= 0:
            return f"[list of {len(obj)} entries]"
        head = [truncate(v, max_list, max_str, depth - 1) for v in list(obj)[:max_list]]
        if len(obj) > max_list:
            head.append(f"… ({len(obj) - max_list} more entries)")
        return head
    if isinstance(obj, dict):
        if depth <= 0:
            return f"{{object with {len(obj)} keys}}"
        items = list(obj.items())
        out = {str(k): truncate(v, max_list, max_str, depth - 1) for k, v in items[:max(max_list, 64)]}
        if len(items) > max(max_list, 64):
            out["…"] = f"{len(items) - max(max_list, 64)} more keys"
        return out
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _pretty(obj: Any) -> str:
    return json.dumps(obj, indent=1, ensure_ascii=False, default=str, allow_nan=False)


def _kv_table(d: dict | None, limits) -> str:
    if not d:
        return '<p class="muted">none</p>'
    rows = []
    for k, v in d.items():
        if isinstance(v, (dict, list)):
            cell = f"<pre>{_e(_pretty(truncate(v, *limits)))}</pre>"
        else:
            cell = _e(_num(v)) if not isinstance(v, str) else _e(truncate(v, *limits))
        rows.append(f"<tr><td>{_e(k)}</td><td>{cell}</td></tr>")
    return '<table class="kv">' + "".join(rows) + "</table>"


def _citation_html(source: str) -> tuple[str, list]:
    from proofs_check.citations import cite_source

    ci = cite_source(source or "")
    parts = [f"<code>{_e(k)}</code>" for k in ci.keys]
    loc = f" [{_e(ci.locator)}]" if ci.locator else ""
    return (", ".join(parts) + loc), list(ci.references)


def _references_html(refs: Iterable) -> str:
    seen = {}
    for r in refs:
        seen.setdefault(r.key, r)
    if not seen:
        return ""
    items = []
    for r in seen.values():
        who = "; ".join(r.authors)
        bits = [f"<code>{_e(r.key)}</code>", _e(who) + "." if who else "", f"<i>{_e(r.title.replace('{', '').replace('}', ''))}</i>."]
        if r.venue:
            bits.append(_e(r.venue) + (f" {r.year}." if r.year else "."))
        if r.arxiv:
            bits.append(f"arXiv:{_e(r.arxiv)}.")
        if r.howpublished:
            bits.append(_e(r.howpublished) + ".")
        if r.note and r.entry_type == "misc" and not r.key.startswith("ncproofs-docs-"):
            bits.append(_e(r.note))
        items.append("<li>" + " ".join(b for b in bits if b) + "</li>")
    return ("<h2>References</h2><p class='small muted'>BibTeX: <code>ncproofs cite</code> (or "
            "<code>ncproofs cite --only PATTERN</code>).</p><ul class='small'>" + "".join(items) + "</ul>")


def _rigorous_mark(c: dict) -> str:
    """A mark after the verdict badge of a claim whose value statements are proven in ball arithmetic."""
    if c.get("rigorous") is True and c.get("verdict") == "VERIFIED":
        return (' <span class="small" title="value statements proven in ball arithmetic (docs/rigorous.md)">'
                'rigorous</span>')
    return ""


def verdict_chart_svg(claims: list[dict]) -> str:
    """Inline SVG: one stacked bar per family, segments per verdict (counts)."""
    fams: dict[str, dict[str, int]] = {}
    for c in claims:
        fams.setdefault(str(c.get("family")), {}).setdefault(str(c.get("verdict")), 0)
        fams[str(c.get("family"))][str(c.get("verdict"))] += 1
    if not fams:
        return ""
    most = max(sum(v.values()) for v in fams.values())
    bar_w, label_w, row_h = 520.0, 170.0, 22
    h = row_h * len(fams) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 60:.0f}" height="{h}" '
           f'role="img" aria-label="verdicts per family" font-family="sans-serif" font-size="12">']
    for i, (fam, counts) in enumerate(sorted(fams.items())):
        y = 10 + i * row_h
        out.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{_e(fam)}</text>')
        x = label_w
        for v in VERDICTS + tuple(k for k in counts if k not in VERDICTS):
            n = counts.get(v, 0)
            if not n:
                continue
            w = bar_w * n / most
            out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_h - 6}" '
                       f'fill="{_COLOURS.get(v, "#57606a")}"><title>{_e(fam)}: {n} {_e(v)}</title></rect>')
            if w > 18:
                out.append(f'<text x="{x + w / 2:.1f}" y="{y + 12}" text-anchor="middle" fill="#fff">{n}</text>')
            x += w
        out.append(f'<text x="{x + 4:.1f}" y="{y + 12}">{sum(counts.values())}</text>')
    ly = 10 + len(fams) * row_h + 8
    lx = label_w
    for v in VERDICTS:
        out.append(f'<rect x="{lx}" y="{ly}" width="10" height="10" fill="{_COLOURS[v]}"/>'
                   f'<text x="{lx + 14}" y="{ly + 9}">{v}</text>')
        lx += 14 + 8 * len(v) + 14
    out.append("</svg>")
    return "".join(out)


def _page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{_CSP}\">"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>{body}"
            f"<script>{_JS}</script></body></html>\n")


def _checks_html(checks: list[dict], limits) -> str:
    if not checks:
        return '<p class="muted">no checks</p>'
    rows = []
    for ch in checks:
        kind = "independent" if ch.get("independent", True) else "consistency"
        if ch.get("rigorous") is not None:
            kind += ", ball arithmetic" if ch.get("rigorous") else ", not proven in balls"
        ev = ch.get("evidence")
        evh = f"<details><summary>evidence</summary><pre>{_e(_pretty(truncate(ev, *limits)))}</pre></details>" \
            if ev not in (None, {}, []) else '<span class="muted">none</span>'
        rows.append(f"<tr><td>{_e(ch.get('name') or ch.get('id'))}</td><td>{kind}</td><td>{_badge(ch.get('verdict'))}</td>"
                    f"<td>{_e(truncate(ch.get('reason') or '', *limits))}</td><td>{evh}</td></tr>")
    return ("<table><thead><tr><th>check</th><th>kind</th><th>verdict</th><th>reason</th><th>evidence</th></tr>"
            "</thead><tbody>" + "".join(rows) + "</tbody></table>")


def _options(values: Iterable[str], label: str) -> str:
    return f"<option value=''>all {label}</option>" + "".join(
        f"<option value='{_e(v)}'>{_e(v)}</option>" for v in values)


# ---- run report -------------------------------------------------------------------------------------

def run_report_html(data: dict, limits=EVIDENCE_LIMITS[0]) -> str:
    """The page for an ``ncproofs run`` report dict (``RunResult.to_dict()``)."""
    claims = data.get("claims") or []
    counts = data.get("counts") or {}
    env = data.get("environment") or {}
    refs: list = []
    body = [f"<h1>ncproofs report</h1><p class='muted small'>generated {_e(time.strftime('%Y-%m-%d %H:%M:%S'))}"
            f"{'; ' + _e(', '.join(f'{k} {v}' for k, v in env.items())) if env else ''}</p>",
            "<h2 id='summary'>Summary</h2>",
            f"<p id='overall'>Overall verdict: {_badge(data.get('overall_verdict'))} "
            f"<span>{_e(data.get('overall_reason') or '')}</span></p>",
            "<p>" + ", ".join(f"{_badge(k)} {v}" for k, v in counts.items() if v) +
            f" &mdash; {len(claims)} claims, profile <code>{_e(data.get('profile'))}</code>, seed "
            f"{_e(data.get('seed'))}, {_e(_num(data.get('seconds')))} s.</p>",
            "<p class='small muted'>The overall verdict is the worst over the applicable claims; NOT_APPLICABLE "
            "claims (a hypothesis of the theorem fails) do not count. VERIFIED needs at least one independent "
            "check.</p>"]
    chart = verdict_chart_svg(claims)
    if chart:
        body.append(f"<figure id='chart'>{chart}<figcaption class='small muted'>Verdicts per family.</figcaption>"
                    "</figure>")
    fams = sorted({str(c.get("family")) for c in claims})
    provs = sorted({str(c.get("provenance")) for c in claims})
    verds = [v for v in VERDICTS if any(c.get("verdict") == v for c in claims)]
    body.append("<h2 id='claims'>Claims</h2><div class='filters'>"
                "<input id='f-text' type='search' placeholder='filter: id, statement, source…' size='32' "
                "aria-label='filter text'>"
                f"<select id='f-family' aria-label='family'>{_options(fams, 'families')}</select>"
                f"<select id='f-verdict' aria-label='verdict'>{_options(verds, 'verdicts')}</select>"
                f"<select id='f-provenance' aria-label='provenance'>{_options(provs, 'provenances')}</select>"
                "<button id='f-reset' type='button'>reset</button> <span id='f-count' class='muted'></span></div>")
    body.append("<table id='claims-table'><thead><tr><th>claim</th><th>family</th><th>verdict</th><th>provenance</th>"
                "<th>checks i+c</th><th>key numbers</th><th>s</th></tr></thead>")
    for c in claims:
        cite, crefs = _citation_html(c.get("source") or "")
        refs += crefs
        kn = c.get("key_numbers") or {}
        kn_text = ", ".join(f"{k.split('.')[-1]}={_num(v) if not isinstance(v, (list, dict)) else '…'}"
                            for k, v in kn.items())
        search = " ".join(str(c.get(k) or "") for k in ("id", "family", "statement", "source", "verdict",
                                                          "provenance", "reason")).lower()
        body.append(
            f"<tbody class='claim' data-family='{_e(c.get('family'))}' data-verdict='{_e(c.get('verdict'))}' "
            f"data-provenance='{_e(c.get('provenance'))}' data-search='{_e(search)}'>"
            f"<tr class='head'><td><code>{_e(c.get('id'))}</code></td><td>{_e(c.get('family'))}</td>"
            f"<td>{_badge(c.get('verdict'))}{_rigorous_mark(c)}</td><td>{_e(c.get('provenance'))}</td>"
            f"<td class='num'>{_e(c.get('independent_checks'))}+{_e(c.get('consistency_checks'))}</td>"
            f"<td class='small'>{_e(truncate(kn_text, 20, 300))}</td><td class='num'>{_e(_num(c.get('seconds')))}</td></tr>"
            "<tr class='detail'><td colspan='7'><details><summary>statement, reason, checks</summary>"
            f"<p><b>Statement.</b> {_e(c.get('statement'))}</p>"
            f"<p><b>Source.</b> {_e(c.get('source'))} <span class='small'>(cite: {cite})</span></p>"
            f"<p><b>Reason.</b> {_e(truncate(c.get('reason') or '', *limits))}</p>"
            + (f"<p><b>Key numbers (certificate).</b></p>{_kv_table(kn, limits)}" if kn else "")
            + _checks_html(c.get("checks") or [], limits) + "</details></td></tr></tbody>")
    body.append("</table>")
    body.append(_references_html(refs))
    return _page("ncproofs report", "".join(body))


def run_report_html_fitted(data: dict) -> str:
    """:func:`run_report_html` with evidence shortened until the page is under MAX_BYTES."""
    text = ""
    for limits in EVIDENCE_LIMITS:
        text = run_report_html(data, limits)
        if len(text.encode("utf-8")) < MAX_BYTES:
            return text
    # still too big (tens of thousands of claims): drop the evidence, keep every claim row
    slim = dict(data, claims=[{**c, "checks": [{**ch, "evidence": None} for ch in c.get("checks") or []]}
                              for c in data.get("claims") or []])
    return run_report_html(slim, EVIDENCE_LIMITS[-1])


# ---- solve report ---------------------------------------------------------------------------------

def _figure_html(out: dict) -> str:
    """The Gram figure as a data: URI when matplotlib is available and the output has data to draw."""
    from proofs_check import plots
    from proofs_check.commands import UsageError

    try:
        png = plots.figure_bytes(out, "png", dpi=100)
    except UsageError as exc:  # no matplotlib, or nothing to draw
        return f"<p class='muted small'>no figure: {_e(str(exc))}</p>"
    uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    parts = []
    if (out.get("geometry") or {}).get("class_mean_cosines") is not None:
        parts.append("measured class-mean cosines, the predicted target and their difference (own colour scale)")
    if out.get("curves"):
        parts.append("the dynamics curves")
    what = "; ".join(parts) or "the solve's data"
    return (f"<figure id='gram-figure'><img alt='{_e(what)}' src='{uri}'><figcaption class='small muted'>"
            f"{_e(what[0].upper() + what[1:])}.</figcaption></figure>")


def solve_report_html(out: dict, limits=EVIDENCE_LIMITS[0], *, figure: bool = True) -> str:
    """The page for one ``ncproofs solve`` output dict (the ``solve --json`` schema)."""
    from proofs_check.citations import keys_for_family, REFERENCES

    fam = out.get("family")
    claims = out.get("claims") or []
    counts: dict[str, int] = {}
    for c in claims:
        counts[c.get("verdict")] = counts.get(c.get("verdict"), 0) + 1
    body = [f"<h1>ncproofs solve {_e(fam)}</h1>"
            f"<p class='muted small'>generated {_e(time.strftime('%Y-%m-%d %H:%M:%S'))}</p>",
            "<h2 id='summary'>Summary</h2>",
            f"<p id='overall'>Verdict: {_badge(out.get('verdict'))} <span>{_e(out.get('reason'))}</span></p>",
            "<p>" + ", ".join(f"{_badge(k)} {v}" for k, v in counts.items()) + f" &mdash; {len(claims)} statements"
            + (f", {_e(_num(out.get('seconds')))} s" if out.get("seconds") is not None else "") + ".</p>",
            "<h2>Figure</h2>" + (_figure_html(out) if figure else "<p class='muted'>left out (size limit)</p>"),
            "<h2>Instance</h2>", _kv_table(out.get("instance"), limits),
            "<h2>Prediction</h2>", _kv_table(out.get("predicted"), limits),
            "<h2>Solution</h2>", _kv_table(out.get("solution"), limits),
            "<h2 id='certificate'>Certificate</h2>", _kv_table(out.get("certificate"), limits),
            "<h2>Geometry</h2>", _kv_table(out.get("geometry"), limits)]
    verds = [v for v in VERDICTS if any(c.get("verdict") == v for c in claims)]
    body.append("<h2 id='claims'>Statements</h2><div class='filters'>"
                "<input id='f-text' type='search' placeholder='filter…' size='28' aria-label='filter text'>"
                f"<select id='f-family' aria-label='family'>{_options([str(fam)], 'families')}</select>"
                f"<select id='f-verdict' aria-label='verdict'>{_options(verds, 'verdicts')}</select>"
                f"<select id='f-provenance' aria-label='kind'>{_options(['independent', 'consistency'], 'kinds')}"
                "</select><button id='f-reset' type='button'>reset</button> <span id='f-count' class='muted'></span>"
                "</div><table id='claims-table'><thead><tr><th>statement</th><th>kind</th><th>verdict</th>"
                "<th>reason</th></tr></thead>")
    for c in claims:
        kind = "independent" if c.get("independent", True) else "consistency"
        search = " ".join(str(c.get(k) or "") for k in ("id", "verdict", "reason")).lower()
        ev = c.get("evidence")
        body.append(
            f"<tbody class='claim' data-family='{_e(fam)}' data-verdict='{_e(c.get('verdict'))}' "
            f"data-provenance='{kind}' data-search='{_e(search)}'>"
            f"<tr class='head'><td><code>{_e(c.get('id'))}</code></td><td>{kind}</td><td>{_badge(c.get('verdict'))}"
            f"{_rigorous_mark(c)}</td><td>{_e(truncate(c.get('reason') or '', *limits))}</td></tr>"
            f"<tr class='detail'><td colspan='4'><details><summary>evidence</summary>"
            f"<pre>{_e(_pretty(truncate(ev, *limits)))}</pre></details></td></tr></tbody>")
    body.append("</table>")
    diags = out.get("diagnostics") or []
    body.append("<h2>Diagnostics</h2>" + ("<ul class='small'>" + "".join(
        f"<li>{_e(truncate(str(d), *limits))}</li>" for d in diags) + "</ul>" if diags else
        "<p class='muted'>none</p>") + "<p class='small muted'>Diagnostics decided nothing.</p>")
    if out.get("routes"):
        body.append("<h2>Routes</h2>" + _kv_table(out.get("routes") if isinstance(out.get("routes"), dict)
                                                   else {"routes": out.get("routes")}, limits))
    refs = [REFERENCES[k] for k in keys_for_family(str(fam)) if k in REFERENCES] if fam else []
    body.append(_references_html(refs))
    return _page(f"ncproofs solve {fam}", "".join(body))


def solve_report_html_fitted(out: dict) -> str:
    text = ""
    for limits in EVIDENCE_LIMITS:
        text = solve_report_html(out, limits)
        if len(text.encode("utf-8")) < MAX_BYTES:
            return text
    return solve_report_html(out, EVIDENCE_LIMITS[-1], figure=False)


# ---- CLI helpers ------------------------------------------------------------------------------------

def add_html_argument(parser) -> None:
    """``--html PATH`` on ``run`` and on every ``solve`` subparser."""
    parser.add_argument("--html", metavar="PATH", default=None,
                        help="also write one self-contained HTML report (summary, filterable claims, evidence, "
                             "certificate numbers, figures) to PATH")


def check_html_path(path) -> None:
    """Before any work: the path can be written (one-line InputError otherwise)."""
    from proofs_check.outputs import check_output_path

    check_output_path(path, "--html")


def write_run_html(run, path) -> str:
    """Write the report of a RunResult (or its to_dict()) to ``path`` atomically."""
    from proofs_check.outputs import write_text_atomic

    data = run if isinstance(run, dict) else run.to_dict()
    write_text_atomic(path, run_report_html_fitted(data))
    return str(path)


def write_solve_html(out: dict, path) -> str:
    from proofs_check.outputs import write_text_atomic

    write_text_atomic(path, solve_report_html_fitted(out))
    return str(path)
