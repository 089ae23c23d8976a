"""An inline ModelSpec: every field it sets is modelled or refused by name. Fuzzing found
fields silently dropped (MLA fields without kv_lora_rank, MoE fields on a dense model,
ordinary-attention fields on latent attention, mlp_bias on experts) and a valid MLA model
refused for a head_dim it never uses."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from generator.build import build_workload
from schema import setup_pb2
from schema.errors import SetupError
from schema.validation import validate_setup

BASE = "hidden_size: 256 num_layers: 4 num_heads: 8 num_kv_heads: 2 vocab_size: 1000"
MOE = "num_experts: 8 experts_per_token: 2 intermediate_size: 512"
MLA = "kv_lora_rank: 64 qk_nope_head_dim: 32 qk_rope_head_dim: 16 v_head_dim: 32"


def _setup(spec: str) -> setup_pb2.Setup:
    text = (
        f"workload {{ llm_inference {{ model {{ inline {{ {spec} }} }} phase: DECODE batch: 2 "
        'context_len: 256 } }\nsystem { chip: "H100-SXM5-80GB" num_chip: 1 }\n'
    )
    return text_format.Parse(text, setup_pb2.Setup())


def _params(spec: str) -> int:
    return build_workload(_setup(spec), Path("setup.txt"), 1).model.num_params


def _problems(spec: str) -> str:
    try:
        validate_setup(_setup(spec), Path("setup.txt"))
    except SetupError as exc:
        return "\\n".join(exc.problems)
    return ""


def test_mlp_bias_biases_every_expert():
    """Per MoE layer: 8 experts x (2 x 512 gate/up + 256 down) bias elements."""
    plain, biased = _params(f"{BASE} {MOE}"), _params(f"{BASE} {MOE} mlp_bias: true")
    assert biased - plain == 4 * 8 * (2 * 512 + 256)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (f"{BASE} intermediate_size: 512 q_lora_rank: 96", "q_lora_rank shapes latent attention"),
        (f"{BASE} intermediate_size: 512 v_head_dim: 32", "v_head_dim shapes latent attention"),
        (f"{BASE} intermediate_size: 512 first_dense_layers: 1", "first_dense_layers applies"),
        (f"{BASE} intermediate_size: 512 capacity_factor: 1.5", "capacity_factor applies"),
        (f"{BASE} intermediate_size: 512 {MLA} qk_norm: true", "qk_norm is not modelled on"),
        (f"{BASE} intermediate_size: 512 {MLA} head_dim: 64", "head_dim is not modelled on"),
    ],
)
def test_a_field_the_model_would_not_use_is_refused(spec: str, field: str):
    assert field in _problems(spec)


def test_latent_attention_needs_no_head_dim():
    """6 heads over a hidden of 512 do not divide, which only ordinary attention minds."""
    spec = (
        f"hidden_size: 512 num_layers: 2 num_heads: 6 vocab_size: 1000 intermediate_size: 512 {MLA}"
    )
    assert _problems(spec) == ""
    assert _params(spec) > 0


def test_a_negative_expert_count_is_one_problem():
    problems = _problems(f"{BASE} intermediate_size: 512 num_experts: -4").splitlines()
    assert len([p for p in problems if "expert" in p]) == 1
