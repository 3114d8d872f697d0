"""Vision encoders (ViT): CLS + patch tokens dissected like the text families. Oracles: Hugging Face's own
forward (``output_hidden_states``; at another image size with ``interpolate_pos_encoding=True``), mu /
mu_rel computed by hand on those states, and a plain SAN built by hand from the same weights for the
surgery modes; bad pixels are one line (exit 2 on the command line)."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
import torch

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import AnalyzeConfig, analyze, iter_hidden_states
from rankcollapse.models.images import ImageGeometry, interpolate_positions, random_pixels

TOL = {"f32": 1e-5, "f64": 1e-10}


@pytest.fixture(scope="module")
def pixels() -> torch.Tensor:
    return torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(1))


def _hf_states(model, pixels):
    with torch.inference_mode():
        return model.hf_model(pixel_values=pixels, output_hidden_states=True).hidden_states


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("backend", ["hf", "parts"])
def test_full_mode_hidden_states_equal_hfs_own_forward(tiny_models, pixels, dtype, backend):
    model = tiny_models("vit", dtype, hf_casts=True)
    ref = _hf_states(model, pixels)
    ours = [x.clone() for _, _, x in iter_hidden_states(model, pixels, backend=backend)]
    assert len(ours) == len(ref) == 5 and ours[0].shape == (3, 17, 64)  # 1 CLS + 4 x 4 patches
    for t, (x, r) in enumerate(zip(ours, ref, strict=True)):
        assert float((x - r).abs().max() / r.abs().max()) <= TOL[dtype], t


#: Image sizes other than tiny:vit's 32 x 32 px (patches of 8): fewer patches, more, and a non-square grid.
SIZES = [(16, 16), (48, 48), (24, 40)]


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("backend", ["hf", "parts"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_another_image_size_equals_hfs_forward_with_interpolated_positions(tiny_models, dtype, backend, size):
    """Row 0 (the patches, the CLS token and the bicubic positions) is Hugging Face's to the last bit; the
    layers after it to the tolerance of the default size (float32 1e-5, float64 1e-10, relative)."""
    model = tiny_models("vit", dtype, hf_casts=True)
    (h, w), p = size, 8
    px = torch.randn(2, 3, h, w, generator=torch.Generator().manual_seed(5))
    with torch.inference_mode():
        ref = model.hf_model(pixel_values=px, output_hidden_states=True,
                             interpolate_pos_encoding=True).hidden_states
    ours = [x.clone() for _, _, x in iter_hidden_states(model, px, backend=backend)]
    assert len(ours) == len(ref) == 5 and ours[0].shape == (2, 1 + (h // p) * (w // p), 64)
    assert torch.equal(ours[0], ref[0])
    for t, (x, r) in enumerate(zip(ours[1:], ref[1:], strict=True), 1):
        assert float((x - r).abs().max() / r.abs().max()) <= TOL[dtype], t


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_the_configs_image_size_embeds_as_hfs_own_embeddings_bit_for_bit(tiny_models, pixels, dtype):
    """At 32 x 32 px nothing is interpolated: the embeddings are those of HF's module, as before."""
    model = tiny_models("vit", dtype)
    with torch.inference_mode():
        want = model.hf_model.embeddings(pixels.to(model.dtype))
        assert torch.equal(model.embed(pixels), want)


def test_interpolated_positions_keep_the_cls_position_and_a_constant_grid_and_are_hfs():
    """``interpolate_positions``: the own grid gives the table back; the CLS position is kept; bicubic weights
    sum to 1, so a constant grid stays constant; another grid is HF's ``interpolate_pos_encoding``."""
    from transformers import ViTConfig
    from transformers.models.vit.modeling_vit import ViTEmbeddings

    gen = torch.Generator().manual_seed(2)
    table = torch.randn(1, 1 + 16, 8, generator=gen, dtype=torch.float64)
    assert interpolate_positions(table, (4, 4)) is table
    const = torch.cat((table[:, :1], torch.full((1, 16, 8), 0.25, dtype=torch.float64)), dim=1)
    out = interpolate_positions(const, (3, 7))
    assert out.shape == (1, 22, 8) and torch.equal(out[:, :1], table[:, :1])
    flat = torch.full((1, 21, 8), 0.25, dtype=torch.float64)
    torch.testing.assert_close(out[:, 1:], flat, rtol=0, atol=1e-15)
    emb = ViTEmbeddings(ViTConfig(hidden_size=8, image_size=32, patch_size=8)).double()
    emb.position_embeddings.data.copy_(table)
    for h, w in ((24, 56), (48, 48), (8, 8)):
        want = emb.interpolate_pos_encoding(torch.zeros(1, 1 + (h // 8) * (w // 8), 8), h, w)
        assert torch.equal(interpolate_positions(table, (h // 8, w // 8)), want), (h, w)
    with pytest.raises(RankCollapseError, match="15 patch positions is not a square grid"):
        interpolate_positions(table[:, :16], (2, 2))


def test_the_run_records_the_image_it_read_and_the_tokens_it_has(tiny_models):
    model = tiny_models("vit", "f32")
    px = torch.randn(2, 3, 48, 48, generator=torch.Generator().manual_seed(0))
    got = analyze(AnalyzeConfig(metrics=("mu_rel",)), model=model, pixel_values=px)
    assert model.n_tokens(px) == 37 and model.n_tokens(px[..., :40]) == 31
    assert got.config.tokens == 37 and got.model_info["image"] == (
        "37 tokens (1 CLS + 6 x 6 patches of 8 px from a 48 x 48 px image); positions: bicubic from the "
        "model's 4 x 4 patch grid (32 x 32 px)")
    assert analyze(AnalyzeConfig(samples=2, metrics=("mu_rel",)), model=model).model_info["image"] == (
        "17 tokens (1 CLS + 4 x 4 patches of 8 px from a 32 x 32 px image)")
    same = analyze(AnalyzeConfig(tokens=37, metrics=("mu_rel",)), model=model, pixel_values=px)
    assert same.config.tokens == 37
    with pytest.raises(RankCollapseError, match=r"--tokens 17 does not apply .* 37 tokens \(1 CLS \+ 6 x 6"):
        analyze(AnalyzeConfig(tokens=17), model=model, pixel_values=px)


def test_a_vit_whose_positions_cannot_be_interpolated_reads_its_own_size_and_refuses_another():
    """A non-square grid of positions (32 x 64 px): HF's interpolation reshapes the table to a square,
    so another size is refused in one line; the config's own size still equals HF's forward."""
    from transformers import ViTConfig, ViTModel

    vit = ViTModel(ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                             image_size=[32, 64], patch_size=8)).eval()
    px = torch.randn(2, 3, 32, 64, generator=torch.Generator().manual_seed(0))
    got = analyze(AnalyzeConfig(model="vit", metrics=("mu",)), model=vit, pixel_values=px)
    with torch.inference_mode():
        ref = vit(pixel_values=px, output_hidden_states=True).hidden_states[-1]
    mu = float(torch.stack([torch.linalg.norm(s - s.mean(0)) for s in ref]).mean())
    assert got.config.tokens == 33 and math.isclose(got.rows[-1]["mu"], mu, rel_tol=1e-5)
    with pytest.raises(RankCollapseError, match=r"square grid .*; allowed: \[b, 3, 32, 64\]") as err:
        analyze(AnalyzeConfig(model="vit"), model=vit, pixel_values=torch.zeros(2, 3, 48, 48))
    assert "\n" not in str(err.value)


def test_exact_f64_parts_differ_from_hf_only_by_its_float32_softmax(tiny_models, pixels):
    model = tiny_models("vit", "f64")  # HF's eager ViT softmax runs in float32 whatever the dtype
    assert model.info["hf_casts"] is False
    ref = _hf_states(model, pixels)
    last = [x.clone() for _, _, x in iter_hidden_states(model, pixels, backend="parts")][-1]
    assert 1e-12 < float((last - ref[-1]).abs().max() / ref[-1].abs().max()) < 1e-5


def test_mu_and_mu_rel_per_layer_are_those_of_hfs_states_by_hand(tiny_models, pixels):
    model = tiny_models("vit", "f64", hf_casts=True)
    result = analyze(AnalyzeConfig(metrics=("mu", "mu_rel")), model=model, pixel_values=pixels)
    ref = _hf_states(model, pixels)
    assert [r["layer"] for r in result.rows] == list(range(5)) and result.config.tokens == 17
    assert result.config.samples == 3 and result.model_info["inputs"] == "pixel_values"
    for row, per, x in zip(result.rows, result.samples, ref, strict=True):
        mu = torch.stack([torch.linalg.norm(s - s.mean(0, keepdim=True)) for s in x])  # ||X - 1 x̄||_F
        mu_rel = mu / torch.stack([torch.linalg.norm(s) for s in x])
        torch.testing.assert_close(per["mu"].to(mu.dtype), mu, rtol=1e-9, atol=0)
        torch.testing.assert_close(per["mu_rel"].to(mu.dtype), mu_rel, rtol=1e-9, atol=0)
        assert math.isclose(row["mu_rel"], float(mu_rel.mean()), rel_tol=1e-9)


def _san_by_hand(hf, x: torch.Tensor, skip: bool) -> list[torch.Tensor]:
    """A plain SAN of the ViT's own attention weights, layer after layer, no norm, no MLP:
    ``x <- [x +] sum_h softmax(q_h k_h^T / sqrt(e)) v_h W_O,h + b_O``."""
    out = [x]
    h = hf.config.num_attention_heads
    for layer in hf.layers:
        att = layer.attention
        q, k, v = att.q_proj(x), att.k_proj(x), att.v_proj(x)
        e = q.shape[-1] // h
        heads = []
        for i in range(h):
            s = slice(i * e, (i + 1) * e)
            a = torch.softmax(q[..., s] @ k[..., s].transpose(-1, -2) / math.sqrt(e), dim=-1)
            heads.append(a @ v[..., s])
        y = att.o_proj(torch.cat(heads, dim=-1))
        x = x + y if skip else y
        out.append(x)
    return out


@pytest.mark.parametrize("mode", ["attn", "attn+skip"])
def test_surgery_modes_are_a_san_of_the_same_weights_without_mlp_or_norm(tiny_models, pixels, mode):
    model = tiny_models("vit", "f64")
    with torch.inference_mode():
        x0 = model.hf_model.embeddings(pixels.double())
        want = _san_by_hand(model.hf_model, x0, skip=mode == "attn+skip")
        got = [x.clone() for _, _, x in iter_hidden_states(model, pixels, mode=mode)]
    for t, (a, b) in enumerate(zip(got, want, strict=True)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=f"{mode} row {t}")


def test_the_default_input_is_seeded_white_noise_normalised_as_vits_processor(tiny_models):
    geometry = ImageGeometry(3, 32, 32, 8, 8)
    a, b = random_pixels(geometry, 4, seed=7), random_pixels(geometry, 4, seed=7)
    assert torch.equal(a, b) and not torch.equal(a, random_pixels(geometry, 4, seed=8))
    u = a * 0.5 + 0.5  # back to intensities: U[0, 1)
    assert a.shape == (4, 3, 32, 32) and float(u.min()) >= 0.0 and float(u.max()) < 1.0
    assert abs(float(u.mean()) - 0.5) < 0.02 and abs(float(u.var()) - 1 / 12) < 0.005
    model = tiny_models("vit", "f64")
    default = analyze(AnalyzeConfig(samples=4, seed=7, metrics=("mu_rel",)), model=model)
    given = analyze(AnalyzeConfig(metrics=("mu_rel",)), model=model, pixel_values=a)
    assert [r["mu_rel"] for r in default.rows] == [r["mu_rel"] for r in given.rows]


def test_an_in_memory_vit_is_measured_and_an_undissected_vision_model_refused_in_one_line():
    from transformers import DeiTConfig, DeiTModel, ViTConfig, ViTModel

    sizes = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                 image_size=32, patch_size=8)
    vit = ViTModel(ViTConfig(**sizes)).eval()
    px = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    got = analyze(AnalyzeConfig(model="vit", metrics=("mu",)), model=vit, pixel_values=px)
    with torch.inference_mode():
        ref = vit(pixel_values=px, output_hidden_states=True).hidden_states
    mu = float(torch.stack([torch.linalg.norm(s - s.mean(0)) for s in ref[-1]]).mean())
    assert len(got.rows) == 3 and math.isclose(got.rows[-1]["mu"], mu, rel_tol=1e-5)
    with pytest.raises(RankCollapseError, match="takes 'pixel_values', not token ids") as err:
        analyze(AnalyzeConfig(model="deit", samples=2), model=DeiTModel(DeiTConfig(**sizes)))
    assert len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize("kw,words", [
    ({"pixel_values": torch.zeros(2, 3, 30, 30)},
     r"\[2, 3, 30, 30\], 30 x 30 px is not a whole number of 8 x 8 px patches; allowed: \[b, 3, H, W\]"),
    ({"pixel_values": torch.zeros(2, 3, 4, 32)}, r"4 x 32 px is not a whole number of 8 x 8 px patches"),
    ({"pixel_values": torch.zeros(2, 1, 32, 32)}, r"shape \[2, 1, 32, 32\]; allowed: \[b, 3, H, W\]"),
    ({"pixel_values": torch.zeros(2, 32, 32)}, r"shape \[2, 32, 32\]; allowed"),
    ({"pixel_values": torch.full((2, 3, 32, 32), float("nan"))}, "6144 non-finite values"),
    ({"pixel_values": torch.zeros(2, 3, 32, 32, dtype=torch.uint8)}, "dtype uint8; allowed: a float tensor"),
    ({"ids": torch.zeros(2, 5, dtype=torch.long)}, "is a vision encoder: give pixel_values"),
    ({"texts": ["a cat"]}, "is a vision encoder: give pixel_values"),
    ({"tokenizer": "bert-base-uncased"}, "tokenizer does not apply to vision encoder"),
])
def test_bad_input_to_a_vision_encoder_is_one_line(tiny_models, kw, words):
    with pytest.raises(RankCollapseError, match=words) as err:
        analyze(AnalyzeConfig(samples=2), model=tiny_models("vit", "f32"), **kw)
    assert "\n" not in str(err.value)


def test_tokens_are_the_images_not_a_setting(tiny_models):
    model = tiny_models("vit", "f32")
    with pytest.raises(RankCollapseError, match=r"--tokens 64 does not apply .* 17 tokens \(1 CLS \+ 4 x 4"):
        analyze(AnalyzeConfig(samples=2, tokens=64), model=model)
    assert analyze(AnalyzeConfig(samples=2, tokens=17, metrics=("mu",)), model=model).config.tokens == 17
    with pytest.raises(RankCollapseError, match="pixel_values applies only to a vision encoder"):
        analyze(AnalyzeConfig(samples=2), model=tiny_models("bert", "f32"),
                pixel_values=torch.zeros(2, 3, 32, 32))


def test_random_vit_base_is_the_published_config_without_building_it():
    from rankcollapse.models import resolve_model
    from rankcollapse.models.loading import _hf_config
    from rankcollapse.models.sizes import check_config, parameter_count

    src = resolve_model("random:google/vit-base-patch16-224")
    assert src.kind == "random" and src.family == "vit" and not src.pretrained
    cfg = _hf_config(src)
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.image_size, cfg.patch_size) == (768, 12, 224, 16)
    assert ImageGeometry.from_config(cfg).tokens == 197 and not hasattr(cfg, "vocab_size")
    assert 85e6 <= parameter_count(cfg) <= 86.6e6  # ViT-B/16 without its pooler: 85.8M parameters
    assert check_config(cfg, "vit", available=64 * 10**9) == parameter_count(cfg)


def _cli(tmp_path, *args):
    return main(["analyze", "--model", "tiny:vit", "--samples", "2", "--metrics", "mu,mu_rel",
                 "--out", str(tmp_path / "run"), *args])


def test_cli_reads_white_noise_by_default_and_a_pixel_file(tmp_path, capsys):
    assert _cli(tmp_path, "--seed", "3") == 0, capsys.readouterr().err
    rows = list(csv.DictReader((tmp_path / "run" / "metrics.csv").open()))
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert len(rows) == 5 and cfg["analyze"]["tokens"] == 17 and cfg["model"]["inputs"] == "pixel_values"
    px = random_pixels(ImageGeometry(3, 32, 32, 8, 8), 2, seed=3).numpy()
    np.save(tmp_path / "px.npy", px)
    code = _cli(tmp_path / "b", "--seed", "3", "--pixel-values", str(tmp_path / "px.npy"))  # same weights
    assert code == 0, capsys.readouterr().err
    again = list(csv.DictReader((tmp_path / "b" / "run" / "metrics.csv").open()))
    assert [r["mu_rel"] for r in again] == [r["mu_rel"] for r in rows]  # the same images, the same rows


def test_cli_reads_a_pixel_file_of_another_size_as_the_python_api(tmp_path, capsys, tiny_models):
    px = np.random.default_rng(4).uniform(-1, 1, (2, 3, 48, 40)).astype(np.float32)
    np.save(tmp_path / "px.npy", px)
    assert _cli(tmp_path, "--pixel-values", str(tmp_path / "px.npy")) == 0, capsys.readouterr().err
    rows = list(csv.DictReader((tmp_path / "run" / "metrics.csv").open()))
    info = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert info["analyze"]["tokens"] == 31 and "6 x 5 patches" in info["model"]["image"]
    api = analyze(AnalyzeConfig(metrics=("mu", "mu_rel")), model=tiny_models("vit", "f32"),
                  pixel_values=torch.from_numpy(px))
    assert len(rows) == len(api.rows) == 5
    for row, want in zip(rows, api.rows, strict=True):
        assert math.isclose(float(row["mu_rel"]), want["mu_rel"], rel_tol=1e-12)


@pytest.mark.parametrize("make,words", [
    (lambda: np.zeros((2, 3, 36, 32), np.float32), "shape [2, 3, 36, 32], 36 x 32 px is not a whole number"),
    (lambda: np.zeros((2, 4, 32, 32), np.float32), "shape [2, 4, 32, 32]; allowed: [b, 3, H, W]"),
    (lambda: np.full((2, 3, 32, 32), np.nan, np.float32), "6144 non-finite values"),
    (lambda: np.zeros((2, 3, 32, 32), np.int64), "are int64; allowed: float32 or float64"),
    (None, "--tokens 64 does not apply"),
])
def test_cli_bad_pixels_and_tokens_are_one_line_exit_2(tmp_path, capsys, make, words):
    if make is None:
        args = ["--tokens", "64"]
    else:
        np.save(tmp_path / "px.npy", make())
        args = ["--pixel-values", str(tmp_path / "px.npy")]
    assert _cli(tmp_path, *args) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1, err
