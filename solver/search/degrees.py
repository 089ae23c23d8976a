"""The parallel choices the outer search tries for a workload (issue 33): every placement of
TP/PP/DP (solver.search.parallel) beside the workload's CP, for each EP degree its variants
hold (training, `expert_parallel` unset for an MoE model; with the expert layout, folded over
TP or not, `fits_expert_layout`), each DP degree a replica count of
its variants serves (inference: replicas of the model), and only TP degrees the model's
attention can take.

Why a filter on TP: a TP degree that does not divide the heads leaves the attention no dim
to split evenly (the search would split tokens instead, a layout no framework runs), so a
free TP must divide the attention heads, and divide the KV heads or be a multiple of them
(Megatron-LM and vLLM replicate each KV head over TP / KV heads chips). EP degrees divide
the experts and DP replicas the batch by construction (generator.llm_training,
generator.llm_inference). Degrees pinned by topology tags are kept as given: whether they
fit the model is the setup check's to say (mapshard.compat).
Every choice is ordered and pruned by the same roofline bound as the others
(training_space.ordered_bounds): an EP degree or a replica count is one more outer degree.
"""

from __future__ import annotations

from collections.abc import Callable

from generator.graph import Workload
from hardware.system import System
from solver.search.parallel import Choice, enumerate_choices, spans_key


def tp_fits(workload: Workload) -> Callable[[int], bool]:
    """Whether a free TP degree suits the model's attention (module docstring)."""
    model = workload.model
    heads = model.num_heads if model else 0
    kv = (model.num_kv_heads or heads) if model else 0

    def fits(tp: int) -> bool:
        if tp <= 1 or heads <= 0 or workload.kind not in ("training", "inference"):
            return True
        return heads % tp == 0 and (kv <= 0 or kv % tp == 0 or tp % kv == 0)

    return fits


def variant_degrees(workload: Workload) -> tuple[tuple[int, int], ...]:
    """(EP degree, replicas) of each graph variant the workload holds, once each."""
    bases = workload.variants or (workload,)
    return tuple(dict.fromkeys((b.expert_parallel, b.replicas) for b in bases))


def outer_choices(
    workload: Workload, system: System, max_tp: int, max_pp: int, max_dp: int, allow_dp: bool
) -> list[Choice]:
    """Every parallel choice for the workload's variants (module docstring), each once."""
    fits = tp_fits(workload)
    choices: list[Choice] = []
    seen: set[tuple] = set()
    for ep in sorted({ep for ep, _ in variant_degrees(workload)}):
        for c in enumerate_choices(
            system,
            max_tp,
            max_pp,
            max_dp,
            allow_dp=allow_dp,
            cp=workload.context_parallel,
            ep=ep,
            tp_fits=fits,
        ):
            key = (c.degrees, spans_key(c.spans), tuple(lv.degree for lv in c.levels))
            if key not in seen:
                seen.add(key)
                choices.append(c)
    return choices


def serves(variant: Workload, choice: Choice) -> bool:
    """Whether a variant's graphs are the ones `choice` runs: its EP degree (training with
    EP searched) and expert layout (`fits_expert_layout`), its replica count (inference
    with replicas searched)."""
    if "expert_parallel" in variant.searched and variant.expert_parallel != choice.degree("EP"):
        return False
    if not fits_expert_layout(variant, choice):
        return False
    return "replicas" not in variant.searched or variant.replicas == choice.degree("DP")


def fits_expert_layout(variant: Workload, choice: Choice) -> bool:
    """An MoE variant's expert layout under `choice` (generator.moe_layout): folded over
    TP, every chip holds whole experts (experts divisible by EP TP-groups x TP) and the
    setup's EP degree, when given, is EP TP-groups x TP; unfolded, a given
    expert_tensor_parallel > 1 is the TP degree. With the layout searched, TP 1 is left to
    the unfolded variant (the two are the same graphs there)."""
    model = variant.model
    if variant.kind != "training" or model is None or model.num_experts <= 0:
        return True
    tp, groups = choice.degree("TP"), variant.expert_parallel
    if variant.expert_tensor_parallel != 1:
        return variant.expert_tensor_parallel <= 1 or variant.expert_tensor_parallel == tp
    if "expert_tensor_parallel" in variant.searched and tp == 1:
        return False
    given = variant.expert_parallel_group
    return model.num_experts % (groups * tp) == 0 and (given <= 0 or given == groups * tp)
