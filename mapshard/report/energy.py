"""Energy per step, modelled or said to be not modelled (never "0 J" beside "700 W").

Two models, the first that applies:
1. per-op energies: the setup's `cost` gives energy per FLOP / DRAM byte / link byte; the
   solver charges every kernel (Plan.energy_J).
2. power x time x utilisation: E = P_system x T_step x u, where P_system is the System Power
   (the chip's TDP from the library, or `cost.accelerator_power`, plus DFModel's per-GB/s
   powers) and u the fraction of the step a chip is doing work:
       u = min(1, sum over configurations of instances x max(compute_s, memory_s)
                  / (PP x T_step)),
   i.e. time spent waiting on the network, pipeline bubbles or idle counts as no energy,
   and a busy chip draws its full power. (An upper-end estimate: a chip at TDP while its
   matrix units or DRAM are busy.)
Neither applies (no power, no per-op energies): not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from mapshard.fmt import fmt_money, fmt_si
from mapshard.report.totals import parallel_degrees, phase_instances
from solver.plan import Plan

PER_OP = "per-op energies (cost.energy_per_*)"
POWER_X_UTIL = "system power x step time x utilisation"
NOT_MODELLED = "not modelled"


@dataclass(frozen=True)
class Energy:
    joules: float | None  # per step, all chips; None = not modelled
    model: str  # PER_OP | POWER_X_UTIL | NOT_MODELLED
    utilisation: float | None = None  # u of the power model

    def text(self) -> str:
        """For people: "4.3 J (system power x step time x utilisation 91%)"."""
        if self.joules is None:
            return "not modelled (no chip power and no energy per FLOP/byte in cost)"
        if self.model == POWER_X_UTIL:
            return f"{fmt_si(self.joules, 'J')} (power x time x utilisation {self.utilisation:.0%})"
        return f"{fmt_si(self.joules, 'J')} (per-op energies)"


def busy_fraction(plan: Plan) -> float:
    """u: the fraction of the step a chip's matrix units or DRAM are busy (see above)."""
    if plan.latency_s <= 0:
        return 0.0
    busy = sum(
        phase_instances(plan, p) * sum(max(c.compute_s, c.memory_s) for c in p.configs)
        for p in plan.phases
    )
    pp = max(1, parallel_degrees(plan)["pp"])
    return min(1.0, busy / (pp * plan.latency_s))


def step_energy(plan: Plan) -> Energy:
    """The energy of one step (or one whole request: `step_word`) by the first model that
    applies."""
    if plan.energy_J > 0:
        return Energy(plan.energy_J, PER_OP)
    if plan.system_power_W > 0 and plan.latency_s > 0:
        u = busy_fraction(plan)
        return Energy(plan.system_power_W * plan.latency_s * u, POWER_X_UTIL, u)
    return Energy(None, NOT_MODELLED)


def money_text(usd: float | None) -> str:
    """System cost for people: "$350,000", "$17.8 M", or "not priced" when the library has
    no price."""
    return fmt_money(usd)


def step_word(plan: Plan) -> str:
    """What latency_s (and the energy) is of: a training step, one inference step, or a
    whole request."""
    if plan.workload_kind == "training":
        return "step"
    return "request" if plan.tpot_s is not None and plan.ttft_s is not None else "step"
