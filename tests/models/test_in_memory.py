"""An in-memory Hugging Face model in ``analyze``: read with its own tokenizer (given, or saved beside
it), the bundled BERT tokenizer only when the vocabulary is that one, and left exactly as it came."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models import AnalyzeConfig, analyze
from rankcollapse.models.loading import bert_tokenizer

TEXTS = ["the cat sat on the mat", "a dog ran after the cat and the mat fell"]
WORDS = "<s> </s> <unk> the cat sat on mat a dog ran after and fell".split()  # the word_tokenizer's


def gpt2(vocab: int = len(WORDS)) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                      bos_token_id=0, eos_token_id=1))


def bert() -> nn.Module:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    return BertModel(BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=64, max_position_embeddings=64))


def state(model: nn.Module) -> dict:
    """Everything analyze must leave alone: training flags, requires_grad, attention implementation,
    hooks (by identity), the weights and the forward pass."""
    return {
        "training": [(n, m.training) for n, m in model.named_modules()],
        "grad": [(n, p.requires_grad) for n, p in model.named_parameters()],
        "attn": model.config._attn_implementation,
        "hooks": [(n, list(m._forward_hooks.values()), list(m._forward_pre_hooks.values()))
                  for n, m in model.named_modules()],
        "weights": {k: v.clone() for k, v in model.state_dict().items()},
    }


def assert_unchanged(model: nn.Module, before: dict) -> None:
    after = state(model)
    for key in ("training", "grad", "attn", "hooks"):
        assert after[key] == before[key], key
    assert all(torch.equal(after["weights"][k], v) for k, v in before["weights"].items())


def touched_by_the_user(model: nn.Module) -> nn.Module:
    """As a researcher's model is: training mode, sdpa attention, some parameters frozen, a hook."""
    model.train()
    assert model.config._attn_implementation == "sdpa"
    next(model.parameters()).requires_grad_(False)
    model.register_forward_hook(lambda mod, args, out: None)
    return model


def expected_ids(tokenizer, start: int) -> torch.Tensor:
    seqs = [[start] + tokenizer(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    ids = torch.zeros(len(seqs), max(map(len, seqs)), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    return ids


def test_an_in_memory_gpt2_reads_texts_with_the_given_tokenizer_and_is_left_as_it_came(word_tokenizer):
    model = touched_by_the_user(gpt2())
    before = state(model)
    tok = word_tokenizer()
    config = AnalyzeConfig(tokens=32, metrics=("mu", "mu_rel"))
    result = analyze(config, model=model, texts=TEXTS, tokenizer=tok)
    assert torch.equal(result.ids, expected_ids(tok, start=0))
    assert result.model_info["tokenizer"].startswith("given ") and result.model_info["start_token"] == 0
    assert [r["hook"] for r in result.rows] == ["blocks.0.hook_resid_pre", "blocks.0.hook_resid_post",
                                               "blocks.1.hook_resid_post"]
    assert_unchanged(model, before)


def test_an_in_memory_bert_reads_texts_with_the_bundled_tokenizer_of_its_vocabulary_and_is_left_as_it_came():
    model = touched_by_the_user(bert())
    before = state(model)
    result = analyze(AnalyzeConfig(tokens=32, metrics=("mu",)), model=model, texts=TEXTS)
    assert result.model_info["tokenizer"].startswith("bundled BERT uncased WordPiece")
    assert torch.equal(result.ids, expected_ids(bert_tokenizer(), start=101))
    assert_unchanged(model, before)


def test_a_model_saved_with_its_tokenizer_reads_texts_with_that_tokenizer(tmp_path, word_tokenizer):
    from transformers import AutoModelForCausalLM

    gpt2().save_pretrained(tmp_path)
    word_tokenizer().save_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tmp_path)
    result = analyze(AnalyzeConfig(tokens=32, metrics=("mu",)), model=model, texts=TEXTS)
    assert result.model_info["tokenizer"] == f"{tmp_path} (the model's own)"
    assert torch.equal(result.ids, expected_ids(word_tokenizer(), start=0))
    named = analyze(AnalyzeConfig(tokens=32, metrics=("mu",)), model=gpt2(), texts=TEXTS,
                    tokenizer=str(tmp_path))
    assert torch.equal(named.ids, result.ids) and named.model_info["tokenizer"] == str(tmp_path)


def test_texts_without_a_tokenizer_are_refused_unless_the_vocabulary_is_the_bundled_one():
    model = gpt2(vocab=30522)  # BERT's size, but GPT-2's special tokens (bos 0, eos 1): not BERT's vocabulary
    before = state(model)
    for kw in ({"texts": TEXTS}, {}):  # texts, or the default corpus
        with pytest.raises(RankCollapseError, match="has no tokenizer: pass tokenizer=") as err:
            analyze(AnalyzeConfig(tokens=16, samples=2, metrics=("mu",)), model=model, **kw)
        assert "\n" not in str(err.value)
    assert_unchanged(model, before)
    ids = torch.tensor([[0, 5, 6, 7]])
    # token ids need no tokenizer
    assert len(analyze(AnalyzeConfig(metrics=("mu",)), model=model, ids=ids).rows) == 3


def test_a_tokenizer_larger_than_the_vocabulary_and_a_missing_one_are_one_line_errors():
    with pytest.raises(RankCollapseError, match="has 30522 tokens but the model's vocabulary has 14"):
        analyze(AnalyzeConfig(metrics=("mu",)), model=gpt2(), texts=TEXTS, tokenizer=bert_tokenizer())
    with pytest.raises(RankCollapseError, match="cannot load tokenizer"):
        analyze(AnalyzeConfig(metrics=("mu",)), model=gpt2(), texts=TEXTS, tokenizer="/no/such/tokenizer")
    with pytest.raises(RankCollapseError, match="tokenizer must be"):
        analyze(AnalyzeConfig(metrics=("mu",)), model=gpt2(), texts=TEXTS, tokenizer=3)


def test_a_bfloat16_model_is_measured_not_refused() -> None:
    """Many models load in bfloat16; their hidden states are measured in float32 (the SVD has no bf16
    kernel), and the row records the model's own dtype."""
    model = bert().to(torch.bfloat16).eval()
    ids = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(0))
    got = analyze(AnalyzeConfig(model="mine", samples=2, tokens=12), model=model, ids=ids)
    ref = analyze(AnalyzeConfig(model="mine", samples=2, tokens=12), model=model.float(), ids=ids)
    assert got.model_info["dtype"] == "bfloat16" and model.dtype == torch.float32  # .float() above cast it
    for a, b in zip(got.rows, ref.rows, strict=True):
        assert abs(a["mu_rel"] - b["mu_rel"]) < 0.05  # bf16 hidden states agree with float32 to its precision


def olmo2() -> nn.Module:
    from transformers import Olmo2Config, Olmo2ForCausalLM

    torch.manual_seed(0)
    return Olmo2ForCausalLM(Olmo2Config(vocab_size=100, hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                                        pad_token_id=0, bos_token_id=1, eos_token_id=2))


def test_diagnostics_of_an_undissected_model_read_its_attention_calls_and_leave_it_as_it_came() -> None:
    """An OLMo-2 with a head (not dissected, no family entry): --diagnostics through the registered
    attention function wrapping its own sdpa; the model keeps its implementation, flags and hooks."""
    model = touched_by_the_user(olmo2())
    before = state(model)
    ids = torch.randint(3, 100, (2, 12), generator=torch.Generator().manual_seed(0))
    got = analyze(AnalyzeConfig(model="olmo2", samples=2, tokens=12, diagnostics=True, metrics=("mu",)),
                  model=model, ids=ids)
    assert got.model_info["dissected"] is False and got.model_info["diagnostics_path"].startswith("kernel:")
    assert len(got.rows) == 4 and all(0 < r["attention_entropy"] < 2.5 for r in got.rows[1:])
    assert all(0 < r["first_token_attention"] <= 1 for r in got.rows[1:])
    assert_unchanged(model, before)


def test_an_error_inside_a_wrapped_forward_leaves_the_implementation_as_it_came() -> None:
    model = olmo2().eval()
    calls = []

    def fail(*args):
        calls.append(model.config._attn_implementation)
        raise RuntimeError("boom")

    handle = model.model.layers[1].register_forward_hook(fail)
    before = state(model)
    ids = torch.randint(3, 100, (2, 12), generator=torch.Generator().manual_seed(0))
    try:
        with pytest.raises(RuntimeError, match="boom"):
            analyze(AnalyzeConfig(model="olmo2", samples=2, tokens=12, diagnostics=True, metrics=("mu",)),
                    model=model, ids=ids)
    finally:
        handle.remove()
    assert calls == ["rankcollapse:sdpa"]  # wrapped while it ran
    before["hooks"] = state(model)["hooks"]  # the test's own hook is gone
    assert_unchanged(model, before)


def test_what_an_undissected_model_cannot_give_is_refused_in_one_line_before_anything_runs() -> None:
    from transformers import FalconConfig, FalconModel, OPTConfig, OPTModel

    opt = OPTModel(OPTConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             ffn_dim=64, word_embed_proj_dim=32))
    ids = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(0))
    assert analyze(AnalyzeConfig(model="opt", samples=2, tokens=12, diagnostics=True), model=opt,
                   ids=ids).rows
    with pytest.raises(RankCollapseError, match="not dissected: --ablation needs the attention") as err:
        analyze(AnalyzeConfig(model="opt", samples=2, tokens=12, ablation="sinks"), model=opt, ids=ids)
    assert "--diagnostics alone reads any model" in str(err.value)
    with pytest.raises(RankCollapseError, match="not dissected: --diagnostics-chunk needs"):
        analyze(AnalyzeConfig(model="opt", samples=2, tokens=12, diagnostics=True, diagnostics_chunk=4),
                model=opt, ids=ids)
    falcon = FalconModel(FalconConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                      num_attention_heads=2))
    with pytest.raises(RankCollapseError, match="does not go through Hugging Face's AttentionInterface"):
        analyze(AnalyzeConfig(model="falcon", samples=2, tokens=12, diagnostics=True), model=falcon, ids=ids)


def test_a_users_forward_hooks_skipped_by_a_surgery_mode_are_said_not_silent(capsys) -> None:
    model = bert().eval()
    calls = []
    handle = model.encoder.layer[0].register_forward_hook(lambda *a: calls.append(1))
    ids = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(0))
    try:
        got = analyze(AnalyzeConfig(model="mine", samples=2, tokens=12, mode="attn"), model=model, ids=ids)
        warned = capsys.readouterr().err
        assert "1 forward hook on the model will not run in mode 'attn'" in warned and not calls
        assert any("will not run" in n for n in got.notes)
        analyze(AnalyzeConfig(model="mine", samples=2, tokens=12, mode="full"), model=model, ids=ids)
        assert "will not run" not in capsys.readouterr().err
    finally:
        handle.remove()


def test_a_dtype_that_an_in_memory_model_does_not_have_is_refused_not_ignored() -> None:
    model = bert().eval()  # float32
    ids = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(0))
    with pytest.raises(RankCollapseError, match="the model given is float32, not dtype 'float64'"):
        analyze(AnalyzeConfig(model="mine", samples=2, tokens=12, dtype="float64"), model=model, ids=ids)
    got = analyze(AnalyzeConfig(model="mine", samples=2, tokens=12), model=model, ids=ids)  # its own dtype
    assert got.model_info["dtype"] == "float32"
    same = AnalyzeConfig(model="mine", samples=2, tokens=12, dtype="float32")
    assert analyze(same, model=model, ids=ids).rows


def test_an_in_memory_model_is_labelled_by_its_name_or_path_and_label_overrides_it() -> None:
    """Titles and ``model_label`` name the model a user loaded (``name_or_path``), not its class
    (``GPT2LMHeadModel``); one built from a config falls back to the class; ``model_label=`` overrides
    both, and a label that is no one-line text is refused in one line."""
    ids = torch.randint(2, len(WORDS), (2, 6), generator=torch.Generator().manual_seed(0))
    config = AnalyzeConfig(model="in memory", samples=2, tokens=6, metrics="mu_rel")
    model = gpt2()
    assert analyze(config, model=model, ids=ids).model_info["model_label"] == "GPT2LMHeadModel"
    model.config._name_or_path = "my-org/tiny-gpt2"
    res = analyze(config, model=model, ids=ids)
    assert res.model_info["model_label"] == res.model_info["model_name"] == "my-org/tiny-gpt2"
    assert "my-org/tiny-gpt2" in repr(res)
    mine = analyze(config, model=model, ids=ids, model_label="tiny GPT-2, fine-tuned on cats")
    assert mine.model_info["model_label"] == "tiny GPT-2, fine-tuned on cats"
    with pytest.raises(RankCollapseError, match="allowed: one line of printable text"):
        analyze(config, model=model, ids=ids, model_label="two\nlines")
