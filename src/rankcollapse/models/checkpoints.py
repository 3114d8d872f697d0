"""The configurations of the paper's four checkpoints and of the tiny test models, as data.

``CHECKPOINT_CONFIGS[name]`` (and ``OTHER_CHECKPOINT_CONFIGS[name]``, checkpoints not the paper's)
is the published ``config.json`` of a Hugging Face checkpoint (the
architecture fields; nothing is downloaded): ``random:<name>`` builds exactly this model with
Hugging Face's own initialisation. ``PAPER_CHECKPOINTS`` maps each short name to the hub name the
paper used (its Figures 2-4 and 6-9). ``TINY_CONFIGS[family]`` are the small random models of the
tests (``tiny:<family>``).
"""

from __future__ import annotations

from typing import Any

#: short name -> the paper's hub name (the paper, Section 5 and Appendix G).
PAPER_CHECKPOINTS: dict[str, str] = {
    "bert-base-uncased": "bert-base-uncased",
    "gpt2": "openai-community/gpt2",
    "t5-base": "google-t5/t5-base",
    "albert-base-v2": "albert/albert-base-v2",
}

#: The published config.json of each checkpoint (architecture fields, as on the hub).
CHECKPOINT_CONFIGS: dict[str, dict[str, Any]] = {
    "bert-base-uncased": dict(
        model_type="bert",
        vocab_size=30522,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        type_vocab_size=2,
        initializer_range=0.02,
        layer_norm_eps=1e-12,
        pad_token_id=0,
        position_embedding_type="absolute",
    ),
    "gpt2": dict(
        model_type="gpt2",
        vocab_size=50257,
        n_positions=1024,
        n_embd=768,
        n_layer=12,
        n_head=12,
        n_inner=None,
        activation_function="gelu_new",
        resid_pdrop=0.1,
        embd_pdrop=0.1,
        attn_pdrop=0.1,
        layer_norm_epsilon=1e-5,
        initializer_range=0.02,
        bos_token_id=50256,
        eos_token_id=50256,
    ),
    "t5-base": dict(
        model_type="t5",
        vocab_size=32128,
        d_model=768,
        d_kv=64,
        d_ff=3072,
        num_layers=12,
        num_heads=12,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        dropout_rate=0.1,
        layer_norm_epsilon=1e-6,
        initializer_factor=1.0,
        feed_forward_proj="relu",
        is_encoder_decoder=True,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        n_positions=512,
    ),
    "albert-base-v2": dict(
        model_type="albert",
        vocab_size=30000,
        embedding_size=128,
        hidden_size=768,
        num_hidden_layers=12,
        num_hidden_groups=1,
        num_attention_heads=12,
        intermediate_size=3072,
        inner_group_num=1,
        hidden_act="gelu_new",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        max_position_embeddings=512,
        type_vocab_size=2,
        initializer_range=0.02,
        layer_norm_eps=1e-12,
        classifier_dropout_prob=0.1,
        position_embedding_type="absolute",
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
    ),
}

#: Tiny random models for tests (``tiny:<family>``): d = 64, 4 heads of 16, MLP width 128, 4 layers,
#: vocabulary 30522 (the bundled BERT WordPiece tokenizer's). Llama, Mistral, Qwen2, Phi-3 and Gemma
#: use GQA with 2 key/value heads; ViT reads 32 x 32 px images in patches of 8 (17 tokens); the decoders
#: with windows slide over 4 keys (w = 3 in our masks):
#: Mistral every layer, Qwen2 layers 2-3, Gemma 2 and 3 the even layers; GPT-NeoX rotates a quarter
#: of each head (Pythia), Phi-3 half; Gemma's query_pre_attn_scalar is 24 (not head_dim = 16).
TINY_CONFIGS: dict[str, dict[str, Any]] = {
    "bert": dict(
        model_type="bert",
        hidden_size=64,
        num_attention_heads=4,
        intermediate_size=128,
        num_hidden_layers=4,
        max_position_embeddings=512,
    ),
    "albert": dict(
        model_type="albert",
        hidden_size=64,
        embedding_size=32,
        num_attention_heads=4,
        intermediate_size=128,
        num_hidden_layers=4,
        max_position_embeddings=512,
    ),
    "gpt2": dict(
        model_type="gpt2",
        n_embd=64,
        n_head=4,
        n_inner=128,
        n_layer=4,
        n_positions=512,
        bos_token_id=0,
        eos_token_id=0,
    ),
    "llama": dict(
        model_type="llama",
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        num_hidden_layers=4,
        max_position_embeddings=512,
    ),
    "t5": dict(
        model_type="t5",
        d_model=64,
        d_kv=16,
        num_heads=4,
        d_ff=128,
        num_layers=4,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        n_positions=512,
    ),
    "mpnet": dict(
        model_type="mpnet",
        hidden_size=64,
        num_attention_heads=4,
        intermediate_size=128,
        num_hidden_layers=4,
        max_position_embeddings=514,
        relative_attention_num_buckets=32,
    ),
    "roberta": dict(
        model_type="roberta",
        hidden_size=64,
        num_attention_heads=4,
        intermediate_size=128,
        num_hidden_layers=4,
        max_position_embeddings=514,
        pad_token_id=1,
    ),
    "distilbert": dict(
        model_type="distilbert", dim=64, n_heads=4, hidden_dim=128, n_layers=4, max_position_embeddings=512
    ),
    "gpt_neox": dict(
        model_type="gpt_neox",
        hidden_size=64,
        num_attention_heads=4,
        intermediate_size=128,
        num_hidden_layers=4,
        max_position_embeddings=512,
        use_parallel_residual=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        bos_token_id=0,
        eos_token_id=0,
    ),
    "mistral": dict(
        model_type="mistral",
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_size=128,
        num_hidden_layers=4,
        max_position_embeddings=512,
        sliding_window=4,
        bos_token_id=0,
        eos_token_id=0,
    ),
    "qwen2": dict(
        model_type="qwen2",
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        num_hidden_layers=4,
        max_position_embeddings=512,
        use_sliding_window=True,
        sliding_window=4,
        max_window_layers=2,
        bos_token_id=0,
        eos_token_id=0,
    ),
    "qwen3": dict(
        model_type="qwen3",
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_size=128,
        num_hidden_layers=4,
        max_position_embeddings=512,
        bos_token_id=0,
        eos_token_id=0,
    ),
    "gemma": dict(
        model_type="gemma",
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_size=128,
        num_hidden_layers=4,
        max_position_embeddings=512,
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=0,
    ),
    "phi3": dict(
        model_type="phi3",
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        num_hidden_layers=4,
        max_position_embeddings=512,
        original_max_position_embeddings=512,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=0,
    ),
    "gemma2": dict(
        model_type="gemma2",
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_size=128,
        num_hidden_layers=4,
        max_position_embeddings=512,
        sliding_window=4,
        query_pre_attn_scalar=24,
        attn_logit_softcapping=5.0,
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=0,
    ),
    "gemma3_text": dict(
        model_type="gemma3_text",
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_size=128,
        num_hidden_layers=4,
        max_position_embeddings=512,
        sliding_window=4,
        query_pre_attn_scalar=24,
        layer_types=["sliding_attention", "full_attention"] * 2,
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=0,
    ),
    "vit": dict(
        model_type="vit",
        hidden_size=64,
        num_attention_heads=4,
        intermediate_size=128,
        num_hidden_layers=4,
        image_size=32,
        patch_size=8,
        num_channels=3,
    ),
}
TINY_VOCAB = 30522

#: Published configs of checkpoints that are not the paper's, as data: ``random:<name>`` builds them with
#: Hugging Face's own initialisation, as for the paper's (ViT-Base/16: 224 px images, 197 tokens).
OTHER_CHECKPOINT_CONFIGS: dict[str, dict[str, Any]] = {
    "google/vit-base-patch16-224": dict(
        model_type="vit",
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        initializer_range=0.02,
        layer_norm_eps=1e-12,
        image_size=224,
        patch_size=16,
        num_channels=3,
        qkv_bias=True,
    ),
}


def checkpoint_key(name: str) -> str | None:
    """The short checkpoint name of a short or hub name (``openai-community/gpt2`` -> ``gpt2``), or None."""
    for key, hub in PAPER_CHECKPOINTS.items():
        if name in (key, hub):
            return key
    return None


def random_config(name: str) -> tuple[str, dict[str, Any]] | None:
    """``(key, config)`` of a name ``random:<name>`` builds: one of the paper's checkpoints (short or hub
    name, :func:`checkpoint_key`) or of :data:`OTHER_CHECKPOINT_CONFIGS`; None for any other name."""
    key = checkpoint_key(name)
    if key is not None:
        return key, CHECKPOINT_CONFIGS[key]
    if name in OTHER_CHECKPOINT_CONFIGS:
        return name, OTHER_CHECKPOINT_CONFIGS[name]
    return None
