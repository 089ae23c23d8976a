"""`mapshard models`: the shipped model zoo (generator/models/) as a table. Parameter counts
come from the generator's own counter (the weights of the graphs it builds, ModelInfo's
num_params / num_active_params), never from a second formula."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from generator.build import build_workload
from generator.models import shipped_models
from schema import setup_pb2


@dataclass(frozen=True)
class ModelRow:
    name: str
    model_type: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    experts: int
    experts_per_token: int
    params: int
    active_params: int


def model_row(name: str) -> ModelRow:
    """One shipped model: its dimensions and parameter counts (a one-token prefill's
    ModelInfo, which counts every weight of the model once)."""
    s = setup_pb2.Setup()
    req = s.workload.llm_inference
    req.model.hf_model = name
    req.phase, req.batch, req.input_len = setup_pb2.PREFILL, 1, 1
    m = build_workload(s, Path("setup.txt"), 1).model
    assert m is not None
    return ModelRow(
        name=name,
        model_type=m.architecture,
        layers=m.num_layers,
        hidden=m.hidden_size,
        heads=m.num_heads,
        kv_heads=m.num_kv_heads,
        experts=m.num_experts,
        experts_per_token=m.experts_per_token,
        params=m.num_params,
        active_params=m.num_active_params,
    )


def model_rows() -> list[ModelRow]:
    return [model_row(name) for name in shipped_models()]


def _billions(n: int) -> str:
    return f"{n / 1e9:.2f}B"


def format_models(rows: list[ModelRow]) -> str:
    """A table: name, type, layers, hidden, heads/kv heads, experts (total/per token),
    total and active parameters (active = per token: k of E routed experts)."""
    header = ("name", "type", "layers", "hidden", "heads/kv", "experts", "params", "active")
    table = [header]
    for r in rows:
        experts = f"{r.experts}/{r.experts_per_token}" if r.experts else "-"
        table.append(
            (
                r.name,
                r.model_type,
                str(r.layers),
                str(r.hidden),
                f"{r.heads}/{r.kv_heads}",
                experts,
                _billions(r.params),
                _billions(r.active_params),
            )
        )
    widths = [max(len(t[i]) for t in table) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(t, widths)))
        for t in table
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if any(r.model_type == "llama4" for r in rows):
        lines.append("llama4: the text model only (the vision tower is not built)")
    lines.append(f'{len(rows)} models; use one as `hf_model: "NAME"` in a workload')
    return "\n".join(lines)
