"""The library's words never reach a Python caller of ``Monitor.measure`` / ``Monitor.step`` or
``analyze`` (issue 39, tracebacks): ids beyond the vocabulary, negative or float ids, a probe longer than
the positions, a meta-device model, an image tensor, a list of examples and ``step=nan`` raised
IndexError / RuntimeError / NotImplementedError / AttributeError / ValueError. One check of token ids at
the edge (``edge.validate.check_token_ids``) and the model's own error on a probe quoted in one line:
each is a :class:`RankCollapseError` naming what is allowed."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import AnalyzeConfig, analyze
from rankcollapse.monitor import Monitor


def gpt2(device: str = "cpu"):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=50, n_positions=16, bos_token_id=0,
                        eos_token_id=0)
    return GPT2LMHeadModel(config).eval().to(device)


def vit():
    from transformers import ViTConfig, ViTModel

    config = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                       image_size=32, patch_size=8)
    return ViTModel(config).eval()


IDS = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(0))

#: case -> (the call on a fresh Monitor and the tiny GPT-2, words of the one line)
MONITOR = {
    "ids beyond the vocabulary": (lambda m, g: m.measure(g, IDS + 100), "allowed: 0..49"),
    "negative ids": (lambda m, g: m.measure(g, IDS - 60), "holds token id -"),
    "float ids": (lambda m, g: m.measure(g, IDS.float()), "integer token ids"),
    "a probe longer than the positions": (lambda m, g: m.measure(g, torch.randint(0, 50, (2, 40))),
                                          "at most 16"),
    "a meta-device model": (lambda m, g: m.measure(gpt2("meta"), IDS), "meta device"),
    "an image tensor": (lambda m, g: m.measure(g, torch.randn(2, 3, 8, 8)), "4 dimensions"),
    "a list of examples": (lambda m, g: m.measure(g, [{"input_ids": IDS[0]}, {"input_ids": IDS[1]}]),
                           "list of 2 examples"),
    "a vision model (images are not monitored)": (lambda m, g: m.measure(vit(), torch.randn(2, 3, 32, 32)),
                                                  "images are not monitored"),
    "step=nan in measure": (lambda m, g: m.measure(g, IDS, step=float("nan")), "step=nan"),
    "step=nan in step": (lambda m, g: m.step(g, IDS, step=float("nan")), "step=nan"),
}


@pytest.mark.parametrize("case", MONITOR, ids=list(MONITOR))
def test_a_monitor_given_what_the_model_cannot_read_raises_one_line_of_ours(case):
    call, words = MONITOR[case]
    with pytest.raises(RankCollapseError) as err:
        call(Monitor(every=1), gpt2())
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_models_own_error_on_a_probe_is_one_line_naming_it_and_step_only_warns(capsys):
    model = gpt2()

    def broken(module, args, kwargs):
        raise IndexError("index out of range in self")

    model.transformer.wte.register_forward_pre_hook(broken, with_kwargs=True)
    with pytest.raises(RankCollapseError, match=r"GPT2Model failed on the probe batch \(IndexError"):
        Monitor(every=1).measure(model, IDS)
    assert Monitor(every=1).step(model, IDS) == []
    assert "probe skipped" in capsys.readouterr().err


ANALYZE = {
    "ids beyond the vocabulary": (IDS + 100, "allowed: 0..49"),
    "negative ids": (IDS - 60, "holds token id -"),
    "float ids": (IDS.float(), "integer token ids"),
    "one sample's ids": (IDS[0], "1 dimensions"),
    "an image tensor": (torch.randn(2, 3, 8, 8), "pixel_values"),
    "a list": (IDS.tolist(), "must be a torch.Tensor"),
}


@pytest.mark.parametrize("case", ANALYZE, ids=list(ANALYZE))
def test_analyze_given_ids_the_model_cannot_read_raises_one_line_of_ours(case):
    ids, words = ANALYZE[case]
    with pytest.raises(RankCollapseError) as err:
        analyze(AnalyzeConfig(), model=gpt2(), ids=ids)
    assert words in str(err.value) and "\n" not in str(err.value)
