"""Samples streamed in batches (``--batch-size``) give, in float64, the rows of one batch to the last bit.

For ``analyze`` (its ``metrics.csv``, written by the CLI) and for the ``reproduce`` tasks
``model_curves`` and ``model_geometry``: batches of 1, of 3 (which does not divide the 7 samples) and
one batch are compared with ``==``, never with a tolerance. And the memory-shaped property: the model
only ever sees one batch of samples (counted by a hook on the stream, nothing timed).
"""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest
import torch

import rankcollapse.models as models_pkg
from rankcollapse.cli.main import main
from rankcollapse.experiments.kit.tasks.curves import model_curves, model_geometry
from rankcollapse.models import AnalyzeConfig, analyze, check_masks
from rankcollapse.models.stream import iter_batches

SAMPLES = 7
SIZES = (1, 3, SAMPLES)  # one sample at a time, a size that does not divide 7, one batch


def _same(a: Any, b: Any) -> bool:
    """Equal to the last bit (NaN equals NaN: a metric undefined in both)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def _differences(rows: list[dict[str, Any]], other: list[dict[str, Any]]) -> list[tuple[int, str]]:
    assert len(rows) == len(other)
    out = []
    for i, (a, b) in enumerate(zip(rows, other, strict=True)):
        assert list(a) == list(b), f"row {i}: other columns"
        out += [(i, k) for k in a if not _same(a[k], b[k])]
    return out


def test_analyze_metrics_csv_is_bitwise_the_same_in_batches_of_1_3_and_one(tmp_path, capsys) -> None:
    written = {}
    for size in SIZES:
        out = tmp_path / f"b{size}"
        code = main(
            [
                "analyze",
                "--model",
                "tiny:bert",
                "--mode",
                "attn+ln",
                "--layers",
                "4",
                "--samples",
                str(SAMPLES),
                "--tokens",
                "16",
                "--dtype",
                "float64",
                "--batch-size",
                str(size),
                "--out",
                str(out),
                "--no-table",
                "--no-progress",
            ]
        )
        assert code == 0, capsys.readouterr().err
        written[size] = (out / "metrics.csv").read_bytes()  # floats as repr: equal bytes = equal bits
    assert written[1] == written[3] == written[SAMPLES]
    assert len(written[1].splitlines()) == 6  # header + X(0) .. X(4)


@pytest.mark.parametrize(
    "settings",
    [
        {"mode": "full"},
        {"mode": "attn", "mask": "causal"},
        {"mode": "attn+skip+ln", "diagnostics": True},
        {"mode": "full", "mask": "document:lengths=8,8"},
    ],
    ids=["full-own-mask-hf", "attn-causal", "diagnostics", "documents"],
)
def test_analyze_rows_and_per_sample_values_are_bitwise_one_batchs(tiny_models, settings) -> None:
    model = tiny_models("bert", "f64")
    base = {
        "model": "tiny:bert",
        "dtype": "float64",
        "samples": SAMPLES,
        "tokens": 16,
        "layers": 3,
        **settings,
    }
    one = analyze(AnalyzeConfig(**base), model=model)
    for size in SIZES[:-1]:
        got = analyze(AnalyzeConfig(**base, batch_size=size), model=model)
        assert _differences(one.rows, got.rows) == [], f"batch size {size}"
        for a, b in zip(one.samples, got.samples, strict=True):
            assert all(torch.equal(a[k].nan_to_num(-1.0), b[k].nan_to_num(-1.0)) for k in a)


def test_padded_texts_with_diagnostics_are_bitwise_one_batchs(tiny_models) -> None:
    texts = [
        "It was the best of times, it was the worst of times.",
        "Call me Ishmael.",
        "In the beginning God created the heaven and the earth.",
        "A",
        "the end of it all, at last",
    ]
    model = tiny_models("bert", "f64")
    base = {"model": "tiny:bert", "dtype": "float64", "tokens": 16, "layers": 2, "diagnostics": True}
    one = analyze(AnalyzeConfig(**base), model=model, texts=texts)
    for size in (1, 2):
        got = analyze(AnalyzeConfig(**base, batch_size=size), model=model, texts=texts)
        assert _differences(one.rows, got.rows) == []


CURVES = {
    "model": "tiny:bert",
    "variants": ["attn", "attn+ln", "full"],
    "masks": ["complete", "causal"],
    "layers": 4,
    "samples": SAMPLES,
    "tokens": 16,
    "dtype": "float64",
    "seed": 0,
}


def test_model_curves_rows_are_bitwise_the_same_in_batches_of_1_3_and_one() -> None:
    ticks: dict[int, list[int]] = {}
    rows = {}
    for size in SIZES:
        ticks[size] = []
        out = model_curves(dict(CURVES), ticks[size].append, execution={"batch_size": size})
        rows[size] = out.rows
        assert out.summary["batch_size"] == size and out.summary["device"] == "cpu"
    assert (
        rows[1] and _differences(rows[SAMPLES], rows[1]) == [] and _differences(rows[SAMPLES], rows[3]) == []
    )
    # the progress callback is called once per layer, as for one batch, whatever the batches
    assert ticks[1] == ticks[3] == ticks[SAMPLES] == list(range(5))
    assert _differences(model_curves(dict(CURVES), lambda t: None).rows, rows[SAMPLES]) == []


def test_model_geometry_rows_are_bitwise_the_same_in_batches() -> None:
    params = {
        "model": "tiny:gpt2",
        "layers": 3,
        "samples": SAMPLES,
        "tokens": 16,
        "dtype": "float64",
        "spectrum_samples": 5,
        "cosine_samples": 4,
        "cosine_bins": 5,
    }
    one = model_geometry(dict(params), lambda t: None)
    for size in (1, 3):
        got = model_geometry(dict(params), lambda t: None, execution={"batch_size": size})
        assert _differences(one.rows, got.rows) == [], f"batch size {size}"
        assert {k: v for k, v in got.summary.items() if k != "batch_size"} == {
            k: v for k, v in one.summary.items() if k != "batch_size"
        }


@pytest.fixture
def forward_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many samples each call of the layer stream gets (the model's forward)."""
    sizes: list[int] = []
    real = models_pkg.iter_hidden_states

    def counted(model: Any, ids: torch.Tensor, **kwargs: Any) -> Any:
        sizes.append(int(ids.shape[0]))
        return real(model, ids, **kwargs)

    monkeypatch.setattr(models_pkg, "iter_hidden_states", counted)
    monkeypatch.setattr(sys.modules["rankcollapse.models.analyze.run"], "iter_hidden_states", counted)
    return sizes


@pytest.mark.parametrize("size", [2, 3, 5])
def test_the_model_sees_at_most_one_batch_of_samples(forward_sizes, tiny_models, size) -> None:
    analyze(
        AnalyzeConfig(
            model="tiny:bert", layers=2, samples=SAMPLES, tokens=12, metrics=("mu",), batch_size=size
        ),
        model=tiny_models("bert"),
    )
    assert forward_sizes and max(forward_sizes) <= size
    forward_sizes.clear()
    model_curves({**CURVES, "dtype": "float32", "layers": 2}, lambda t: None, execution={"batch_size": size})
    assert forward_sizes and max(forward_sizes) <= size
    assert len(forward_sizes) == math.ceil(SAMPLES / size) * 6  # one stream per condition and batch


def test_a_lone_sample_runs_as_two_copies_and_counts_once() -> None:
    """A batch of one out of several samples goes through the model twice over (see ``Batch``); its
    states are the first copy's."""
    ids = torch.arange(21).reshape(7, 3)
    batches = list(iter_batches(ids, 3))
    assert [b.size for b in batches] == [3, 3, 1] and [b.ids.shape[0] for b in batches] == [3, 3, 2]
    assert torch.equal(batches[2].ids, ids[[6, 6]]) and batches[2].real(batches[2].ids).shape[0] == 1
    assert [b.ids.shape[0] for b in iter_batches(ids[:1], 1)] == [1]  # one sample in all: as it is


def test_the_mask_check_in_batches_is_that_of_one_batch(tiny_models) -> None:
    model = tiny_models("gpt2")
    ids = torch.randint(0, 1000, (5, 10), generator=torch.Generator().manual_seed(0))
    one = check_masks(model, ids)
    assert one == check_masks(model, ids, 2) and all(c.matches for c in one)
