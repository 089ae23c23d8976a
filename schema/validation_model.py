"""The checks of an inline model (`ModelSpec`): dimensions a generator cannot guess, head
and expert counts that do not fit, and fields the model they are set on would not use
(refused, never silently dropped)."""

from __future__ import annotations

from schema import setup_pb2
from schema.problems import Problems


def check_model_spec(m: setup_pb2.ModelSpec, mp: str, p: Problems) -> None:
    """Dimensions a generator cannot guess, and head/expert counts that do not fit."""
    p.positive(m, mp, "hidden_size num_layers num_heads vocab_size")
    if not m.moe_intermediate_size > 0:  # the MLP width of a model with only MoE layers
        p.positive(m, mp, "intermediate_size")
    heads = m.num_heads
    if m.num_kv_heads > 0 and heads > 0 and heads % m.num_kv_heads:
        valid = f"give a divisor of {heads} (0 = num_heads)"
        p.add(f"{mp}.num_kv_heads", f"does not divide num_heads ({heads})", m.num_kv_heads, valid)
    mla = m.kv_lora_rank > 0
    if not mla and m.head_dim == 0 and heads > 0 and m.hidden_size > 0 and m.hidden_size % heads:
        wrong = f"is 0 but hidden_size ({m.hidden_size}) is not divisible by num_heads ({heads})"
        p.add(f"{mp}.head_dim", wrong, 0, "give head_dim explicitly")
    _check_spec_applies(m, mp, p)
    # a negative num_experts is reported as negative (the numbers check), not again here
    if 0 <= m.num_experts < m.experts_per_token:
        valid = (
            f"give 1..{m.num_experts} routed experts per token"
            if m.num_experts
            else ("set num_experts for a mixture of experts, or drop experts_per_token")
        )
        wrong = f"exceeds num_experts ({m.num_experts})"
        p.add(f"{mp}.experts_per_token", wrong, m.experts_per_token, valid)
    elif m.num_experts > 0:
        p.positive(m, mp, "experts_per_token", " for a mixture of experts")
    if 0 < m.num_layers < m.first_dense_layers:
        valid = f"give 0..{m.num_layers}"
        wrong = f"exceeds num_layers ({m.num_layers})"
        p.add(f"{mp}.first_dense_layers", wrong, m.first_dense_layers, valid)


# the fields that shape only latent attention (MLA), only a mixture of experts, and the
# fields of ordinary attention that latent attention does not take
MLA_ONLY = ("q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
MOE_ONLY = ("first_dense_layers", "moe_intermediate_size", "capacity_factor")
NOT_MLA = ("head_dim", "attention_bias", "qk_norm")


def _check_spec_applies(m: setup_pb2.ModelSpec, mp: str, p: Problems) -> None:
    """A field the model it is set on would not use is refused, not silently dropped."""
    if m.kv_lora_rank <= 0:
        valid = "set kv_lora_rank for latent attention, or drop it"
        for field in MLA_ONLY:
            if getattr(m, field) > 0:
                p.add(f"{mp}.{field}", "shapes latent attention only", getattr(m, field), valid)
    else:
        valid = "drop it (latent attention's projections carry no such field here)"
        for field in NOT_MLA:
            if getattr(m, field):
                wrong = "is not modelled on latent attention"
                p.add(f"{mp}.{field}", wrong, getattr(m, field), valid)
    if m.num_experts == 0:
        valid = "set num_experts for a mixture of experts, or drop it"
        for field in MOE_ONLY:
            if getattr(m, field) > 0:
                wrong = "applies to a mixture of experts only"
                p.add(f"{mp}.{field}", wrong, getattr(m, field), valid)
