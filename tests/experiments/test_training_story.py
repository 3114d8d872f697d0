"""The story 'training' end to end on its tiny profile: rows per block variant, origin ours, verdicts the
tiny runs decide pinned as properties, the figure drawn from the runs."""

from __future__ import annotations

import pytest

from rankcollapse.experiments.stories import ORDER, all_stories

from .story_run import run_story


@pytest.fixture(scope="module")
def tiny():
    return run_story("training", "tiny")


def test_training_follows_the_papers_stories_and_counts_as_ours():
    story = all_stories()["training"].story
    assert ORDER.index("training") == ORDER.index("fig9") + 1 < ORDER.index("position_bias")
    assert all(s.ours for s in story.statements) and all(a.extension for a in story.arms)


def test_tiny_profile_rows_are_ours_per_variant_with_networks_as_the_unit(tiny):
    _, rows, _ = tiny
    ids = [c.id for c in rows]
    variants = ["post-ln", "pre-ln", "no-ln", "no-skip"]
    keys = ["training_moves", "sink_onset", "phases"]
    # the decoders' three statements per variant, then the encoders' three (the sink and the phases were
    # reported for decoder LMs: the encoder's rows of them are ours, and say so), then the one row of the
    # second-hand step count, not testable here
    encoder = [f"training.{k}[encoder: {v}]" for v in ("post-ln", "pre-ln") for k in keys]
    assert ids == [f"training.{k}[{v}]" for v in variants for k in keys] + encoder + ["training.sink_window"]
    window = rows[-1]
    assert window.verdict == "untested" and window.origin == "extension" and window.n is None
    assert "does not transfer" in window.cause and "training.sink_onset" in window.cause
    rows = rows[:-1]
    for c in rows:
        assert c.origin == "extension" and "(ours)" in c.verdict
        assert c.unit == "networks" and c.n == 4 and c.seeds == [0, 1, 2, 3]
        assert "(Student t, 3 df" in c.evidence  # the footer's df are the networks', as its intervals
        assert c.figure == "ext_training_trajectory"
        assert c.experiment == ("training.encoder" if "encoder" in c.id else "training.trained")


def test_tiny_verdicts_the_data_decide(tiny):
    _, rows, _ = tiny
    got = {c.id: c for c in rows}
    # 40 steps at lr 0.01 move the last layer of a pre-LN net far from its init (mean |cos| x3 ...)
    assert got["training.training_moves[pre-ln]"].verdict == "confirmed (ours)"
    # a sink row reports the onset it measured, or says that none came in the steps run; never a window
    for v in ("post-ln", "pre-ln", "no-ln", "no-skip"):
        c = got[f"training.sink_onset[{v}]"]
        assert c.verdict in ("confirmed (ours)", "refuted (ours)", "inconclusive (ours)"), c.verdict
        assert "40 steps" in c.scope and "1000" not in c.evidence
        assert ("mean onset step" in c.evidence) == (c.verdict == "confirmed (ours)"), c.evidence
    # the encoder's sink and phase rows: judged under its bidirectional mask, ours on an encoder (scope)
    for v in ("post-ln", "pre-ln"):
        sink, phases = got[f"training.sink_onset[encoder: {v}]"], got[f"training.phases[encoder: {v}]"]
        assert sink.verdict == "refuted (ours)" and "complete: no onset by step 40" in sink.evidence
        for c in (sink, phases):
            assert c.scope.startswith("ours on an encoder") and "the source measured decoder LMs" in c.scope
            assert c.experiment == "training.encoder"
    assert not any("encoder" in got[f"training.{k}[{v}]"].scope for k in ("sink_onset", "phases")
                   for v in ("post-ln", "pre-ln", "no-ln", "no-skip"))
    # a compression or expansion a 40-step run does not show is never a refutation
    for c in rows:
        if c.key == "phases" and c.verdict.startswith("refuted"):
            assert "no collapse" in c.cause


#: The words the story's rows, captions and headlines use that no other story defines: each has one entry
#: in the glossary (the report prints the entries whose term occurs on its page).
STORY_WORDS = (
    "effective rank",
    "RankMe",
    "alpha-ReQ",
    "mean |cos|",
    "sink rate",
    "sink onset",
    "warm-up",
    "phases",
    "early collapse / warm-up collapse",
    "expand / compress",
    "log(v(T) / v(0))",
    "probe",
    "post-ln / pre-ln / no-ln / no-skip",
    "masked-language modelling",
    "not testable",
    "network (unit)",
)


def test_every_word_of_the_story_is_in_the_glossary_and_glossed_where_the_report_uses_it(tiny):
    from rankcollapse.experiments.kit.glossary import GLOSSARY, terms_used

    sd, rows, figs = tiny
    story = all_stories()["training"].story
    texts = [s.text + " " + s.rule for s in story.statements]
    fields = ("evidence", "cause", "scope", "rule")
    texts += [" ".join(str(getattr(c, f) or "") for f in fields) for c in rows]
    texts += [f.caption for f in figs] + story.headlines(sd)
    used = terms_used(texts)
    missing = [w for w in STORY_WORDS if w not in GLOSSARY]
    assert not missing, f"not in the glossary: {missing}"
    unglossed = [w for w in STORY_WORDS if w not in used]
    assert not unglossed, f"in the glossary but not found in the story's texts: {unglossed}"


def test_the_figure_shows_every_metric_of_every_variant_over_steps(tiny):
    _, _, figs = tiny
    fig = figs[0]
    assert fig.name == "ext_training_trajectory" and "Ours" in fig.caption
    assert set(fig.data["metric"]) == {"mu_rel", "effective_rank", "mean_abs_cos", "sink_rate"}
    assert set(fig.data["mask"]) == {"causal", "causal-window:w=3", "encoder, complete"}
    enc = fig.data[fig.data["mask"] == "encoder, complete"]
    assert set(enc["variant"]) == {"post-ln", "pre-ln"} and "masked-language modelling" in fig.caption
    assert sorted(fig.data["step"].unique()) == list(range(0, 41, 4))
    assert (fig.data["networks"] == 4).all()
    assert ((fig.data["lo"] <= fig.data["mean"] + 1e-12) & (fig.data["mean"] <= fig.data["hi"] + 1e-12)).all()
    assert len(fig.figure.axes) == 16


def test_the_layer_figure_sets_every_layer_of_a_decoder_beside_an_encoder_of_the_same_block(tiny):
    sd, _, figs = tiny
    assert [f.name for f in figs] == ["ext_training_trajectory", "ext_training_layers"]
    fig = figs[1]
    data = fig.data
    # a decoder (causal) and an encoder (complete) column per block the encoder arm trains, 4 metric rows
    pairs = set(zip(data["model"], data["mask"], strict=True))
    assert pairs == {("decoder", "causal"), ("encoder", "complete")}
    assert set(data["variant"]) == {"post-ln", "pre-ln"} and len(fig.figure.axes) == 4 * 4
    titles = [ax.get_title() for ax in fig.figure.axes[:4]]
    assert titles == ["decoder, post-ln (causal)", "encoder, post-ln (complete)", "decoder, pre-ln (causal)",
                      "encoder, pre-ln (complete)"]
    # every layer a line; the embeddings (t = 0) have no attention
    assert set(data.loc[data["metric"] == "mu_rel", "layer"]) == {0, 1, 2}
    assert set(data.loc[data["metric"] == "first_token_attention", "layer"]) == {1, 2}
    # each point is the plain mean over the networks of the runs' own rows (oracle: pandas on the rows)
    from rankcollapse.experiments.kit.data import rows_of

    rows = rows_of(sd.arm("encoder"), "trajectory")
    pick = (rows["variant"] == "pre-ln") & (rows["metric"] == "effective_rank") & (rows["layer"] == 2)
    want = rows[pick].groupby("step")["value"].mean()
    pick = (data["model"] == "encoder") & (data["variant"] == "pre-ln") & (data["metric"] == "effective_rank")
    got = data[pick & (data["layer"] == 2)].set_index("step")["mean"]
    assert got.to_numpy() == pytest.approx(want.loc[got.index].to_numpy(), rel=1e-12)
    assert "4 (decoder) and 4 (encoder) networks" in fig.caption and "sink threshold 0.3" in fig.caption
    # one legend for the figure, above the panels, not inside one
    assert len(fig.figure.legends) == 1 and not any(ax.get_legend() for ax in fig.figure.axes)
    assert len(figs[0].figure.legends) == 1 and not any(ax.get_legend() for ax in figs[0].figure.axes)
    words = [t.get_text() for t in figs[0].figure.legends[0].get_texts()]
    assert words == ["decoder, causal", "decoder, causal-window:w=3", "encoder, complete"]


def test_one_arm_alone_draws_its_figure_and_headlines(tiny):
    """`reproduce --only training.encoder` (or `.trained`): the figure and headlines of the arm that ran,
    its caption naming that model alone; the layer figure needs both arms."""
    from rankcollapse.experiments.contract.story import StoryData

    sd, _, _ = tiny
    story = all_stories()["training"].story
    alone = StoryData(sd.story, {"encoder": sd.arms["encoder"]}, sd.verdict, sd.ranges)
    (fig,) = story.figures(alone)
    assert set(fig.data["mask"]) == {"encoder, complete"}
    assert set(fig.data["variant"]) == {"post-ln", "pre-ln"}
    assert "masked-language modelling" in fig.caption and "decoder" not in fig.caption
    assert len(fig.figure.axes) == 8 and (fig.data["networks"] == 4).all()
    lines = story.headlines(alone)
    assert len(lines) == 1 and lines[0].startswith("Encoders trained by masked-language modelling")
    decoders = StoryData(sd.story, {"trained": sd.arms["trained"]}, sd.verdict, sd.ranges)
    (fig,) = story.figures(decoders)
    assert "encoder" not in fig.caption and not fig.data["mask"].str.startswith("encoder").any()
    assert len(story.headlines(decoders)) == 3
