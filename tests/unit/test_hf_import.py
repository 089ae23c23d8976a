"""A config.json a user brings (hf_model): what it says is modelled or refused by name, never
dropped. Each case was a fuzzing find: a sliding window read as full attention, a layer
list of the wrong length, a learned position table overrun, messages naming keys or files
the user never wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import text_format

from generator.build import build_workload
from generator.hf_files import MODELS_DIR
from generator.models import from_hf_config
from schema import setup_pb2
from schema.errors import SetupError


def _shipped(name: str) -> dict:
    return json.loads((MODELS_DIR / name / "config.json").read_text())


def _build(tmp_path: Path, config: dict, request: str, file: str = "config.json"):
    (tmp_path / file).write_text(json.dumps(config))
    text = request.replace("MODEL", f'model {{ hf_model: "{file}" }}')
    setup = text_format.Parse(f"workload {{ {text} }}", setup_pb2.Setup())
    return build_workload(setup, tmp_path / "setup.txt", 1)


def test_qwen_sliding_window_slides_the_layers_from_max_window_layers():
    """transformers' Qwen2Config: with use_sliding_window, layers i >= max_window_layers
    slide; Qwen2.5-7B (28 layers) with max_window_layers 20: 8 layers of 4,096 keys."""
    qwen = _shipped("Qwen2.5-7B")
    assert from_hf_config(qwen, "q", "here").sliding_layers == 0  # shipped: off
    on = qwen | {"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 20}
    cfg = from_hf_config(on, "q", "here")
    assert (cfg.sliding_window, cfg.sliding_layers) == (4096, 8)
    every = from_hf_config(on | {"max_window_layers": 0}, "q", "here")
    assert every.sliding_layers == 28
    qwen3 = _shipped("Qwen3-8B") | {"use_sliding_window": True, "sliding_window": 1024}
    assert from_hf_config(qwen3 | {"max_window_layers": 30}, "q", "here").sliding_layers == 6


def test_a_mixtral_window_slides_every_layer():
    mixtral = _shipped("Mixtral-8x7B-v0.1")
    assert from_hf_config(mixtral, "m", "here").sliding_layers == 0  # null: full attention
    cfg = from_hf_config(mixtral | {"sliding_window": 256}, "m", "here")
    assert (cfg.sliding_window, cfg.sliding_layers) == (256, 32)


def test_layer_types_must_list_every_layer():
    gemma = _shipped("gemma-2-9b")  # 42 layers
    for count in (8, 84):
        bad = gemma | {"layer_types": ["sliding_attention"] * count}
        with pytest.raises(SetupError, match=f"lists {count} layers, but the model has 42"):
            from_hf_config(bad, "g", "here")
    halves = ["sliding_attention", "full_attention"] * 21
    assert from_hf_config(gemma | {"layer_types": halves}, "g", "here").sliding_layers == 21


def test_a_learned_position_table_bounds_the_sequence(tmp_path):
    """GPT-2 with n_positions 1024: a request of 1,000 prompt tokens and 25 outputs uses
    positions 0..1023 (the last output is never fed back); 26 outputs do not fit."""
    gpt2 = {"model_type": "gpt2", "n_embd": 256, "n_head": 4, "n_layer": 2}
    gpt2 |= {"vocab_size": 1000, "n_positions": 1024}
    request = "llm_inference { MODEL phase: REQUEST batch: 1 input_len: 1000 output_len: %d }"
    assert _build(tmp_path, gpt2, request % 25).model.num_layers == 2
    with pytest.raises(SetupError, match="position 1025, beyond the 1024 learned positions"):
        _build(tmp_path, gpt2, request % 26)
    train = "llm_training { MODEL global_batch: 2 micro_batch: 1 seq_len: 2048 }"
    with pytest.raises(SetupError, match="seq_len 2048 reaches position 2048, beyond the 1024"):
        _build(tmp_path, gpt2, train)


def test_messages_name_the_file_and_keys_the_user_wrote(tmp_path):
    llama = {k: v for k, v in _shipped("Llama-3.1-8B").items() if k != "hidden_size"}
    request = "llm_inference { MODEL phase: PREFILL batch: 1 input_len: 128 }"
    with pytest.raises(SetupError, match="my_model.json has no 'hidden_size'"):
        _build(tmp_path, llama, request, file="my_model.json")
    scout = _shipped("Llama-4-Scout-17B-16E")
    text = {k: v for k, v in scout["text_config"].items() if k != "hidden_size"}
    with pytest.raises(SetupError, match="config.json text_config has no 'hidden_size'"):
        from_hf_config(scout | {"text_config": text}, "s", "here")
    lite = _shipped("DeepSeek-V2-Lite")  # 27 layers
    with pytest.raises(SetupError, match="first_k_dense_replace 30 must be < num_hidden_layers"):
        from_hf_config(lite | {"first_k_dense_replace": 30}, "d", "here")
    with pytest.raises(SetupError, match=r"num_experts_per_tok must be in 1\.\.8 \(the num_local"):
        from_hf_config(_shipped("Mixtral-8x7B-v0.1") | {"num_experts_per_tok": 9}, "m", "here")
    with pytest.raises(SetupError, match="num_attention_heads 32 must be a multiple of num_key_v"):
        from_hf_config(_shipped("Llama-3.1-8B") | {"num_key_value_heads": 3}, "l", "here")
    with pytest.raises(SetupError, match=r"inline with `model \{ inline \{ \.\.\. \} \}`"):
        from_hf_config({"model_type": "gemma3"}, "g", "here")


def test_zero_kv_heads_is_refused_and_absent_is_multi_head():
    llama = _shipped("Llama-3.1-8B")
    with pytest.raises(SetupError, match="'num_key_value_heads' must be a whole number in 1"):
        from_hf_config(llama | {"num_key_value_heads": 0}, "l", "here")
    absent = {k: v for k, v in llama.items() if k != "num_key_value_heads"}
    assert from_hf_config(absent, "l", "here").kv_heads == 32
    assert from_hf_config(llama | {"num_key_value_heads": None}, "l", "here").kv_heads == 32
