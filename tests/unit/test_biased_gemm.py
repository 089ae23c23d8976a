"""A linear layer's bias is epilogue work (ops.linear): the GEMM it rides on is priced as
the GEMM it is (its tiles, waves and measured table), plus the bias's bytes. A biased
GEMM was priced as a generic matrix kernel at the plateau, so adding q/k/v biases made a
decode step 7.8% faster (172.2 -> 158.8 us: 8.0 us from the measured table, 4.7 us at the
plateau)."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format

from mapshard import pipeline
from schema import setup_pb2
from solver.cost.gemm_roles import gemm_dims, is_gemm

MODEL = (
    "hidden_size: 512 num_layers: 2 num_heads: 8 num_kv_heads: 2 intermediate_size: 1408 "
    "vocab_size: 32000"
)


def _plan(extra: str, training: bool = False):
    if training:
        model = f"model {{ inline {{ {MODEL} {extra} }} }}"
        work = f"llm_training {{ {model} global_batch: 2 seq_len: 256 }}"
    else:
        work = (
            f"llm_inference {{ model {{ inline {{ {MODEL} {extra} }} }} phase: DECODE batch: 4 "
            "context_len: 1024 }"
        )
    text = (
        f"workload {{ {work} }}\n"
        'system { chip: "H100-SXM5-80GB" num_chip: 1 }\n'
        "execution { execution_style: KERNEL_BY_KERNEL }\n"
    )
    loaded = pipeline.load_message(text_format.Parse(text, setup_pb2.Setup()), Path("s.txt"))
    return pipeline.assemble(loaded, pipeline.resolve(loaded))


def _kernels(scenario) -> dict:
    return {k.name: k for p in scenario.workload.phases for k in p.graph.kernels}


def test_a_biased_linear_is_the_gemm_it_rides_on():
    plain, biased = _kernels(_plan("")), _kernels(_plan("attention_bias: true"))
    q, qb = plain["q_proj"], biased["q_proj"]
    assert [o.name for o in qb.inputs] == ["in", "weight", "bias"]
    assert is_gemm(qb) and gemm_dims(qb) == gemm_dims(q) == (4, 512, 512, 2)
    trained = _kernels(_plan("attention_bias: true", training=True))
    update = trained["q_proj_weight_update"]  # dweight and dbias
    assert [o.name for o in update.outputs] == ["dweight", "dbias"] and is_gemm(update)


def test_more_work_is_never_cheaper():
    for extra in ("attention_bias: true", "mlp_bias: true"):
        plain = pipeline.plan(_plan(""))
        biased = pipeline.plan(_plan(extra))
        assert biased.latency_s >= plain.latency_s * (1 - 1e-12), extra
        by_name = {k.name: k for p in plain.phases for k in p.kernels}
        for p in biased.phases:
            for k in p.kernels:
                if k.name in by_name and k.name.endswith("_proj"):
                    assert k.compute_s == by_name[k.name].compute_s, (extra, k.name)
