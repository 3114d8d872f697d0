"""Collapse while it trains (issue 29, ours): what training does to the collapse of the random init.

The paper's §5 compares random initialisation with pretrained weights (BERT's and GPT-2's): two points
of one trajectory. Here small byte-level LMs (``rankcollapse.monitor.trajectory``: post-LN, pre-LN, no-LN
and no-skip blocks) are trained from random init, several networks (seeds) per condition, and probed by
``rankcollapse.monitor.Monitor`` at step 0 and every ``every`` steps on one held-out batch. Two arms:
``trained``, decoders (next-byte prediction) under a causal and a sliding-window mask; ``encoder``,
encoders (masked-language modelling, BERT's objective) under the complete mask. The setting is ours in
every arm; the statements come from the paper's §5, Gu et al. (ICLR 2025) and arXiv 2509.23024 (both
known here from FOLLOWUPS.md, [abstract / 2nd-hand]).

Statements, each judged per block variant over the networks (``kit.rules.steps``):

- ``training_moves``: the last layer's ``mu_rel``, effective rank and mean ``|cos|`` end away from their
  values at initialisation (``moved_from_init``: the mean log ratio over networks outside
  ``±move_min`` for sure); judged for the decoders and for the encoders (the paper's contrast is
  BERT's as well as GPT-2's), a row each per block variant;
- ``sink_window``: first-token sinks appear between roughly 1k and 2k steps: a second-hand step count
  measured in other models, with other data and optimisers; a step count does not transfer to these
  byte-level models (other widths, batches, rates), so the row is not testable here, with that reason;
- ``sink_onset`` (ours, the measurable half): sinks emerge during training, and when (``onset_found`` on
  the first probe where the model's sink rate reaches ``onset_level``; a decoder's causal mask, an
  encoder's unwindowed one: a window of ``W + 1`` tokens bounds the first-token attention averaged over
  queries by ``(W + 1) / n``): the onset step is our finding, reported with its interval;
- ``phases``: the representation collapses early (in the warm-up), then expands, then compresses
  (``phases`` on the last layer's effective rank, the RankMe of one layer): a compression not seen in a
  short run is never read as refuted.

Both sources of ``sink_window`` and ``phases`` measured decoder LMs (Gu et al.'s small LMs, Pythia and
OLMo). The encoder's rows of these two statements (``encoder: <variant>``) ask the same of an encoder,
under its bidirectional mask only (no window), with the start token that opens every excerpt as its
first token (BERT's ``[CLS]``): they are ours, not the sources', and each row's scope says so. The
encoder's curves are in the figure beside the decoders'.

The task adapter ``kit.tasks.training.train_trajectories`` calls the measurement and reshapes its rows
(it measures nothing itself); every setting comes from ``training.yaml``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.experiments.contract.story import Arm, Data, FigureSpec, Statement, StoryData, story_here
from rankcollapse.experiments.contract.verdicts import Claim
from rankcollapse.experiments.kit.claims import claim_row, judged, not_testable_row
from rankcollapse.experiments.kit.data import rows_of, runs_of, sample_note
from rankcollapse.experiments.kit.plots import (
    label_grid,
    line,
    mean_band,
    panel_grid,
    quantity_label,
    reference_line,
    shared_legend,
)
from rankcollapse.experiments.kit.rules import steps as tr
from rankcollapse.experiments.kit.tasks.training import SINK_THRESHOLD, TRAIN_TRAJECTORIES
from rankcollapse.experiments.kit.thresholds import Thresholds

STORY_NAME = "training"
FIGURE = "ext_training_trajectory"
#: The second figure: every layer of a decoder beside an encoder of the same block.
LAYERS_FIGURE = "ext_training_layers"
#: The last layer's metrics whose move away from the initialisation is judged.
MOVED = ("mu_rel", "effective_rank", "mean_abs_cos")
#: The figure's rows: metric -> axis label.
SHOWN = {
    **{key: f"{quantity_label(key)} (last layer)" for key in MOVED},
    "sink_rate": f"{quantity_label('sink_rate')} (all layers)",
}
#: The layer figure's rows: metric -> axis label (one line per layer; row 0, the embeddings, has no
#: attention).
PER_LAYER = {
    **{key: quantity_label(key) for key in MOVED},
    "first_token_attention": quantity_label("first_token_attention"),
}
#: The range each shown metric can take (its interval is clipped to it).
RANGE = {
    "mu_rel": (0.0, 1.0),
    "effective_rank": (1.0, np.inf),
    "mean_abs_cos": (0.0, 1.0),
    "sink_rate": (0.0, 1.0),
}
SINK_SOURCE = "Gu et al., ICLR 2025 (FOLLOWUPS.md: [abstract / 2nd-hand])"
PHASE_SOURCE = "arXiv 2509.23024, NeurIPS 2025, Pythia/OLMo checkpoints (FOLLOWUPS.md: [abstract / 2nd-hand])"
STATEMENTS = (
    Statement(
        "training_moves",
        "Training moves the last layer's mu_rel, effective rank and mean |cos| away from the values the "
        "random initialisation gives (the paper's random-init vs pretrained contrast, as one trajectory), "
        "in a decoder and in an encoder",
        "the paper §5 (random init against pretrained BERT and GPT-2); the trajectory is ours",
        "per model (decoder; encoder: 'encoder: <variant>') and variant, for each mask and each of mu_rel, "
        "effective rank, mean |cos| of the last layer: the "
        "mean over networks of log(v(T) / v(0)) outside +-move_min for sure -> confirmed; inside for sure "
        "(it stayed) -> refuted (kit.rules.steps.moved_from_init, Bonferroni over the conditions)",
        ours=True,
    ),
    Statement(
        "sink_window",
        "First-token attention sinks emerge between roughly 1k and 2k training steps in small language "
        "models",
        SINK_SOURCE,
        "not testable here: the step count was measured in other models, with other data and optimisers; "
        "our models' steps are not theirs, so no run here can confirm or refute it (our own onset: "
        "sink_onset)",
        ours=True,
    ),
    Statement(
        "sink_onset",
        "In these small byte-level models first-token attention sinks emerge during training; the onset "
        "step is measured (ours: a finding, compared with no other model's step count)",
        "ours (measured; the question of Gu et al., ICLR 2025, asked of our models)",
        "per model and variant (decoder: causal mask; encoder: 'encoder: <variant>', its mask without a "
        "window, the start token as a [CLS]-like first token): every network's sink rate reaches "
        "onset_level by its last step -> confirmed, with the mean onset step and its interval; no network "
        "by its last step -> refuted (no sink in the steps run); some networks only -> inconclusive; "
        "networks at the level at step 0 -> not testable (kit.rules.steps.onset_found)",
        ours=True,
    ),
    Statement(
        "phases",
        "Over training the representation goes through phases: an early collapse during warm-up, then an "
        "expansion ('entropy-seeking'), then a compression ('compression-seeking'), as RankMe and alpha-ReQ "
        "show over Pythia/OLMo checkpoints",
        PHASE_SOURCE,
        "per model (decoder; encoder: 'encoder: <variant>', ours: the source measured decoders), variant "
        "and mask, on the last layer's effective rank (RankMe of one layer): the least value up "
        "to early_factor x warmup steps below the initial one, the peak after it above that least value, and "
        "the last value below the peak, each by more than phase_min in log ratio for sure -> confirmed; no "
        "early collapse for sure -> refuted; an expansion or a compression not seen is not testable in a "
        "run this short (kit.rules.steps.phases, Bonferroni over conditions and phases)",
        ours=True,
    ),
)


# --- the arms: one task (kit.tasks.training), the measurement's rows ---------------------------------


ARMS = (
    Arm("trained", TRAIN_TRAJECTORIES, extension=True),
    Arm("encoder", TRAIN_TRAJECTORIES, extension=True),
)


# --- reading the runs ------------------------------------------------------------------------------


def _frames(data: Data) -> dict[str, pd.DataFrame]:
    """variant -> its ``kind = trajectory`` rows, in the grid's order."""
    rows = rows_of(data, tr.KIND)
    if rows.empty:
        return {}
    return {str(v): g for v, g in data.groups(rows, "variant")}


def _masks(data: Data, frame: pd.DataFrame) -> list[str]:
    return [str(m) for m, _ in data.groups(frame, "mask")]


def _last_layer(frame: pd.DataFrame) -> int:
    return int(frame["layer"].max())


def _base(data: Data, key: str) -> Any:
    return data.exp.base[key]


def _encoder(data: Data) -> bool:
    return data.exp.base.get("architecture", "decoder") == "encoder"


def _span(data: Data) -> str:
    b = data.exp.base
    model = "byte-level encoder (masked-language modelling)" if _encoder(data) else "byte-level LM"
    return (
        f"{b['steps']} steps of a {model} with d = {b['d']}, {b['layers']} layers, {b['batch']} x "
        f"{b['tokens']} tokens per step, warm-up {b['warmup']} steps"
    )


def _scope(data: Data) -> str:
    return f"tested on {_span(data)}: its steps are not the published models' (other widths, batches, rates)"


#: Why ``sink_window`` is not testable here (its row's cause).
SINK_WINDOW_UNTESTABLE = (
    "its step count (sinks between roughly 1k and 2k steps) is second-hand, measured by Gu et al. in their "
    "own small LMs, data and optimiser, and a step count does not transfer to these byte-level models "
    "(other widths, batches, learning rates); the onset these models show is reported as ours "
    "(training.sink_onset)"
)


def _sink_masks(data: Data, masks: list[str]) -> list[str]:
    """The masks a sink row is judged under: a decoder's ``causal``, an encoder's masks without a window
    (a window bounds the first-token attention averaged over queries by ``(W + 1) / n``)."""
    if _encoder(data):
        return [m for m in masks if not m.startswith("window")]
    return [m for m in masks if m == "causal"]


#: Said in the scope of an encoder's ``sink_window`` and ``phases`` rows.
ENCODER_SCOPE = (
    "ours on an encoder (masked-language modelling, bidirectional mask, the start token as a [CLS]-like "
    "first token): the source measured decoder LMs"
)


def _row(statement: Statement, data: Data, th: Thresholds, j: Any, variant: str, frame: pd.DataFrame,
         name: str) -> Claim:
    runs = runs_of(data, frame)
    return claim_row(
        STORY_NAME,
        statement,
        data,
        th,
        j,
        qualifier=variant,
        runs=runs,
        figure=FIGURE,
        sample_note=sample_note(runs, frame),
        names=(name, ""),
        axes_frame=frame,
    )


def _moved_row(data: Data, th: Thresholds, qualifier: str, frame: pd.DataFrame) -> Claim:
    """The ``training_moves`` row of one model and block variant (module docstring)."""
    masks, last = _masks(data, frame), _last_layer(frame)
    moved = {
        f"{mask}, {metric}": tr.log_ratio(tr.series(frame[frame["mask"] == mask], metric, last))
        for mask in masks
        for metric in MOVED
    }
    j = judged(lambda t: tr.moved_from_init(moved, t), th)
    return _row(STATEMENTS[0], data, th, j, qualifier, frame, f"last layer (t = {last}), trained / init")


def _variant_rows(data: Data, th: Thresholds, qualifier: str, frame: pd.DataFrame) -> list[Claim]:
    """The three rows of one model's block variant (module docstring); an encoder's sink and phase rows
    say in their scope that they are ours (:data:`ENCODER_SCOPE`)."""
    masks, last = _masks(data, frame), _last_layer(frame)
    early = float(_base(data, "warmup"))
    rank = {m: tr.series(frame[frame["mask"] == m], "effective_rank", last) for m in masks}
    span = _span(data)
    ours = ENCODER_SCOPE if _encoder(data) else ""
    out = [_moved_row(data, th, qualifier, frame)]
    sink_masks = _sink_masks(data, masks)
    sunk = frame[frame["mask"].isin(sink_masks)]
    if not sunk.empty:
        sink = {m: tr.series(sunk[sunk["mask"] == m], "sink_rate") for m in sink_masks}

        def sink_rule(t: Thresholds) -> Any:
            return tr.onset_found(sink, t, "; ".join(filter(None, (ours, _scope(data)))))

        name = "sink onset (the model's sink rate)"
        out.append(_row(STATEMENTS[2], data, th, judged(sink_rule, th), qualifier, sunk, name))

    def phase_rule(t: Thresholds) -> Any:
        per = {m: tr.phase_ratios(s, t["early_factor"] * early) for m, s in rank.items()}
        return replace(tr.phases(per, t, span, least=1.0), scope=ours)  # an effective rank is >= 1

    name = f"effective rank of the last layer (t = {last})"
    out.append(_row(STATEMENTS[3], data, th, judged(phase_rule, th), qualifier, frame, name))
    return out


#: The encoder's rows are named ``encoder: <variant>``.
ENCODER = "encoder"


def claims(sd: StoryData) -> list[Claim]:
    th = Thresholds.of(STORY_NAME, sd.verdict, sd.ranges)
    out: list[Claim] = []
    data = sd.arm("trained")
    if data is not None:
        for variant, frame in _frames(data).items():
            out += _variant_rows(data, th, variant, frame)
    enc = sd.arm(ENCODER)
    if enc is not None:
        for variant, frame in _frames(enc).items():
            out += _variant_rows(enc, th, f"{ENCODER}: {variant}", frame)
    first = data if data is not None else enc
    if first is not None:  # Gu et al.'s step count: a setting no run here reproduces
        out.append(not_testable_row(STORY_NAME, STATEMENTS[1], first, SINK_WINDOW_UNTESTABLE, FIGURE))
    return out


# --- the figure and the headlines -------------------------------------------------------------------


def _curves(data: Data, model: str = "") -> pd.DataFrame:
    """Per variant, mask, metric and step: mean over networks and its interval (``mean ± z se``);
    ``model``: written before the mask (``encoder, complete``), so each model's masks are lines apart."""
    out = []
    for variant, frame in _frames(data).items():
        last = _last_layer(frame)
        for mask in _masks(data, frame):
            sub = frame[frame["mask"] == mask]
            line = f"{model}, {mask}" if model else mask
            for metric in SHOWN:
                s = tr.series(sub, metric, None if metric == "sink_rate" else last)
                mean, lo, hi = s.mean_interval()
                low, high = RANGE[metric]  # the band is drawn inside the metric's own range
                lo, hi = np.clip(lo, low, high), np.clip(hi, low, high)
                out += [
                    {"variant": variant, "mask": line, "metric": metric, "step": int(step), "mean": m,
                     "lo": a, "hi": b, "networks": s.n}
                    for step, m, a, b in zip(s.steps, mean, lo, hi, strict=True)
                ]
    return pd.DataFrame(out)


def _trained(sd: StoryData) -> tuple[Any, pd.DataFrame]:
    """The data of the first arm run (the decoder's, else the encoder's: its steps, warm-up and probe are
    the shared base) and the curve table of the arms run (the encoder's lines ``encoder, <mask>``); None
    and an empty table when neither ran."""
    data, enc = sd.arm("trained"), sd.arm(ENCODER)
    tables = ([] if data is None else [_curves(data)]) + ([] if enc is None else [_curves(enc, ENCODER)])
    if not tables:
        return None, pd.DataFrame()
    return (data if data is not None else enc), pd.concat(tables, ignore_index=True)


def figures(sd: StoryData) -> list[FigureSpec]:
    data, table = _trained(sd)
    if data is None or table.empty:
        return []
    variants = list(dict.fromkeys(table["variant"]))
    lines = list(dict.fromkeys(table["mask"]))  # one colour and marker per line, the same in every panel
    names = {m: m if m.startswith(f"{ENCODER}, ") else f"decoder, {m}" for m in lines}  # the legend's words
    fig, axes = panel_grid(len(SHOWN) * len(variants), ncols=len(variants), w=3.0, h=2.4)
    # the sink rate on one scale across the variants: a share of heads, compared between blocks
    sink_hi = table.loc[table["metric"] == "sink_rate", "hi"].to_numpy(dtype=float)
    sink_top = max(0.1, 1.05 * float(np.nanmax(sink_hi, initial=0.0)))
    for r, metric in enumerate(SHOWN):
        for c, variant in enumerate(variants):
            ax = axes[r * len(variants) + c]
            sub = table[(table["metric"] == metric) & (table["variant"] == variant)]
            for mask, g in sub.groupby("mask", sort=False):
                mean_band(ax, g["step"], g["mean"], g["lo"], g["hi"], lines.index(mask), names[mask], ms=2.5,
                          alpha=0.2)
            reference_line(ax, float(_base(data, "warmup")), vertical=True, color="grey", lw=0.6)
            if metric == "sink_rate":
                ax.set_ylim(-0.02, sink_top)
            elif RANGE[metric][0] == 0.0:
                ax.set_ylim(bottom=-0.02)
    label_grid(axes, len(variants), list(SHOWN.values()), variants, "step")
    shared_legend(fig, axes)
    decoder = ~table["mask"].str.startswith(f"{ENCODER}, ")
    dec, enc = sd.arm("trained"), sd.arm(ENCODER)
    models = []
    if dec is not None:
        n = int(table.loc[decoder, "networks"].max())
        models.append(f"small byte-level decoder LMs ({_span(dec)}), the mean over {n} networks per mask")
    if enc is not None:
        models.append(
            f"byte-level encoders trained by masked-language modelling ({_span(enc)}; "
            f"{_base(enc, 'mask_rate'):g} of the positions masked; the lines 'encoder, <mask>'), the mean "
            f"over {int(table.loc[~decoder, 'networks'].max())} networks"
        )
    caption = (
        f"Ours: {' and '.join(models)}, trained from random init on Shakespeare and probed at step 0 and "
        f"every {_base(data, 'every')} steps on the same {_base(data, 'probe')} held-out excerpts. Each "
        "panel: one metric (rows) of one block variant (columns), the mean over the networks with its "
        "interval (Student t, one condition; clipped to the metric's range; the sink rate on one scale in "
        "every column); the dotted line is the end of the warm-up. mu_rel, effective rank and mean |cos| "
        "are those of the last layer; the sink rate is the share of heads, over all layers, whose mean "
        "attention on the first token exceeds 0.3."
    )
    if dec is not None:
        caption += (
            f" Under causal-window:w=W a head's first-token attention is at most (W + 1) / "
            f"{_base(dec, 'tokens')} by construction."
        )
    return [FigureSpec(FIGURE, fig, table, caption), *_layers_figure(sd)]


def _layer_table(data: Data, model: str, mask: str) -> pd.DataFrame:
    """Per variant, layer, metric of :data:`PER_LAYER` and step under ``mask``: the mean over networks."""
    out = []
    for variant, frame in _frames(data).items():
        sub = frame[frame["mask"] == mask]
        for metric in PER_LAYER:
            for layer in sorted(int(t) for t in sub.loc[sub["metric"] == metric, "layer"].unique()):
                s = tr.series(sub, metric, layer)
                mean, _, _ = s.mean_interval()
                out += [
                    {"model": model, "variant": variant, "mask": mask, "layer": layer, "metric": metric,
                     "step": int(step), "mean": m, "networks": s.n}
                    for step, m in zip(s.steps, mean, strict=True)
                ]
    return pd.DataFrame(out)


def _layers_figure(sd: StoryData) -> list[FigureSpec]:
    """Metric (rows) x layer (one line each) over the steps, a decoder (causal) beside an encoder of the
    same block, for each block the encoder arm trains."""
    data, enc = sd.arm("trained"), sd.arm(ENCODER)
    if data is None or enc is None:
        return []
    enc_masks = _sink_masks(enc, [str(m) for m in dict.fromkeys(rows_of(enc, tr.KIND)["mask"])])
    if not enc_masks:
        return []
    tables = [_layer_table(data, "decoder", "causal"), _layer_table(enc, ENCODER, enc_masks[0])]
    table = pd.concat(tables, ignore_index=True)
    if table.empty:
        return []
    variants = [v for v in dict.fromkeys(table.loc[table["model"] == ENCODER, "variant"])
                if v in set(table.loc[table["model"] == "decoder", "variant"])]
    table = table[table["variant"].isin(variants)].reset_index(drop=True)  # the data of the drawn panels
    columns = [(v, model) for v in variants for model in ("decoder", ENCODER)]
    layers = sorted(int(t) for t in table["layer"].unique())
    fig, axes = panel_grid(len(PER_LAYER) * len(columns), ncols=len(columns), w=2.8, h=2.2)
    for r, metric in enumerate(PER_LAYER):
        for c, (variant, model) in enumerate(columns):
            ax = axes[r * len(columns) + c]
            here = (table["metric"] == metric) & (table["variant"] == variant) & (table["model"] == model)
            sub = table[here]
            for layer, g in sub.groupby("layer"):
                label = "embeddings (t = 0)" if layer == 0 else f"layer {layer}"
                line(ax, g["step"], g["mean"], layers.index(int(layer)), label, ms=2.5)
            reference_line(ax, float(_base(data, "warmup")), vertical=True, color="grey", lw=0.6)
            if metric == "first_token_attention":
                reference_line(ax, SINK_THRESHOLD, color="black", ls="--", lw=0.6)
            if RANGE.get(metric, (0.0, 1.0))[0] == 0.0 and metric != "effective_rank":
                ax.set_ylim(-0.02, 1.02)
    titles = [f"{model}, {v} ({'causal' if model == 'decoder' else enc_masks[0]})" for v, model in columns]
    label_grid(axes, len(columns), list(PER_LAYER.values()), titles, "step", title_size=8)
    shared_legend(fig, axes)
    nets = {m: int(table.loc[table["model"] == m, "networks"].max()) for m in ("decoder", ENCODER)}
    n = int(_base(data, "tokens"))
    uniform = sum(1.0 / (i + 1) for i in range(n)) / n
    caption = (
        f"Ours: every layer over training, a decoder (causal mask; {_span(data)}) beside an encoder "
        f"({_span(enc)}) of the same block, probed on the same {_base(data, 'probe')} held-out excerpts. "
        f"Rows: mu_rel, effective rank, mean |cos| and the first-token attention (the mean over heads and "
        f"queries of the attention on the first token, the start token: [CLS]-like in the encoder; the "
        f"embeddings have none); one line per layer, the mean over {nets['decoder']} (decoder) and "
        f"{nets[ENCODER]} (encoder) networks. The dotted line is the end of the warm-up; the dashed one the "
        f"sink threshold {SINK_THRESHOLD:g} (a head above it counts in the sink rate; uniform attention "
        f"gives {uniform:.2g} under the causal mask, the mean over queries of 1 / (i + 1), and "
        f"1/{_base(enc, 'tokens')} under the complete one)."
    )
    return [FigureSpec(LAYERS_FIGURE, fig, table, caption)]


def _moves(table: pd.DataFrame, line: str) -> list[str]:
    """Per variant of the curve table's ``line`` (a mask, or ``encoder, <mask>``): ``variant: metric
    init -> end`` for each metric of :data:`MOVED` (means over networks)."""
    bits = []
    for variant, g in table[(table["mask"] == line) & (table["metric"].isin(MOVED))].groupby(
        "variant", sort=False
    ):
        shown = []
        for metric in MOVED:
            m = g[g["metric"] == metric].sort_values("step")
            if not m.empty:
                shown.append(f"{metric} {m['mean'].iloc[0]:.3g} -> {m['mean'].iloc[-1]:.3g}")
        bits.append(f"{variant}: {', '.join(shown)}")
    return bits


def headlines(sd: StoryData) -> list[str]:
    data, table = _trained(sd)
    if data is None or table.empty:
        return []
    encoders = [
        f"Encoders trained by masked-language modelling ({line}, last layer, mean over networks): "
        + "; ".join(_moves(table, line)) + "."
        for line in dict.fromkeys(table["mask"])
        if line.startswith(f"{ENCODER}, ")
    ]
    if sd.arm("trained") is None or "causal" not in set(table["mask"]):
        return encoders
    bits = _moves(table, "causal")
    steps = int(table["step"].max())
    early = float(sd.verdict["early_factor"]) * float(_base(data, "warmup"))
    dips = []
    rank = table[(table["mask"] == "causal") & (table["metric"] == "effective_rank")]
    for variant, g in rank.groupby("variant", sort=False):
        g = g.sort_values("step")
        low = g[g["step"] <= early].nsmallest(1, "mean")
        if not low.empty:
            dips.append(
                f"{variant} {g['mean'].iloc[0]:.3g} -> {low['mean'].iloc[0]:.3g} at step "
                f"{int(low['step'].iloc[0])} -> {g['mean'].iloc[-1]:.3g} at step {steps}"
            )
    sink = table[(table["metric"] == "sink_rate") & (table["mask"] == "causal")]
    peak = sink.groupby("variant", sort=False)["mean"].max()
    sinks = ", ".join(f"{v} {p:.2f}" for v, p in peak.items() if math.isfinite(p))
    return [
        f"Trained {steps} steps from random init (causal mask, last layer, mean over networks): "
        + "; ".join(bits) + ".",
        f"Largest sink rate over training (causal): {sinks}.",
        f"Last layer's effective rank at init -> its least value up to step {early:g} -> the end (causal, "
        f"mean over networks): {'; '.join(dips)}.",
        *encoders,
    ]


STORY = story_here(__name__)

__all__ = ["STORY"]
