"""The story contract: one paper result = one module defining ``STORY`` + one YAML file beside it.

A story module ``rankcollapse/experiments/stories/<name>.py`` defines::

    STORY = Story(
        name="<name>",                     # = the module and YAML stem, the --only name
        statements=(Statement(...), ...),  # what the paper (or we) state, each judged once per model
        arms=(Arm("paper", Task(fn, cost_s=..., identity_facts=...)),
              Arm("gaussian_san", Task(simulate_curves), extension=True)),
        claims=my_claims,                  # (StoryData) -> list[Claim]
        figures=my_figures,                # (StoryData) -> list[FigureSpec]
        headlines=my_headlines,            # (StoryData) -> list[str]: findings with their numbers
        paper="2405.18781",                # the arXiv id whose statements it judges (default: the
    )                                      # main paper; a follow-up's rows get their own counters)

or, declaring only what differs, names ``STATEMENTS``, ``ARMS``, ``claims`` and, where it has them,
``figures``, ``headlines`` and ``PAPER``, and ends with ``STORY = story_here(__name__)`` (:func:`story_here`);
and ``stories/<name>.yaml`` holds its title, thresholds and, per arm, base settings, grid and
profiles (see ``engine.config``). An arm is one experiment (``<name>.<arm>``): the paper's setting,
or ours (``extension=True``: its rows say so). A statement no row judged gets the pipeline's
no-data row; stories never write one. Report order is the one list in ``stories.ORDER``. The
task's ``__name__`` is hashed into every run's identity; workers find it by ``module:function``.
Nothing else is registered anywhere: :func:`discover_stories` finds every module.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.experiments.contract.verdicts import MAIN_PAPER, check_paper
from rankcollapse.experiments.engine.config import Experiment
from rankcollapse.experiments.engine.tasks import Task

#: The evidence of a claim judged on nothing.
NO_RUNS = "no runs"


@dataclass
class FigureSpec:
    """A drawn figure before saving: file stem, matplotlib figure, its data (saved as CSV), caption;
    ``table``: a small table the report shows under the figure (a verdict map's cells), saved as
    ``<name>.table.csv``."""

    name: str
    figure: Any
    data: pd.DataFrame
    caption: str
    table: pd.DataFrame | None = None


@dataclass(frozen=True)
class Statement:
    """One statement a story judges: ``key`` (unique in the story), the words, where it comes from
    (``paper §5, Fig. 2`` or ``ours``) and the rule that turns data into its verdicts, in words.
    ``kind``: ``claim`` (a statement the data can reproduce), ``search`` (a conjecture that nothing of
    a kind exists, which a search can only fail to contradict: its agreeing word is "consistent: none found
    in the search") or ``proof`` (the same conjecture settled by a proof the row names: "consistent:
    proven"; the data can still contradict it, which would mean the proof or the code is wrong).
    ``ours``: the statement is ours, not the paper's (its rows are extensions in any arm); the one flag,
    never read back from ``source``'s words. ``paper``: the follow-up whose statement this is where it is
    not the story's own (a story judging two papers on the same runs, e.g. LayerNorm Scaling and Peri-LN:
    each statement's rows counted with its own paper); empty: the story's (``Story.paper_of``). Never the
    main paper: a statement cannot move into the NeurIPS paper's tally from a follow-up's story."""

    key: str
    text: str
    source: str
    rule: str
    kind: str = "claim"
    ours: bool = False
    paper: str = ""

    def __post_init__(self) -> None:
        if not self.key.replace("_", "").isalnum():
            raise RankCollapseError(f"statement key {self.key!r} must be letters, digits and _")
        if self.kind not in ("claim", "search", "proof"):
            raise RankCollapseError(f"statement kind {self.kind!r}: allowed claim, search, proof")
        if self.paper:
            check_paper(self.paper)
            if self.paper == MAIN_PAPER:
                raise RankCollapseError(f"statement {self.key!r}: paper {self.paper} is the main paper, the "
                                        "default of a story without PAPER; a statement names a follow-up")


@dataclass(frozen=True)
class Arm:
    """One setting of a story: the paper's (``extension=False``) or ours, run by ``task``."""

    name: str
    task: Task
    extension: bool = False

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise RankCollapseError(f"arm name {self.name!r} must be a Python identifier")


@dataclass
class Data:
    """One arm's slice of the run tables, as given to claim rules and figures.

    ``table``: the long rows of finished runs (``runs.csv``: run_id, params, row columns).
    ``index``: one row per run, finished and failed (``index.csv``: status, error, summary.*).
    """

    exp: Experiment
    table: pd.DataFrame
    index: pd.DataFrame

    @property
    def ok(self) -> pd.DataFrame:
        """Index rows of the finished runs."""
        if self.index.empty:
            return self.index
        return self.index[self.index["status"] == "ok"]

    @property
    def rows(self) -> pd.DataFrame:
        """Table rows of the finished runs."""
        if self.table.empty or self.ok.empty:
            return self.table.iloc[0:0]
        return self.table[self.table["run_id"].isin(set(self.ok["run_id"]))]

    def failures(self) -> str:
        """``"no runs"``, ``""`` (none failed) or ``"N run(s) failed, e.g. <error>"``."""
        if self.index.empty:
            return NO_RUNS
        bad = self.index[self.index["status"] != "ok"]
        if bad.empty:
            return ""
        return f"{len(bad)} run(s) failed, e.g. {bad['error'].iloc[0]}"

    def seeds(self, runs: pd.DataFrame | None = None) -> list[int]:
        runs = self.ok if runs is None else runs
        if runs.empty or "seed" not in runs:
            return []
        return sorted({int(s) for s in runs["seed"].dropna()})

    def conditions(self) -> str:
        return f"{self.exp.source}, arm {self.exp.arm or self.exp.name} (profile {self.exp.profile})"

    def groups(self, frame: pd.DataFrame, key: str) -> list[tuple[Any, pd.DataFrame]]:
        """``frame.groupby(key)`` in the order of the grid axis ``key`` (rows follow the config)."""
        order = {v: i for i, v in enumerate((self.exp.grid or {}).get(key, []))}
        groups = list(frame.groupby(key, sort=False))
        return sorted(groups, key=lambda g: order.get(g[0], len(order)))


@dataclass
class StoryData:
    """Every arm's :class:`Data` of one story, and the story's thresholds (the YAML ``verdict:``
    and ``ranges:``). Arms skipped in the profile, or without runs, are absent from ``arms``."""

    story: str
    arms: dict[str, Data]
    verdict: dict[str, Any] = field(default_factory=dict)
    ranges: dict[str, Any] = field(default_factory=dict)

    def arm(self, name: str) -> Data | None:
        """The arm's data when it has finished runs, else None."""
        data = self.arms.get(name)
        return data if data is not None and not data.ok.empty else None


ClaimsFn = Callable[[StoryData], list[Any]]
FiguresFn = Callable[[StoryData], list[FigureSpec]]
HeadlinesFn = Callable[[StoryData], list[str]]


def _no_figures(data: StoryData) -> list[FigureSpec]:
    return []


def _no_headlines(data: StoryData) -> list[str]:
    return []


@dataclass(frozen=True)
class Story:
    """One paper result: its statements, arms, claim rules and figures (settings in ``<name>.yaml``)."""

    name: str
    statements: tuple[Statement, ...]
    arms: tuple[Arm, ...]
    claims: ClaimsFn
    figures: FiguresFn = _no_figures
    #: The story's findings in sentences with their numbers, computed from the data, for the report's
    #: summary and the section's paragraph (e.g. "raw mu ends at 5e-05 in float32 but 1e-13 in float64").
    headlines: HeadlinesFn = _no_headlines
    #: The paper whose statements the story judges (an arXiv id of ``contract.verdicts.PAPERS``): the main
    #: paper, or a follow-up, whose rows the pipeline marks so (``Claim.paper``) and counts apart.
    paper: str = MAIN_PAPER

    def __post_init__(self) -> None:
        check_paper(self.paper)
        if not self.name.isidentifier():
            raise RankCollapseError(f"story name {self.name!r} must be a Python identifier (the YAML stem)")
        for label in ("claims", "figures", "headlines"):
            if not callable(getattr(self, label)):
                raise RankCollapseError(f"story {self.name}: {label} must be callable")
        if not self.arms or not self.statements:
            raise RankCollapseError(f"story {self.name}: needs at least one arm and one statement")
        for label, names in (
            ("arm", [a.name for a in self.arms]),
            ("statement", [s.key for s in self.statements]),
        ):
            dup = {n for n in names if names.count(n) > 1}
            if dup:
                raise RankCollapseError(f"story {self.name}: {label} {sorted(dup)[0]!r} declared twice")

    def statement(self, key: str) -> Statement:
        for s in self.statements:
            if s.key == key:
                return s
        raise RankCollapseError(f"story {self.name}: no statement {key!r}")

    def paper_of(self, key: str) -> str:
        """The paper whose statement ``key`` is: the statement's own (``Statement.paper``), else the
        story's."""
        return self.statement(key).paper or self.paper

    @property
    def tasks(self) -> dict[str, tuple[Task, bool]]:
        """arm name -> (task, extension?), for ``engine.config.load_arms``."""
        return {a.name: (a.task, a.extension) for a in self.arms}


#: What a story module names for :func:`story_here`: ``Story`` field -> (its name, default; None: required).
STORY_NAMES: dict[str, tuple[str, Any]] = {
    "statements": ("STATEMENTS", None),
    "arms": ("ARMS", None),
    "claims": ("claims", None),
    "figures": ("figures", _no_figures),
    "headlines": ("headlines", _no_headlines),
    "paper": ("PAPER", MAIN_PAPER),
}


def story_here(module: str) -> Story:
    """The :class:`Story` of the story module ``module`` (``STORY = story_here(__name__)``, its last line)
    from the names it defines (:data:`STORY_NAMES`): ``STATEMENTS``, ``ARMS`` and ``claims`` always;
    ``figures``, ``headlines`` and ``PAPER`` where it has them (else none, none, the main paper). Its name is
    the module's stem, as :func:`discover_stories` requires."""
    names = vars(sys.modules[module])
    missing = [name for name, default in STORY_NAMES.values() if default is None and name not in names]
    if missing:
        raise RankCollapseError(f"story module {module} defines no {', '.join(missing)}")
    fields = {key: names.get(name, default) for key, (name, default) in STORY_NAMES.items()}
    return Story(name=module.rpartition(".")[2], **fields)


@dataclass(frozen=True)
class Found:
    """A discovered story and its YAML file."""

    story: Story
    config: Path


def discover_stories(package: str) -> dict[str, Found]:
    """Every module of ``package`` that defines ``STORY``, with ``<stem>.yaml`` beside it.

    Modules whose name starts with ``_`` are skipped. A module without ``STORY``, a story whose
    name is not its module's stem, or a missing YAML is an error naming the module.
    """
    pkg = importlib.import_module(package)
    found: dict[str, Found] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.ispkg:
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        story = getattr(module, "STORY", None)
        if not isinstance(story, Story):
            raise RankCollapseError(f"story module {module.__name__} defines no STORY = Story(...)")
        if story.name != info.name:
            msg = f"story module {module.__name__}: STORY.name {story.name!r} != {info.name!r}"
            raise RankCollapseError(msg)
        config = Path(str(module.__file__)).with_name(f"{info.name}.yaml")
        if not config.is_file():
            raise RankCollapseError(f"story {info.name}: no config {config.name} beside {module.__name__}")
        found[info.name] = Found(story, config)
    return found


def slice_data(exp: Experiment, table: pd.DataFrame, index: pd.DataFrame) -> Data:
    """The rows of ``exp`` in the whole-output tables; of the long table, the columns its own runs wrote.

    A whole folder's table carries every story's columns; a column in which no row of ``exp`` has a value
    is left out, so an arm reads the same columns whether judged alone (``--only``) or with the whole
    folder (a story testing ``"col" in frame`` cannot see another story's column), and its frames stay
    narrow (``benchmarks/bench_judging.py``). The index (one row per run) keeps every column: a summary key
    that only other runs have reads NaN (``engine.store.run_summary``)."""
    i = index[index["experiment"] == exp.name] if not index.empty else index
    return Data(exp, _own(table, exp.name), i)


def _own(frame: pd.DataFrame, experiment: str) -> pd.DataFrame:
    """The rows of ``experiment`` and the columns that hold a value in one of them."""
    if frame.empty:
        return frame
    rows = frame[frame["experiment"] == experiment]
    if rows.empty:
        return rows
    return rows.loc[:, rows.notna().any(axis=0)]
