"""The paper's results, one story each: ``<name>.py`` (statements, arms, rules, figures) + ``<name>.yaml``.

Every module here that defines ``STORY`` (``story_here(__name__)``, see
``rankcollapse.experiments.contract.story``) is found by :func:`all_stories`; its YAML beside it holds
the settings of each arm. Adding a paper result is adding those two files and its name to :data:`ORDER`;
a story missing from ``ORDER`` is reported after the others. Modules starting with ``_`` are helpers, not
stories.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.edge.validate import quote
from rankcollapse.experiments.contract.story import Found, discover_stories
from rankcollapse.experiments.engine.config import Experiment, load_arms, load_experiment, select
from rankcollapse.experiments.engine.tasks import BUILTIN_TASKS, Task, toy_cost
from rankcollapse.experiments.kit.cards import load_cards, with_cards
from rankcollapse.experiments.kit.tasks.curves import GENERIC_TASKS

#: The report's order: the paper's order (§4.1 Theorem 1, §4.2 Theorem 2, §4.3.1 Figs. 1 and 5,
#: §4.3.2 Theorem 3, §5 Figs. 2-4, App. G Figs. 6-9 inside their §5 twins, then 8, 9), then the
#: follow-up papers' stories (``Story.paper``), each paper in its own section of the report.
ORDER: tuple[str, ...] = (
    "theorem1",
    "theorem2",
    "fig1_fig5",
    "theorem3",
    "fig2",
    "fig3",
    "fig4",
    "fig8",
    "fig9",
    "training",  # ours (issue 29): the random-init vs pretrained contrast as one trajectory, extension rows
    "position_bias",  # a follow-up (Wu et al., ICML 2025): its own section and counters, after the paper's
    "position_decay",  # the same paper's decay-mask, RoPE and biased-data statements
    "residual_rollout",  # a follow-up disputing it (Herasimchyk et al., arXiv 2602.16837)
    "cirrincione",  # a follow-up disputing the paper's LayerNorm result (Cirrincione, arXiv 2604.23681)
    "rollout_models",  # Herasimchyk et al. (arXiv 2602.16837) on the bundled pretrained models' own attention
    "key_bias",  # the first token as a key bias (Gu et al., ICLR 2025, arXiv 2410.10781) on the same models
    "karagodin",  # a follow-up on where the norm sits (Karagodin et al., NeurIPS 2025, arXiv 2510.22026)
    "hasse",  # masks as Hasse diagrams (Li & Guo, arXiv 2606.09951; no experiments: proof-like rows)
    "u_init",  # the U-shape at initialisation (Chowdhury 2026, arXiv 2603.10123): Cesàro powers, Jacobians
    "dyt",  # DyT (Zhu et al., arXiv 2503.10622): the tanh-like map; the paper's questions asked of DyT
    "ln_scaling",  # LayerNorm Scaling (arXiv 2502.05795) and Peri-LN (arXiv 2502.02732): growth with depth
    "verdict_maps",  # the disputes as maps: Wu 2025 / Herasimchyk 2026 / Chowdhury 2026 over lam x depth
    "mlp_stacks",  # residual MLP stacks (Everett, arXiv 2607.14018): Post- against Pre-Norm, rank
    "entropy_collapse",  # rank vs entropy collapse (arXiv 2505.24333), LN(lam X + SA(X)) (arXiv 2410.10609)
)


@functools.cache
def all_stories() -> dict[str, Found]:
    """name -> (story, YAML path) for every story module of this package, each with its claim cards
    (``experiments/cards/*.yaml``, ``kit.cards.with_cards``: a follow-up's claim on an arm's stored rows)."""
    cards = load_cards()
    found = discover_stories(__name__)
    return {name: Found(with_cards(f.story, cards), f.config) for name, f in found.items()}


def task_registry() -> dict[str, Task]:
    """Task name -> :class:`Task` for every task a custom config may name."""
    tasks = {name: Task(fn, cost_s=toy_cost if name == "toy" else None) for name, fn in BUILTIN_TASKS.items()}
    tasks.update(GENERIC_TASKS)
    for found in all_stories().values():
        for arm in found.story.arms:
            tasks.setdefault(arm.task.name, arm.task)
    return tasks


def load_experiments(
    profile: str = "full",
    only: list[str] | None = None,
    folder: str | Path | None = None,
    stories: dict[str, Found] | None = None,
) -> list[Experiment]:
    """The experiments of ``profile`` (one per arm of each story) in report order; ``only`` filters by
    story (or ``<story>.<arm>``) name.

    ``folder=None``: every story with its YAML. Otherwise every ``*.yaml`` in ``folder`` (custom
    sweeps): each names its ``task`` (a generic task, a story's task or ``toy``) and is judged by no
    story. ``stories``: the stories to use (default :func:`all_stories`).
    """
    found = all_stories() if stories is None else stories
    if folder is None:
        exps = [e for name, f in found.items() for e in load_arms(f.config, profile, name, f.story.tasks)]
        return select(exps, only, list(ORDER))
    folder = Path(folder)
    if not folder.is_dir() or not any(folder.glob("*.yaml")):
        raise RankCollapseError(f"no experiment configs (*.yaml) in {folder}")
    tasks = task_registry()
    exps = []
    for path in sorted(folder.glob("*.yaml")):
        exp = load_experiment(path, profile)
        if exp.task not in tasks:
            raise RankCollapseError(
                f"{path.name}: unknown task {quote(exp.task)}; allowed: {', '.join(sorted(tasks))}"
            )
        task = tasks[exp.task]  # with its task, the experiment's params under the table's names
        exps.append(dataclasses.replace(exp, target="" if exp.task in BUILTIN_TASKS else task.target,
                                        task_info=task))
    return select(exps, only)
