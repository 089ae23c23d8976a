"""Whether a validation row's run settings (row_keys: the "setting" keys) are the ones the
model runs: a setting the setup has no field for is predicted only at the value the model
assumes, and a setting that the columns already express must agree with them. Otherwise the
row is "not modelled", with the key and the value named.
"""

from __future__ import annotations

from mapshard.fidelity.cases import Case, Unmodelable
from mapshard.fidelity.row_keys import SETTINGS


def check_settings(case: Case) -> None:
    """Unmodelable when a setting of the row is not the one the model runs, naming it."""
    for key, accepted in SETTINGS.items():
        value = case.extra.get(key)
        if value is not None and value not in accepted:
            ran = f"the model runs {key}={' or '.join(accepted)}" if accepted else "not modelled"
            raise Unmodelable(f"{key}={value}: {ran}")
    row_settings(case)


def _rule(ok: bool, text: str) -> None:
    if not ok:
        raise Unmodelable(text)


def row_settings(case: Case) -> None:
    """The settings the columns already express must agree with them."""
    extra = case.extra
    batching = extra.get("batching")
    if batching is not None:
        want = "inflight" if case.kind == "inference_offline_throughput" else "static"
        _rule(batching == want, f"batching={batching}: a {case.kind} row runs {want} batching")
    for key in ("grad_accum", "pp_microbatches"):
        if key in extra:
            ranks = case.int("micro_batch", 1) * max(case.int("dp", 1), 1)
            if ranks <= 0:
                raise ValueError(f"micro_batch {case.text('micro_batch')}: give at least 1")
            steps = case.int("global_batch") / ranks
            _rule(
                extra[key] == f"{steps:g}",
                f"{key}={extra[key]} but global_batch / (micro_batch x dp) = {steps:g}",
            )
    shard = extra.get("fsdp_shard_ranks")
    if shard is not None:
        # FULL_SHARD over every rank that holds the weights: DP x CP (HSDP is not modelled)
        group = max(case.int("dp", 1), 1) * max(case.int("cp", 1), 1)
        _rule(shard == str(group), f"fsdp_shard_ranks={shard} but dp x cp = {group}")
    ac = extra.get("ac_mode")
    if ac is not None:
        recompute = case.text("recompute") or "none"
        _rule(ac in ("none", "full"), f"ac_mode={ac}: only none and full are modelled")
        _rule(ac == recompute, f"ac_mode={ac} but the recompute column says {recompute}")
    calc = {"full": "full", "attn_only": "selective"}.get(extra.get("calculon_recompute", ""))
    if "calculon_recompute" in extra:
        recompute = case.text("recompute") or "none"
        _rule(
            calc == recompute,
            f"calculon_recompute={extra['calculon_recompute']} but the "
            f"recompute column says {recompute}",
        )
    tp_comm = extra.get("calculon_tp_comm")
    if tp_comm is not None:
        sp = {"ar": 0, "rs_ag": 1}.get(tp_comm)
        _rule(
            sp == case.int("sequence_parallel"),
            f"calculon_tp_comm={tp_comm} but sequence_parallel is {case.int('sequence_parallel')}",
        )
    for key in ("parallel_layers", "multi_query"):
        if key in extra and extra[key] not in ("0", ""):
            # facts of the model that only a shipped config (hf_config) carries
            shipped = "hf_config" in extra or "local_config" in extra
            _rule(shipped, f"{key}={extra[key]} needs the model from hf_config/local_config")
