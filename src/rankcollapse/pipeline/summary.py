"""The report's words: the one-screen summary and each section's paragraph, written from the rows.

Every sentence is computed from the claim rows (their origin, verdict word, cause) and the stories'
headlines (findings with their numbers, ``Story.headlines``); nothing is written by hand. A reader gets,
per origin, what reproduced, what did not and why (the rows' cause sentences), what could not be tested
offline, and what the run's sample size can and cannot decide.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from rankcollapse.experiments.contract.verdicts import (
    CONSISTENT_CLASS,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    UNDECIDED,
    UNTESTED,
    Claim,
    Origin,
    tally,
)


def short(c: Claim, width: int = 90) -> str:
    """The row's statement without its model tag, cut to ``width``, with its qualifier."""
    text = c.statement.split(" [")[0]
    text = text if len(text) <= width else text[: width - 1].rsplit(" ", 1)[0] + "…"
    qual = c.id.split("[", 1)[1][:-1] if "[" in c.id else ""
    return f"{text} [{qual}]" if qual else text


def plain(text: str, width: int = 260) -> str:
    """A cause or evidence sentence for reading: without the standard-error parentheses and the rule's
    boilerplate prefixes, cut at ``width``."""
    text = re.sub(r" \(log rate [^)]*\)", "", text)
    text = text.replace("the data contradict the statement: ", "").replace(
        "not collapsing: no collapse:", "no collapse:"
    )
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= width else text[: width - 1].rsplit(" ", 1)[0] + "…"


def _differs(rows: Sequence[Claim]) -> list[Claim]:
    """The rows reproduced as plotted whose mechanism differs."""
    return [c for c in rows if c.verdict_class == REPRODUCED.value and c.mechanism == NOT_REPRODUCED.value]


def origin_sentences(rows: Sequence[Claim], origin: Origin, limit: int = 3) -> list[str]:
    """What reproduced and what did not, for one paper's rows of one origin, with the causes in one
    sentence each; the numbers are the counters' (``contract.verdicts.tally``)."""
    rows = [c for c in rows if c.origin == origin.value]
    if not rows:
        return []
    counts: Counter[str] = Counter()  # the one tally, per paper of the rows (a story may judge two)
    for paper in dict.fromkeys(c.paper for c in rows):
        counts.update(tally(rows, paper).get(origin.value, {}).get("as plotted", {}))
    where = {
        Origin.PAPER: "In the paper's setting",
        Origin.FOLLOWUP: "In the later paper's own setting",
        Origin.STAND_IN: "On stand-ins",
        Origin.EXTENSION: "In our own extensions",
    }[origin]
    ok, bad, open_ = (counts.get(k.value, 0) for k in (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE))
    untested, undecided, consistent = (counts.get(k, 0) for k in (UNTESTED, UNDECIDED, CONSISTENT_CLASS))
    word = {
        Origin.EXTENSION: "confirmed",
        Origin.STAND_IN: "behave as the statement says (the stand-ins' own behaviour, not the paper's tally)",
    }.get(origin, "reproduce as plotted")
    first = f"{where}, {ok} of {len(rows)} rows {word}"
    diff = _differs(rows)
    if diff:
        kinds = Counter(c.cause_kind for c in diff).most_common()
        first += (
            f", {len(diff)} of them with a mechanism that differs ("
            + ", ".join(f"{k} {n}" for k, n in kinds)
            + ")"
        )
    bad_word = {Origin.EXTENSION: "refuted", Origin.STAND_IN: "behave otherwise"}.get(
        origin, "not reproduced"
    )
    tail = [f"{bad} {bad_word}"] if bad else []
    tail += [f"{consistent} consistent with a conjecture (none found in the search)"] if consistent else []
    tail += [f"{undecided} undecided at their sample size"] if undecided else []
    tail += [f"{open_} inconclusive"] if open_ else []
    tail += [f"{untested} untested"] if untested else []
    out = [first + ("; " + ", ".join(tail) if tail else "") + "."]
    failing = [c for c in rows if c.verdict_class == NOT_REPRODUCED.value]
    groups: dict[str, list[Claim]] = {}
    for c in failing:  # one line per statement: its qualifiers, the first row's cause
        groups.setdefault(f"{c.story}.{c.key}", []).append(c)
    verb = {Origin.EXTENSION: "Not confirmed", Origin.STAND_IN: "Behaves otherwise"}.get(
        origin, "Not reproduced"
    )
    for group in list(groups.values())[:limit]:
        quals = [c.id.split("[", 1)[1][:-1] for c in group if "[" in c.id]
        name = short(group[0]).split(" [")[0] + (f" [{', '.join(quals)}]" if quals else "")
        out.append(f"{verb}: {name} — {group[0].cause_kind}: {plain(group[0].cause)}")
    rest = [c for g in list(groups.values())[limit:] for c in g]
    if rest:
        more = Counter(c.cause_kind for c in rest).most_common()
        out.append(
            f"{len(rest)} more rows "
            + {Origin.EXTENSION: "not confirmed", Origin.STAND_IN: "behaving otherwise"}.get(
                origin, "not reproduced"
            )
            + " ("
            + ", ".join(f"{k} {n}" for k, n in more)
            + ")."
        )
    return out


def sample_sentence(rows: Sequence[Claim]) -> str:
    """What the sample size decides: samples per condition, provisional rows, undecided rows and their n."""
    provisional = sum(1 for c in rows if c.provisional)
    undecided = [c for c in rows if c.undecided]
    needed = [int(c.needed_n) for c in undecided if c.needed_n is not None]
    parts = []
    for unit, what in (
        ("networks", "networks (weight draws) per random-init row"),
        ("samples", "samples per row"),
    ):
        ns = sorted({int(c.n) for c in rows if c.n is not None and c.unit == unit})
        if ns:
            parts.append(f"{what} n = {ns[0]}" + (f"-{ns[-1]}" if ns[-1] != ns[0] else ""))
    parts.append(f"{provisional} rows provisional (judged at their rule's minimum sample size)")
    if undecided:
        parts.append(
            f"{len(undecided)} rows (or a part of them) undecided by the sample"
            + (
                f" (the n that would decide them at the observed spread: {min(needed)}-{max(needed)})"
                if needed
                else ""
            )
        )
    sensitive = sum(1 for c in rows if c.threshold_sensitive)
    if sensitive:
        parts.append(
            f"{sensitive} threshold-sensitive (their verdict moves inside a documented threshold range)"
        )
    return "Sample: " + "; ".join(parts) + "."


def sequential_sentence(rows: Sequence[Claim], sequential: dict | None) -> str:
    """What ``--until-decided`` did: the scheme, the rows more samples decided, why the others stopped."""
    if not sequential:
        return ""
    history = sequential.get("history") or []
    looks = sequential.get("looks_per_story") or {}
    grew = [c for c in rows if c.sampling.startswith("decided at n =")]
    open_ = [c for c in rows if c.undecided]
    why = Counter(c.sampling.split(": ", 1)[1].split(":")[0] if ": " in c.sampling else "?" for c in open_)
    budget = sequential.get("budget_s")
    scheme = (
        f"Sampled until decided: n doubles at up to {max(looks.values(), default=1)} looks per story, every "
        "look judged at level 0.0455 / K (Bonferroni over its K looks), at most "
        f"{sequential.get('max_samples')} samples per condition"
        + (f", budget {budget / 3600:.2g} h" if budget else "")
        + f"; {sum(h['runs_added'] for h in history)} runs added over {len(history)} more looks. "
    )
    told = f"{len(grew)} rows decided after more samples"
    if open_:
        told += (
            f"; {len(open_)} still undecided (" + ", ".join(f"{k} {n}" for k, n in why.most_common()) + ")"
        )
    return scheme + told + "."


def section_paragraph(rows: Sequence[Claim], headlines: Sequence[str]) -> str:
    """3-5 sentences for one story's section: per origin, the findings with their numbers, the sample."""
    sentences: list[str] = []
    for origin in Origin:
        got = origin_sentences(rows, origin, limit=2 if origin in (Origin.PAPER, Origin.FOLLOWUP) else 1)
        sentences += got[:3]
    sentences += list(headlines[:2])
    if rows:
        sentences.append(sample_sentence(rows))
    return " ".join(sentences)


def untested_sentence(rows: Sequence[Claim]) -> str:
    """The paper's checkpoints that could not be tested offline."""
    missing = sorted(
        {
            c.cause.split("paper's ")[1].split(" weights")[0]
            for c in rows
            if c.cause_kind == "untested" and "paper's " in c.cause
        }
    )
    if not missing:
        return ""
    return (
        f"Not testable offline: {', '.join(missing)} (no weights in the local Hugging Face cache and no "
        f"pretrained stand-in; {sum(1 for c in rows if c.verdict == UNTESTED)} rows untested). With the "
        "checkpoints cached, the same command runs them."
    )


def _reason(c: Claim, width: int = 150) -> str:
    """One sentence on why a row reads as it does: its cause, else its plotted half's first condition."""
    if c.cause:
        return plain(c.cause, width)
    text = c.evidence.split(" — ", 1)[-1].split(" || ")[0].split(" | ")[0]
    return plain(text, width)


def claim_bullets(rows: Sequence[Claim]) -> list[str]:
    """One short line per statement of a section, in the rows' order: the claim, its verdict (per qualifier
    where its rows differ) and the reason in one sentence (the first row that is not plainly reproduced,
    else the first row): ``<claim> — <verdict>: <reason>``."""
    groups: dict[str, list[Claim]] = {}
    for c in rows:
        groups.setdefault(f"{c.story}.{c.key}", []).append(c)
    out = []
    for group in groups.values():
        words = list(dict.fromkeys(c.verdict for c in group))
        if len(words) == 1:
            verdict = words[0]
        else:
            verdict = "; ".join(
                f"{c.verdict} [{c.id.split('[', 1)[1][:-1] if '[' in c.id else 'as stated'}]" for c in group
            )
        deciding = next((c for c in group if c.verdict_class != REPRODUCED.value), group[0])
        out.append(f"{short(group[0], 110).split(' [')[0]} — {verdict}: {_reason(deciding)}")
    return out
