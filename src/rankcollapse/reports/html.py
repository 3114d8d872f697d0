"""``report.html``: one self-contained page (inline CSS, figures as base64 PNG, no external assets).

Sections: the verdict counts (each statement once), then one section per experiment with its
figures next to its claims (claim, evidence, verdict, config and seeds), "where our runs disagree
with the paper" in plain words, the glossary of every term the evidence uses, the experiments'
settings, and the environment (versions, timings). The page works when sent alone.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from rankcollapse.experiments.engine.verdicts import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    combine_verdicts,
)
from rankcollapse.experiments.glossary import terms_used
from rankcollapse.experiments.plotting import FigureFile
from rankcollapse.io import atomic_write

_CSS = """
:root { --ok:#1a7f37; --bad:#cf222e; --mid:#9a6700; --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; }
* { box-sizing: border-box; }
body { font: 15px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg);
       max-width: 1180px; margin: 0 auto; padding: 24px 28px 64px; background: #fff; }
h1 { font-size: 26px; margin: 0 0 4px; } h2 { font-size: 20px; margin: 36px 0 10px;
     border-bottom: 1px solid var(--line); padding-bottom: 4px; }
.sub { color: var(--muted); margin: 0 0 18px; }
.cards { display: flex; gap: 12px; margin: 16px 0; flex-wrap: wrap; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 16px; min-width: 150px; }
.card b { font-size: 24px; display: block; }
table { border-collapse: collapse; width: 100%; font-size: 13.5px; }
th, td { border-bottom: 1px solid var(--line); padding: 7px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; position: sticky; top: 0; }
td.ev { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; color: #333; }
.v { font-weight: 600; white-space: nowrap; padding: 2px 8px; border-radius: 12px; font-size: 12.5px; }
.v-reproduced { color: var(--ok); background: #dafbe1; } .v-not { color: var(--bad); background: #ffebe9; }
.v-inconclusive { color: var(--mid); background: #fff8c5; }
.rule { color: var(--muted); font-size: 12px; margin-top: 3px; }
.note { border-left: 4px solid var(--bad); background: #fff5f5; padding: 8px 14px; margin: 10px 0; }
figure { margin: 18px 0 30px; }
figure img { max-width: 100%; border: 1px solid var(--line); border-radius: 6px; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 6px; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
pre { background: #f6f8fa; padding: 10px; border-radius: 6px; overflow-x: auto; }
details { margin: 6px 0; } summary { cursor: pointer; }
"""


_SHOWN = ("task", "base", "grid", "verdict", "source")


def _e(text: Any) -> str:
    return html.escape(str(text))


def _verdict_badge(verdict: str) -> str:
    cls = {REPRODUCED: "v-reproduced", NOT_REPRODUCED: "v-not", INCONCLUSIVE: "v-inconclusive"}[verdict]
    return f'<span class="v {cls}">{_e(verdict)}</span>'


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{_e(path.stem)}" src="data:image/png;base64,{data}">'


#: A figure's data is embedded as a download link when its CSV is at most this big (else named).
EMBED_CSV_MAX = 1_500_000


def _csv_link(path: Path, out_dir: Path) -> str:
    """A download link that works when the page is sent alone (data URI), or the file's name."""
    rel = _e(path.relative_to(out_dir))
    if path.exists() and path.stat().st_size <= EMBED_CSV_MAX:
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f"<a download='{_e(path.name)}' href='data:text/csv;base64,{data}'>data (CSV)</a>"
    return f"data: <code>{rel}</code> beside this page"


def tally(claims: list[Claim]) -> dict[str, int]:
    """Verdict counts with each statement counted once: rows sharing a claim id are combined first."""
    by_id: dict[str, list[str]] = {}
    for c in claims:
        by_id.setdefault(c.id, []).append(c.verdict)
    counts = dict.fromkeys((REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE), 0)
    for verdicts in by_id.values():
        counts[verdicts[0] if len(verdicts) == 1 else combine_verdicts(verdicts)] += 1
    return counts


def _claims_table(claims: list[Claim], number: dict[str, int]) -> list[str]:
    parts = [
        "<table><thead><tr><th>#</th><th>Claim</th><th>What we measured</th>"
        "<th>Verdict</th><th>Source · config · seeds</th></tr></thead><tbody>"
    ]
    for c in claims:
        parts.append(
            f"<tr id='{_e(c.id)}'><td>{number[c.id]}</td><td>{_e(c.statement)}"
            f"<div class='rule'>rule: {_e(c.rule)}</div></td>"
            f"<td class='ev'>{_e(c.evidence)}</td><td>{_verdict_badge(c.verdict)}</td>"
            f"<td>{_e(c.source)}<br><code>{_e(c.conditions)}</code><br>"
            f"seeds {_e(', '.join(map(str, c.seeds)) or 'n/a')}"
            + (f"<br><a href='#fig-{_e(c.figure)}'>figure</a>" if c.figure else "")
            + "</td></tr>"
        )
    parts.append("</tbody></table>")
    return parts


def _figure(f: FigureFile, out_dir: Path) -> str:
    return (
        f"<figure id='fig-{_e(f.name)}'>{_img(f.png)}<figcaption><b>{_e(f.name)}</b> — "
        f"{_e(f.caption)} {_csv_link(f.csv, out_dir)} · PDF: <code>{_e(f.pdf.relative_to(out_dir))}</code>"
        "</figcaption></figure>"
    )


def render_report(
    claims: list[Claim],
    figures: list[FigureFile],
    experiments: list[dict[str, Any]],
    meta: dict[str, Any],
    out_dir: Path,
) -> str:
    """The whole page as a string: one section per experiment, its figures next to its claims.

    Everything a reader needs is inside the page (figures as base64 PNG, figure data as data-URI
    downloads up to :data:`EMBED_CSV_MAX`), so it works when the HTML file is sent alone.
    """
    counts = tally(claims)
    number = {cid: i for i, cid in enumerate(dict.fromkeys(c.id for c in claims), 1)}
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        "<title>rankcollapse: reproduction report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Reproduction report: On the Role of Attention Masks and LayerNorm in Transformers</h1>",
        f"<p class='sub'>arXiv 2405.18781 · profile <b>{_e(meta.get('profile'))}</b> · "
        f"{_e(meta.get('finished_at', ''))} · {_e(meta.get('runs_total', 0))} runs "
        f"({_e(meta.get('runs_failed', 0))} failed) · wall time {_e(meta.get('wall_s', 0))} s"
        + (f" · <code>{_e(meta['command'])}</code>" if meta.get("command") else "")
        + "</p>",
        f"<p>{len(number)} statements, each counted once:</p><div class='cards'>",
        *(
            f"<div class='card'><b>{counts[v]}</b>{_verdict_badge(v)}</div>"
            for v in (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)
        ),
        "</div>",
        "<p>Every verdict is computed from the measured data by the rule printed under the claim "
        "(thresholds in each experiment's YAML config). <i>Inconclusive</i> means no data, too few "
        "samples or points above the precision floor, or evidence pointing both ways. Every term used "
        "in the evidence is defined in the <a href='#glossary'>glossary</a>. Sections: "
        + " · ".join(f"<a href='#exp-{_e(e['name'])}'>{_e(e['name'])}</a>" for e in experiments)
        + "</p>",
    ]
    by_exp_claims: dict[str, list[Claim]] = {}
    for c in claims:
        by_exp_claims.setdefault(c.experiment, []).append(c)
    by_exp_figs: dict[str, list[FigureFile]] = {}
    for f in figures:
        by_exp_figs.setdefault(f.experiment, []).append(f)
    described = {e["name"] for e in experiments}
    for e in experiments:
        name = e["name"]
        parts.append(f"<h2 id='exp-{_e(name)}'>{_e(e['title'])}</h2>")
        parts.extend(_figure(f, out_dir) for f in by_exp_figs.get(name, []))
        if by_exp_claims.get(name):
            parts.extend(_claims_table(by_exp_claims[name], number))
    orphans = [c for c in claims if c.experiment not in described]
    if orphans:
        parts.append("<h2>Other claims</h2>")
        parts.extend(_claims_table(orphans, number))
    notes = [c for c in claims if c.disagreement]
    parts.append("<h2>Where our runs disagree with the paper</h2>")
    if notes:
        parts.append(
            "<p>Each note explains in plain words why a claim reads differently on the paper's quantity "
            "(raw mu) and on mu_rel with the precision floor, or why our setting differs.</p>"
        )
        parts.extend(
            f"<div class='note'><a href='#{_e(c.id)}'><b>{_e(c.id)}</b></a>: {_e(c.disagreement)}</div>"
            for c in notes
        )
    else:
        parts.append("<p>No claim carries a disagreement note in this run.</p>")
    used = terms_used(
        [c.evidence for c in claims] + [c.rule for c in claims] + [c.statement for c in claims]
    )
    parts.append("<h2 id='glossary'>Glossary</h2><table><tbody>")
    parts.extend(f"<tr><td><b>{_e(term)}</b></td><td>{_e(text)}</td></tr>" for term, text in used.items())
    parts.append("</tbody></table>")
    failed = meta.get("failed_runs") or []
    if failed:
        parts.append(
            f"<h2>Failed runs ({len(failed)})</h2><p>They are retried by the next invocation.</p>"
            "<table><thead><tr><th>experiment</th><th>run</th><th>error</th></tr></thead><tbody>"
        )
        parts.extend(
            f"<tr><td>{_e(f['experiment'])}</td><td><code>{_e(f['run_id'])}</code></td>"
            f"<td class='ev'>{_e(f['error'])}</td></tr>"
            for f in failed[:50]
        )
        parts.append("</tbody></table>")
    parts.append(
        "<h2>Experiments and settings</h2><p>Each experiment is one story: a module and a YAML file in "
        "<code>src/rankcollapse/experiments/stories/</code>; the profile overrides are applied. "
        "All runs are in <code>runs.csv</code> (tidy, one row per run and layer) and "
        "<code>index.csv</code> (one row per run) beside this page.</p>"
    )
    for e in experiments:
        parts.append(
            f"<details><summary><b>{_e(e['name'])}</b> — {_e(e['title'])} "
            f"({_e(e.get('runs', '?'))} runs, {_e(e.get('wall_s', '?'))} s of run time)</summary>"
            f"<pre>{_e(json.dumps({k: e[k] for k in _SHOWN}, indent=1))}"
            "</pre></details>"
        )
    parts.append("<h2>Environment</h2><pre>" + _e(json.dumps(meta, indent=1, default=str)) + "</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(
    claims: list[Claim],
    figures: list[FigureFile],
    experiments: list[dict[str, Any]],
    meta: dict[str, Any],
    out_dir: Path,
) -> Path:
    """Write ``out_dir/report.html`` atomically and return its path."""
    page = render_report(claims, figures, experiments, meta, out_dir)
    path = out_dir / "report.html"
    atomic_write(path, page)
    return path
