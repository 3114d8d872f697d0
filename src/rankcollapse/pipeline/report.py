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

from rankcollapse.edge.atomic import atomic_write
from rankcollapse.experiments.contract.verdicts import (
    CONSISTENT_CLASS,
    FOLLOWUPS,
    INCONCLUSIVE,
    MAIN_PAPER,
    NOT_REPRODUCED,
    ORIGINS,
    REPRODUCED,
    UNDECIDED,
    UNTESTED,
    Claim,
    Origin,
    class_word,
    origin_heading,
    tally,
    verdict_class,
)
from rankcollapse.experiments.kit.glossary import terms_used
from rankcollapse.experiments.kit.plots import FigureFile
from rankcollapse.pipeline.summary import (
    claim_bullets,
    origin_sentences,
    sample_sentence,
    section_paragraph,
    sequential_sentence,
    untested_sentence,
)

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
.v-undecided { color: #0550ae; background: #ddf4ff; } .v-untested { color: #555; background: #eaeef2; }
.v-consistent { color: #1f6f8b; background: #e6f4f7; } .v-standin { color: #6e5494; background: #f3eefa; }
.flag { font-size: 11px; border: 1px solid var(--mid); color: var(--mid); border-radius: 10px;
        padding: 0 6px; }
.origin { font-weight: 600; margin-bottom: 4px; }
.summary { background: #f6f8fa; border: 1px solid var(--line); border-radius: 8px; padding: 4px 18px 8px; }
.summary h2 { margin-top: 12px; } .para { max-width: 980px; } .bullets { max-width: 980px; }
table.counters { width: auto; } table.counters td { border: none; padding: 3px 10px 3px 0; }
.cnt { margin-right: 10px; white-space: nowrap; }
div.ev { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; color: #333; }
.rule { color: var(--muted); font-size: 12px; margin-top: 3px; }
.note { border-left: 4px solid var(--bad); background: #fff5f5; padding: 8px 14px; margin: 10px 0; }
figure { margin: 18px 0 30px; }
figure img { max-width: 100%; border: 1px solid var(--line); border-radius: 6px; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 6px; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
pre { background: #f6f8fa; padding: 10px; border-radius: 6px; overflow-x: auto; }
details { margin: 6px 0; } summary { cursor: pointer; }
"""


_SHOWN = ("task", "base", "grid", "verdict", "ranges", "source")


def _e(text: Any) -> str:
    return html.escape(str(text))


_BADGE = {
    REPRODUCED.value: "v-reproduced",
    NOT_REPRODUCED.value: "v-not",
    INCONCLUSIVE.value: "v-inconclusive",
    UNDECIDED: "v-undecided",
    UNTESTED: "v-untested",
    CONSISTENT_CLASS: "v-consistent",
    "holds": "v-reproduced",
    "differs": "v-not",
    "n/a": "v-untested",
}


def _verdict_badge(word: str, cls: str | None = None, origin: str = "") -> str:
    """A verdict word (or a counter's class name) in its class's colours (a stand-in's own colour: its
    rows describe the stand-in, not the paper)."""
    badge = (
        "v-standin" if origin == Origin.STAND_IN.value and cls is None else _BADGE[cls or verdict_class(word)]
    )
    return f'<span class="v {badge}">{_e(word)}</span>'


def _n_words(c: Claim) -> str:
    """``n = 32`` or ``n = 2 networks``."""
    if c.n is None:
        return "n/a"
    return f"{c.n}" if c.unit == "samples" else f"{c.n} {c.unit}"


def _sample_words(c: Claim) -> str:
    """``4 samples`` or ``2 networks``: what the row's n counts (never "n", which counts tokens)."""
    return "an unknown sample" if c.n is None else f"{c.n} {c.unit}"


def _row_verdict(c: Claim) -> str:
    """The row's verdict cell head: its word, or for a row the sample leaves open ``undecided at 4 samples``
    with the n that would decide it (the word stays beside it); the scope where the verdict was tested
    when it is narrower than the statement; the comparison that decided it."""
    scope = f"<div class='rule'><b>{_e(c.scope)}</b></div>" if c.scope else ""
    decided = f"<div class='rule'>decided by: {_e(c.interval)}</div>" if c.interval else ""
    if c.verdict_class != UNDECIDED:
        return _verdict_badge(c.verdict, origin=c.origin) + scope + decided
    need = (
        f"<div class='rule'>n ≈ {c.needed_n} {'' if c.unit == 'samples' else c.unit + ' '}would decide it "
        "at the observed spread</div>"
        if c.needed_n
        else ""
    )
    return (
        _verdict_badge(f"undecided at {_sample_words(c)}", UNDECIDED)
        + need
        + f"<div class='rule'>open: {_e(c.interval)}</div>"
        + f"<div class='rule'>{_e(c.verdict)}</div>"
    )


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


def _claims_table(claims: list[Claim], number: dict[str, int]) -> list[str]:
    parts = [
        "<table><thead><tr><th>#</th><th>Statement</th><th>Verdict</th><th>Why</th>"
        "<th>Origin · source · n</th></tr></thead><tbody>"
    ]
    for c in claims:
        flags = []
        if c.threshold_sensitive:
            flags.append("<span class='flag'>threshold-sensitive</span>")
        if c.provisional:
            flags.append("<span class='flag'>provisional</span>")
        if c.undecided and c.verdict_class != UNDECIDED:
            flags.append(f"<span class='flag'>a part undecided at {_e(_sample_words(c))}</span>")
        if c.sampling:
            flags.append(f"<div class='rule'>sampling: {_e(c.sampling)}</div>")
        parts.append(
            f"<tr id='{_e(c.id)}'><td>{number[c.id]}</td><td>{_e(c.statement)}"
            f"<div class='rule'>rule: {_e(c.rule)}</div>"
            + (f"<div class='rule'>thresholds: {_e(c.thresholds)}</div>" if c.thresholds else "")
            + f"<details><summary>evidence</summary><div class='ev'>{_e(c.evidence)}"
            + (f"<br>{_e(c.mechanism_evidence)}" if c.mechanism_evidence else "")
            + "</div></details></td>"
            f"<td>{_row_verdict(c)}<div class='rule'>as plotted: {_e(c.as_plotted)}; mechanism: "
            f"{_e(c.mechanism)}</div>{' '.join(flags)}</td>"
            f"<td>{_e(c.cause) if c.cause else ''}"
            + (f"<div class='rule'>{_e(c.sensitivity)}</div>" if c.sensitivity else "")
            + f"</td><td>{_e(c.origin)}<br>{_e(c.source)}"
            + (f"<br><i>{_e(c.stand_in)}</i>" if c.stand_in else "")
            + f"<br>n = {_e(_n_words(c))}"
            + (f"<div class='rule'>{_e(c.decided_by)}</div>" if c.decided_by else "")
            + (f"<br><a href='#fig-{_e(c.figure)}'>figure</a>" if c.figure else "")
            + "</td></tr>"
        )
    parts.append("</tbody></table>")
    return parts


def _figure(f: FigureFile, out_dir: Path) -> str:
    return (
        f"<figure id='fig-{_e(f.name)}'>{_img(f.png)}<figcaption><b>{_e(f.name)}</b> — "
        f"{_e(f.caption)} {_csv_link(f.csv, out_dir)} · PDF: <code>{_e(f.pdf.relative_to(out_dir))}</code>"
        f"</figcaption>{_figure_table(f.table)}</figure>"
    )


def _figure_table(path: Path | None) -> str:
    """The small table a figure carries (``FigureSpec.table``: a verdict map's cells), every cell escaped."""
    if path is None or not path.exists():
        return ""
    import pandas as pd

    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    head = "".join(f"<th>{_e(c)}</th>" for c in frame.columns)
    rows = "".join("<tr>" + "".join(f"<td>{_e(v)}</td>" for v in r) + "</tr>"
                   for r in frame.itertuples(index=False))
    return f"<table class='map'><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _counters(counts: dict[str, dict[str, dict[str, int]]]) -> list[str]:
    """Per origin (paper setting first) two lines: the rows in each class as plotted, and the mechanism's
    classes apart (``contract.verdicts.tally``), each origin under its ``origin_heading``."""
    parts = ["<table class='counters'><tbody>"]
    for origin, both in counts.items():
        head = origin_heading(origin)
        plotted = " · ".join(
            f"<b>{n}</b> {_verdict_badge(class_word(k, origin), k)}" for k, n in both["as plotted"].items()
        )
        mech = " · ".join(f"<b>{n}</b> {_verdict_badge(k, k)}" for k, n in both["mechanism"].items())
        parts.append(f"<tr><td class='origin'>{_e(head)}</td><td>as plotted: {plotted}</td></tr>")
        if mech:
            parts.append(f"<tr><td></td><td>mechanism: {mech}</td></tr>")
    parts.append("</tbody></table>")
    return parts


def _summary(
    claims: list[Claim], headlines: dict[str, list[str]], sequential: dict | None = None
) -> list[str]:
    """The one-screen summary: per origin what reproduced and what did not (with causes), the headline
    findings with their numbers, what could not be tested offline, what the sample decides."""
    parts = ["<section id='summary' class='summary'><h2>Summary</h2>"]
    if not claims:
        parts.append("<p>No statement of the NeurIPS paper was judged in this run (only follow-up stories "
                     "ran); each follow-up paper's rows are counted in its own section below.</p>")
    for origin in ORIGINS:
        sentences = origin_sentences(claims, origin)
        if sentences:
            parts.append(f"<p><b>{_e(sentences[0])}</b></p>")
            if len(sentences) > 1:
                parts.append("<ul>" + "".join(f"<li>{_e(t)}</li>" for t in sentences[1:]) + "</ul>")
    found = [h for hs in headlines.values() for h in hs]
    if found:
        parts.append(
            "<p><b>What the data show, in numbers:</b></p><ul>"
            + "".join(f"<li>{_e(h)}</li>" for h in found)
            + "</ul>"
        )
    untested = untested_sentence(claims)
    if untested:
        parts.append(f"<p>{_e(untested)}</p>")
    if claims:
        parts.append(f"<p>{_e(sample_sentence(claims))}</p>")
    told = sequential_sentence(claims, sequential)
    if told:
        parts.append(f"<p>{_e(told)}</p>")
    parts.append("</section>")
    return parts


def render_report(
    claims: list[Claim],
    figures: list[FigureFile],
    experiments: list[dict[str, Any]],
    meta: dict[str, Any],
    out_dir: Path,
    headlines: dict[str, list[str]] | None = None,
) -> str:
    """The whole page as a string: one section per story (the paper's order), its figures next to its rows.

    Everything a reader needs is inside the page (figures as base64 PNG, figure data as data-URI
    downloads up to :data:`EMBED_CSV_MAX`), so it works when the HTML file is sent alone.
    """
    counts = tally(claims)  # the main paper's rows only: each follow-up has its own section and counters
    number = {cid: i for i, cid in enumerate(dict.fromkeys(c.id for c in claims), 1)}
    paper_of: dict[str, str] = {}  # a story's paper: its first row's (a story may judge a second follow-up)
    for c in claims:
        paper_of.setdefault(c.story, c.paper)
    main = [c for c in claims if c.paper == MAIN_PAPER]
    every = list(dict.fromkeys(e.get("story") or e["name"] for e in experiments))
    stories = [s for s in every if paper_of.get(s, MAIN_PAPER) == MAIN_PAPER]
    followups = {p: [s for s in every if paper_of.get(s) == p] for p in FOLLOWUPS}
    followups = {p: names for p, names in followups.items() if names}
    # a follow-up whose statements only a story of another paper judges (Statement.paper): its heading and
    # counters open that story's section, after its host paper's
    guests: dict[str, list[str]] = {}
    for c in claims:
        if c.paper != MAIN_PAPER and c.paper not in followups and c.paper not in guests.get(c.story, []):
            guests.setdefault(c.story, []).append(c.paper)
    titles: dict[str, str] = {}
    for e in experiments:
        titles.setdefault(e.get("story") or e["name"], e.get("story_title") or e["title"])
    headlines = headlines or {}
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
        *([f"<p>{len({c.id for c in main})} rows (one per statement, model and origin), counted per origin "
           "by the verdict on the quantity the paper plots and, apart, by the mechanism (μ_rel against the "
           "precision floor, float64 beside float32):</p>", *_counters(counts)] if main else []),
        *_summary(main, {k: v for k, v in headlines.items() if k in stories}, meta.get("sequential")),
        "<p>Sections, in the paper's order: "
        + " · ".join([*(f"<a href='#exp-{_e(n)}'>{_e(titles[n].split(':')[0])}</a>" for n in stories),
                      *(f"<a href='#paper-{_e(p)}'>follow-up: arXiv {_e(p)}</a>"
                        for p in [*followups, *(g for gs in guests.values() for g in gs)]),
                      "<a href='#glossary'>glossary</a>"])
        + "</p>",
    ]
    by_story: dict[str, list[Claim]] = {}
    for c in claims:
        by_story.setdefault(c.story, []).append(c)
    by_figs: dict[str, list[FigureFile]] = {}
    for f in figures:
        by_figs.setdefault(f.experiment, []).append(f)
    sections = [(name, "") for name in stories]
    for paper, names in followups.items():
        sections += [(name, paper if i == 0 else "") for i, name in enumerate(names)]
    for name, opens in sections:
        if opens:  # a follow-up paper: its own heading and counters, apart from the main paper's
            mine = [c for c in claims if c.paper == opens]
            parts.append(
                f"<h2 id='paper-{_e(opens)}'>Follow-up: {_e(FOLLOWUPS[opens])}</h2>"
                f"<p>{len({c.id for c in mine})} rows judge this paper's statements on the same engine; they "
                "are counted here only, never in the counters at the top:</p>"
            )
            parts.extend(_counters(tally(claims, opens)))
        for guest in guests.get(name, []):
            mine = [c for c in claims if c.paper == guest]
            parts.append(
                f"<h2 id='paper-{_e(guest)}'>Follow-up: {_e(FOLLOWUPS[guest])}</h2>"
                f"<p>{len({c.id for c in mine})} rows judge this paper's statements in the section below, on "
                "the same runs as the paper above; they are counted here only:</p>"
            )
            parts.extend(_counters(tally(claims, guest)))
        parts.append(f"<h2 id='exp-{_e(name)}'>{_e(titles[name])}</h2>")
        rows = by_story.get(name, [])
        if rows and rows[0].paper != MAIN_PAPER:  # a follow-up: one line per claim, then its findings
            parts.append("<ul class='bullets'>" + "".join(f"<li>{_e(b)}</li>" for b in claim_bullets(rows))
                         + "</ul>")
            found = [*headlines.get(name, [])[:2], sample_sentence(rows)]
            parts.append("".join(f"<p class='para'>{_e(h)}</p>" for h in found))
        elif rows or headlines.get(name):
            parts.append(f"<p class='para'>{_e(section_paragraph(rows, headlines.get(name, [])))}</p>")
        parts.extend(_figure(f, out_dir) for f in by_figs.get(name, []))
        if by_story.get(name):
            parts.extend(_claims_table(by_story[name], number))
    used = terms_used(
        [c.evidence for c in claims]
        + [c.rule for c in claims]
        + [c.statement for c in claims]
        + [c.cause for c in claims]
        + [c.verdict for c in claims]
        + [f.caption for f in figures]
        + [c.origin for c in claims]
        + ["as plotted", "mechanism", "±", "std"]
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
        "<h2>Experiments and settings</h2><p>Each paper result is one story: a module and a YAML file in "
        "<code>src/rankcollapse/experiments/stories/</code>, one experiment per arm; the profile overrides "
        "are "
        "applied. All runs are in <code>runs.csv</code> (tidy, one row per run and layer) and "
        "<code>index.csv</code> (one row per run) beside this page.</p>"
    )
    for e in experiments:
        parts.append(
            f"<details><summary><b>{_e(e['name'])}</b> — {_e(e['title'])} "
            f"({_e(e.get('runs', '?'))} runs, {_e(e.get('wall_s', '?'))} s of run time)</summary>"
            f"<pre>{_e(json.dumps({k: e.get(k) for k in _SHOWN}, indent=1))}"
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
    headlines: dict[str, list[str]] | None = None,
) -> Path:
    """Write ``out_dir/report.html`` atomically and return its path."""
    page = render_report(claims, figures, experiments, meta, out_dir, headlines)
    path = out_dir / "report.html"
    atomic_write(path, page)
    return path
