"""A run's identity never changes when the names its stories and tasks read do: every arm's run ids under the
tiny and quick profiles, and a custom sweep's written under the simulator's stored keys (``n``, ``batch``,
``preset``), pinned as computed at 400fd79, before the engine named params at its boundary (issue 43 item 1).
A resumed folder is found again only while these hold."""

from __future__ import annotations

import hashlib

import pytest

from rankcollapse.experiments.stories import load_experiments

#: (profile, experiment) -> (runs, the first 16 hex digits of SHA-256 of its sorted run ids joined by ",").
#: Arms whose runs carry facts (a ``paper:`` checkpoint resolved on this machine) are left out: their ids
#: depend on the local cache.
PINNED: dict[tuple[str, str], tuple[int, str]] = {
    ("tiny", "theorem1.bound"): (15, "2fe699fb13897b58"),
    ("tiny", "theorem1.radius"): (6, "7ed4c90e91801042"),
    ("tiny", "theorem2.bounds"): (4, "023acb39eb0a48b3"),
    ("tiny", "theorem2.hemisphere"): (6, "0ad60b7d0ad9c828"),
    ("tiny", "fig1_fig5.paper"): (1, "730ffd6d10d49209"),
    ("tiny", "fig1_fig5.surrogate"): (1, "19c7451f3700f82b"),
    ("tiny", "theorem3.paper"): (2, "e99bcd2aede9b8ae"),
    ("tiny", "theorem3.complete"): (1, "6a4a510065e160b8"),
    ("tiny", "theorem3.designed"): (3, "90323b97a08c6d32"),
    ("tiny", "fig2.paper"): (6, "283522b978f0f181"),
    ("tiny", "fig2.deep"): (6, "ad6c59609cc22305"),
    ("tiny", "fig2.gaussian_san"): (48, "d3a97df15b3bbe19"),
    ("tiny", "fig3.paper"): (3, "1d44f85038c4d84e"),
    ("tiny", "fig3.gaussian_san"): (18, "ca666dfa6f644546"),
    ("tiny", "fig4.paper"): (12, "ea93e1fb2c9d87f6"),
    ("tiny", "fig8.paper"): (3, "01f664c2e37e7fa3"),
    ("tiny", "fig9.random_init"): (6, "8e413c3d26646d3c"),
    ("tiny", "training.trained"): (32, "9b0d8336d82333dc"),
    ("tiny", "training.encoder"): (8, "e2e8033e862e0398"),
    ("tiny", "position_bias.paper"): (24, "8a2cadd992d684fa"),
    ("tiny", "position_decay.paper"): (8, "7b65c7546548a9b9"),
    ("tiny", "position_decay.rope"): (24, "986c47fbfd79028b"),
    ("tiny", "position_decay.rope_profile"): (4, "50cec9e36c6bf2ec"),
    ("tiny", "residual_rollout.paper"): (24, "e04027b5b9d3ecbb"),
    ("tiny", "residual_rollout.alibi"): (48, "887f5e7664631278"),
    ("tiny", "cirrincione.paper"): (64, "c8e2c5f0a0d5b5ee"),
    ("tiny", "cirrincione.bert"): (4, "faadee46831be4ac"),
    ("tiny", "rollout_models.models"): (8, "2659684e9e3370d6"),
    ("tiny", "karagodin.paper"): (80, "4a70b9f3efd435f4"),
    ("tiny", "hasse.paper"): (1, "e9719ec66c064208"),
    ("tiny", "u_init.san"): (8, "576ba7a39a91e528"),
    ("tiny", "u_init.models"): (8, "cf8b07ae0e3a0a65"),
    ("tiny", "dyt.fits"): (8, "e91f3bf1189a028c"),
    ("tiny", "dyt.equilibria"): (4, "43cae38f4d3f1c97"),
    ("tiny", "dyt.curves"): (8, "53077334ec066bc3"),
    ("tiny", "ln_scaling.init"): (16, "1e6fa5dc69097e5c"),
    ("tiny", "ln_scaling.random_models"): (8, "ef4fdd94e1bac376"),
    ("tiny", "ln_scaling.models"): (8, "ab35f8c568223ee9"),
    ("quick", "theorem1.bound"): (20, "2c9c0ad0313f02cf"),
    ("quick", "theorem1.radius"): (10, "9396c8dcc39f71e8"),
    ("quick", "theorem2.bounds"): (12, "2a2cc6df48b4fdd3"),
    ("quick", "theorem2.hemisphere"): (16, "e02c2b986a2aec24"),
    ("quick", "fig1_fig5.paper"): (3, "3e530d224e2138d1"),
    ("quick", "fig1_fig5.surrogate"): (1, "6616220f81440dbc"),
    ("quick", "theorem3.paper"): (9, "3a6bb4ad2669f8f2"),
    ("quick", "theorem3.complete"): (4, "36f7d87b4efcbe8d"),
    ("quick", "theorem3.designed"): (6, "578765faaf40a9ad"),
    ("quick", "fig2.deep"): (4, "13000acd25459c8c"),
    ("quick", "fig2.gaussian_san"): (64, "4a394ac41574689a"),
    ("quick", "fig2.bundled_models"): (2, "2e2017d310b93311"),
    ("quick", "fig3.gaussian_san"): (48, "85b0f47900601e37"),
    ("quick", "fig4.bundled_models"): (4, "af2d7c7e88a20041"),
    ("quick", "fig9.random_init"): (20, "396c185aa7c6d713"),
    ("quick", "training.trained"): (32, "84475eff7a955734"),
    ("quick", "training.encoder"): (6, "d77884d2b12b2302"),
    ("quick", "position_bias.paper"): (64, "65a75ecf9e598e12"),
    ("quick", "position_decay.paper"): (12, "3ebfdbb1a58309b3"),
    ("quick", "position_decay.rope"): (36, "38fd390a945a110c"),
    ("quick", "position_decay.rope_profile"): (8, "09bfdb741b9f2aae"),
    ("quick", "residual_rollout.paper"): (36, "30bf5deebab1a56f"),
    ("quick", "residual_rollout.alibi"): (72, "63d88ca120bd98b1"),
    ("quick", "cirrincione.paper"): (64, "a60fae0466f41110"),
    ("quick", "rollout_models.models"): (3, "60aeb11828a8d2bf"),
    ("quick", "karagodin.paper"): (120, "0dc66907d279cbee"),
    ("quick", "hasse.paper"): (2, "fc04a4f9d004b558"),
    ("quick", "u_init.san"): (12, "ef95022d90f23f33"),
    ("quick", "u_init.models"): (8, "bf297c6c38caac32"),
    ("quick", "dyt.fits"): (3, "de08c187e55bf8b5"),
    ("quick", "dyt.equilibria"): (18, "9a55a2b7b27b270e"),
    ("quick", "dyt.curves"): (8, "12a415b9769197f6"),
    ("quick", "ln_scaling.init"): (24, "924d5d397f3b8c00"),
    ("quick", "ln_scaling.random_models"): (8, "b32046d056a0dd14"),
    ("quick", "ln_scaling.models"): (3, "4ea888aa837191bb"),
}


def _digest(ids: list[str]) -> str:
    return hashlib.sha256(",".join(sorted(ids)).encode()).hexdigest()[:16]


@pytest.mark.parametrize("profile", ["tiny", "quick"])
def test_every_arms_run_ids_are_those_pinned_before_the_engine_named_its_params(profile):
    seen = {}
    for exp in load_experiments(profile):
        runs = exp.runs()
        if not runs or any(s.facts for s in runs):
            continue
        seen[(profile, exp.name)] = (len(runs), _digest([s.run_id for s in runs]))
    pinned = {k: v for k, v in PINNED.items() if k[0] == profile}
    assert {k: seen.get(k) for k in pinned} == pinned
    assert len(seen) >= len(pinned) - 8  # arms with facts here may drop out; most arms are checked


def test_a_custom_sweep_under_the_stored_keys_keeps_its_run_ids(tmp_path):
    (tmp_path / "sweep.yaml").write_text(
        "title: a custom simulator sweep under the simulator's stored keys\n"
        "task: simulate\n"
        "base: {n: 8, batch: 2, preset: attn, d: 4, layers: 3, mask: causal}\n"
        "grid: {seed: [0, 1]}\n"
    )
    (exp,) = load_experiments("tiny", None, tmp_path)
    assert [s.run_id for s in exp.runs()] == ["172778b54a20", "714a40f4fd25"]
