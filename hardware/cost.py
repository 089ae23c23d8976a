"""System Cost and System Power of the native model, pure functions of a System.

With n chips, DRAM bandwidth B_dram (GB/s) and, per topology level l, link bandwidth B_l
(GB/s per chip, one direction):

    cost  = n*accelerator_price + n*B_dram*dram_unit_price
          + sum_l n*B_l*link_unit_price + sum_(switch levels l) 2*d_l*B_l*switch_unit_price
    power = n*accelerator_power + n*B_dram*dram_unit_power
          + sum_l n*B_l*link_unit_power[l] + sum_(switch levels l) 2*d_l*B_l*switch_unit_power

DFModel's units are kept: $ and W per GB/s (per switch port for the switch terms), and its
switch term on a switch level (2 d_l B_l of port bandwidth). A ring, torus or fully-connected
level has no switch, so it pays none (DFModel charges its switch term on every level kind:
its closed forms, per variant, are solver/dfmodel/model.system_cost_power, which reproduces
its README example's 17,757,184; the native figure for that r_r 8 x 128 system is 326,400
less).
"""

from __future__ import annotations

from collections.abc import Sequence

from hardware.system import System, Topology


def _degrees(system: System, degrees: Sequence[int] | None) -> list[int]:
    """The degree of every level: given (for a searched topology) or the resolved ones."""
    if degrees is None:
        degrees = [level.degree for level in system.network]
    if len(degrees) != len(system.network):
        raise ValueError(f"{len(degrees)} degrees for {len(system.network)} topology levels")
    if any(d <= 0 for d in degrees):
        raise ValueError(f"degrees {list(degrees)} include a searched (0) level; pass degrees")
    return list(degrees)


def _switch_ports(system: System, degrees: Sequence[int] | None) -> list[int]:
    """Switch port bandwidth per level, in link bandwidths: DFModel's 2 x degree on a switch
    level, none on a level without a switch (a searched level must be given its degree)."""
    return [
        2 * d if level.kind == Topology.SWITCH else 0
        for level, d in zip(system.network, _degrees(system, degrees))
    ]


def cost_breakdown(system: System, degrees: Sequence[int] | None = None) -> dict[str, float]:
    """System Cost ($) split into accelerator, dram, link and switch terms."""
    c, n = system.cost, system.num_chips
    dram_GBps = system.dram.bandwidth_Bps / 1e9
    bws = [level.link_bandwidth_Bps / 1e9 for level in system.network]
    return {
        "accelerator": n * c.accelerator_price,
        "dram": n * dram_GBps * c.dram_unit_price,
        "link": sum(n * bw * c.link_unit_price for bw in bws),
        "switch": sum(
            ports * bw * c.switch_unit_price
            for ports, bw in zip(_switch_ports(system, degrees), bws)
        ),
    }


def power_breakdown(system: System, degrees: Sequence[int] | None = None) -> dict[str, float]:
    """System Power (W) split into accelerator, dram, link and switch terms."""
    c, n = system.cost, system.num_chips
    dram_GBps = system.dram.bandwidth_Bps / 1e9
    bws = [level.link_bandwidth_Bps / 1e9 for level in system.network]
    per_level = list(c.link_unit_power) + [0.0] * (len(bws) - len(c.link_unit_power))
    return {
        "accelerator": n * c.accelerator_power_W,
        "dram": n * dram_GBps * c.dram_unit_power,
        "link": sum(n * bw * p for bw, p in zip(bws, per_level)),
        "switch": sum(
            ports * bw * c.switch_unit_power
            for ports, bw in zip(_switch_ports(system, degrees), bws)
        ),
    }


def system_cost(system: System, degrees: Sequence[int] | None = None) -> float:
    """System Cost in $ (DFModel's closed form). `degrees` overrides searched level degrees."""
    return sum(cost_breakdown(system, degrees).values())


def system_power(system: System, degrees: Sequence[int] | None = None) -> float:
    """System Power in W (DFModel's closed form). `degrees` overrides searched level degrees."""
    return sum(power_breakdown(system, degrees).values())
