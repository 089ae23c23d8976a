"""Exact prices of every segment when each kernel has one sharding, in one sweep.

With the sharding of every kernel fixed, a configuration's compute and network times are
constants and its least DRAM traffic under the SRAM limit is a multiple-choice knapsack
over the kernels' tilings, solved exactly on the Pareto front of (buffer, traffic). The
fronts of segments [i, j), [i, j+1), ... share a prefix, so one front per start position
is extended kernel by kernel: a kernel joins the running front once its status in the
segment can no longer change (all its consumers are inside, or it has none), and kernels
still waiting for a consumer are added only when the segment is priced. With every
segment priced exactly, the shortest path over segments is the exact optimal
segmentation for that sharding (no MILP, no best-first search).
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from solver.cost.problem import EdgeCost, MappingProblem
from solver.fusion.fronts import (
    least_traffic,
    merge,
    merge_all,
    pareto,
    thinned,
)
from solver.fusion.kernel_traffic import KernelTraffic
from solver.fusion.period import Periodicity, periodicity
from solver.milp.conversions import descendants

FRONT_LIMIT = 20_000  # Pareto states per front before giving up (the caller falls back)
# a heuristic sweep (`thin_bytes` > 0) keeps one state per SRAM slice of this many per SRAM
THIN_SLICES = 2048
THIN_ROWS = 256  # start positions a heuristic sweep prices on a larger graph
# ... up to this many kernels; beyond, fewer in proportion (at least a quarter): a row's
# sweep runs as far as the SRAM lets a segment grow, hundreds of kernels on a training
# step, so a round's work grows with rows x graph size (2,976 kernels: 249 rows of ~840
# kernels, 43 CPU-s, longer than a 60 s budget leaves; at 129 rows the round completes)
THIN_FULL_KERNELS = 1_500


def thin_starts(n: int) -> int:
    """Start positions of a heuristic sweep over `n` kernels (`THIN_FULL_KERNELS`)."""
    return max(THIN_ROWS // 4, min(THIN_ROWS, THIN_ROWS * THIN_FULL_KERNELS // max(n, 1)))


DEADLINE_STRIDE = 64  # kernels a row sweeps between two looks at the valve


def pure_knapsack(problem: MappingProblem) -> bool:
    """Every kernel has one sharding and its tilings change neither compute nor network
    time: a segment's price is then a multiple-choice knapsack over the tilings."""
    for menu in problem.kernels:
        if len(menu.shardings) != 1:
            return False
        if len({o.compute_s for o in menu.options}) > 1:
            return False
        if len({o.network_s for o in menu.options}) > 1:
            return False
    return True


def fixed_sharding_prices(
    problem: MappingProblem, deadline: float = math.inf, thin: bool = False
) -> np.ndarray | None:
    """prices[i, j]: exact latency (seconds) of segment [i, j) as one configuration, inf
    where no tiling fits the SRAM. None when the problem is not a pure tiling knapsack
    (a kernel has several shardings, or tilings that change compute or network time), a
    front grows past FRONT_LIMIT or the sweep passes `deadline` (perf_counter seconds).
    `thin`: fronts thinned to one state per SRAM slice (KnapsackPricer): every price is
    then a real configuration's, at or above the exact one (a heuristic's prices); on more
    than THIN_ROWS kernels, only segments starting at the `thin_starts` narrowest cuts
    (`narrow_starts`) and ending at one of them or at the end are priced, the rest left
    inf. A periodic problem's rows are exact
    either way (copied between layers, `_periodic_rows`), unless an exact front outgrows
    FRONT_LIMIT: then a heuristic sweep takes the thinned rows instead."""
    if not pure_knapsack(problem):
        return None
    n = len(problem.kernels)
    prices = np.full((n, n + 1), math.inf)
    period = periodicity(problem)
    # rows copied between layers: exact, and fast at any size when few kernels differ
    # from their copies (a heuristic sweep takes the thinned rows where many do)
    if period is not None and (not thin or _unlike(period) <= THIN_ROWS):
        pricer = KnapsackPricer(problem)
        if _periodic_rows(pricer, prices, period, deadline):
            return prices
        if not thin:
            return None
        # an exact front outgrew FRONT_LIMIT (large GEMM tile menus), or the valve tripped
        # (the thinned sweeps below see it at their first row): a heuristic sweep still
        # prices every segment it needs from thinned fronts
        prices = np.full((n, n + 1), math.inf)
    pricer = KnapsackPricer(problem, problem.sram_bytes / THIN_SLICES if thin else 0.0)
    if thin and n > THIN_ROWS:
        starts = narrow_starts(problem, thin_starts(n))
        ends = frozenset((*starts, n))  # a segment ends where the next one starts
        for i in starts:
            if time.perf_counter() > deadline:
                return None
            if not pricer.row(i, n, prices[i], deadline=deadline, ends=ends):
                return None
        return prices
    for i in range(n):
        if time.perf_counter() > deadline:
            return None
        if not pricer.row(i, n, prices[i], deadline=deadline):
            return None
    return prices


def _unlike(period: Periodicity) -> int:
    """Kernels that differ from their copy a period later (each starts a swept row)."""
    return sum(1 for same in period.same_as_next if not same)


def narrow_starts(problem: MappingProblem, count: int) -> list[int]:
    """Position 0 and, in each of `count` - 1 equal windows of the order after it, the
    position where the fewest bytes cross (each producer's least output, from it to its
    last consumer): a cut a segmentation is likely to take, at most a window apart."""
    n = len(problem.kernels)
    crossing = np.zeros(n + 1)
    for k, menu in enumerate(problem.kernels):
        outs = [e.dst for e in problem.out_edges(k)]
        if outs:
            least = min(o.traffic_of(menu.output_operand) for o in menu.options)
            crossing[k + 1] += least
            crossing[max(outs) + 1] -= least
    bytes_at = np.cumsum(crossing)  # bytes_at[i]: crossing just before position i
    width = -(-(n - 1) // max(1, count - 1))
    starts = [0]
    for a in range(1, n, width):
        window = bytes_at[a : min(n, a + width)]
        starts.append(a + int(np.argmin(window)))
    return starts


def _periodic_rows(
    pricer: KnapsackPricer, prices: np.ndarray, period: Periodicity, deadline: float
) -> bool:
    """Every row of `prices`, each row i reusing row i - p where the kernels its sweep
    reads equal their copies p later: the whole row when they all do (up to the first
    segment that does not fit), else the prefix up to the first unlike kernel u, the sweep
    resuming from row i - p's state at u shifted by p. Both are the same arithmetic on the
    same numbers as the direct sweep, so the prices are equal bit for bit. Each row keeps
    its sweep's state at the positions a later row resumes from (u - m p); False when a
    front grows past FRONT_LIMIT or the sweep passes `deadline`."""
    p, n = period.period, prices.shape[0]
    unlike = [k for k, same in enumerate(period.same_as_next) if not same]
    residues = frozenset(u % p for u in unlike)
    unlike.append(n - p)  # past it nothing is compared

    def keep(j: int) -> bool:
        return j % p in residues

    states: dict[int, dict[int, RowState]] = {}
    for i in range(n):
        if time.perf_counter() > deadline:
            return False
        src, saved = i - p, {}
        resume = None
        if src >= 0:
            u = unlike[bisect.bisect_left(unlike, src)]
            finite = np.nonzero(np.isfinite(prices[src, src + 1 :]))[0]
            last = src + 1 + int(finite[-1]) if len(finite) else src
            if u >= min(last + 1, n - p):  # every kernel row src read equals its copy
                prices[i, i + 1 :] = prices[src, src + 1 : n - p + 1]
                states[i] = {j + p: st.shifted(p) for j, st in states[src].items() if j + p <= n}
                del states[src]
                continue
            if u in states[src]:
                prices[i, i + 1 : u + p + 1] = prices[src, src + 1 : u + 1]
                saved = {j + p: st.shifted(p) for j, st in states[src].items() if j <= u}
                resume = states[src][u].shifted(p)
            del states[src]
        row = pricer.row(i, n, prices[i], resume=resume, keep=keep, saved=saved, deadline=deadline)
        if not row:
            return False
        states[i] = saved
    return True


def segment_price(pricer: KnapsackPricer, seg: tuple[int, int]) -> float | None:
    """Exact price of the one segment `seg` = [i, j) (the same sweep, stopped at j); None
    when the problem is not a pure knapsack or a front grows past FRONT_LIMIT."""
    if not pricer.pure:
        return None
    i, j = seg
    out = np.full(len(pricer.problem.kernels) + 1, math.inf)
    if not pricer.row(i, j, out):
        return None
    return float(out[j])


def set_price(pricer: KnapsackPricer, members: list[int]) -> float | None:
    """Exact price of one configuration made of any kernel set `members` (an ideal
    difference, not necessarily a contiguous range): the same knapsack with each kernel's
    status read from the set. None when not a pure knapsack or a front grows too large."""
    if not pricer.pure:
        return None
    problem, group = pricer.problem, set(members)
    front = np.zeros((1, 2))
    comp = net = ovh = 0.0
    for k in members:
        menu = problem.kernels[k]
        kt = pricer.kernel(k)
        comp += menu.options[0].compute_s + menu.overhead_s
        ovh += menu.overhead_s
        net += menu.options[0].network_s + pricer.set_conversions(k, group)
        front = merge(
            front, pareto(np.stack(kt.buffer_traffic(kt.status_in(group)), axis=1)), pricer.cap
        )
        if len(front) > FRONT_LIMIT:
            return None
        if not len(front):
            return math.inf
    mem = float(front[-1, 1]) / problem.dram_bandwidth_Bps
    return problem.latency(comp, mem, net, ovh)


@dataclass(frozen=True)
class RowState:
    """A row's sweep after kernels [i, j): all the next step reads (the settled front,
    the kernels still waiting for a consumer, the running sums)."""

    j: int
    final: np.ndarray
    pending: tuple[int, ...]
    comp: float
    net: float
    ovh: float

    def shifted(self, p: int) -> RowState:
        """The same state seen p kernels later (a copy of the layer)."""
        pending = tuple(q + p for q in self.pending)
        return RowState(self.j + p, self.final, pending, self.comp, self.net, self.ovh)


_NOTHING = np.zeros((1, 2))  # the front of no kernel: no buffer, no traffic


class KnapsackPricer:
    """The exact knapsack prices of segments from one start position, one sweep per row.
    Kernels' (buffer, traffic) points are built on first use."""

    def __init__(self, problem: MappingProblem, thin_bytes: float = 0.0):
        """`thin_bytes` > 0: a running front of more states than slices (SRAM / thin_bytes)
        keeps, of the states whose buffers fall in one slice, only the one of least
        traffic (a real state, so a price stays a configuration that fits, never below the
        exact one): heuristic sweeps over long segments whose exact fronts would grow past
        FRONT_LIMIT; smaller fronts stay exact (an SRAM-bound chain's tight configurations
        need them)."""
        self.problem = problem
        self.pure = pure_knapsack(problem)
        self.cap = problem.sram_bytes * (1 + 1e-9)
        self.thin_bytes = thin_bytes if math.isfinite(thin_bytes) else 0.0
        self.kernels: dict[int, KernelTraffic] = {}  # built by `kernel`
        self._conv_in: dict[int, float] = {}
        self._sources_of: dict[int, list[int]] = {}

    def kernel(self, k: int) -> KernelTraffic:
        if k not in self.kernels:
            self.kernels[k] = KernelTraffic(self.problem, k)
            charge = self.charges
            self._conv_in[k] = sum(charge[id(e)] for e in self.problem.conv_in_edges(k))
        return self.kernels[k]

    @cached_property
    def charges(self) -> dict[int, float]:
        """id(edge) -> its conversion seconds (one sharding per kernel), a layout two
        consumers need paid by the first in the problem's order: exact on its segments."""
        problem = self.problem
        charges = problem.edge_charges([0] * len(problem.kernels))
        return {id(e): c for e, c in zip(problem.edges, charges)}

    @cached_property
    def descendants(self) -> list[int]:
        return descendants(self.problem)

    @cached_property
    def sharing(self) -> dict[tuple[int, int], list[EdgeCost]]:
        """(conversion group, layout) -> the edges whose consumer needs that layout (one
        sharding per kernel: layouts[0])."""
        out: dict[tuple[int, int], list[EdgeCost]] = {}
        for f in self.problem.edges:
            if f.group >= 0:
                out.setdefault((f.group, f.layouts[0]), []).append(f)
        return out

    def set_conversions(self, k: int, group: set[int]) -> float:
        """Conversion seconds charged to kernel k in a configuration that is any kernel set
        `group`: an edge alone pays; a layout several consumers need is paid here only when
        every consumer needing it outside `group` runs later (a descendant of `group`),
        else it is left out (the price stays a lower bound)."""
        problem = self.problem
        reach = 0
        for j in group:
            reach |= self.descendants[j]
        total = 0.0
        for e in problem.conv_in_edges(k):
            if e.group < 0:
                total += e.conv[0][0]
                continue
            same = self.sharing[(e.group, e.layouts[0])]
            if any(f.dst not in group and not reach >> f.dst & 1 for f in same):
                continue
            if min(f.dst for f in same if f.dst in group) == k and e is min(
                (f for f in same if f.dst == k), key=lambda f: f.dst_operand
            ):
                total += e.conv[0][0]
        return total

    def row(
        self,
        i: int,
        stop: int,
        out: np.ndarray,
        resume: RowState | None = None,
        keep: Callable[[int], bool] | None = None,
        saved: dict[int, RowState] | None = None,
        deadline: float = math.inf,
        ends: frozenset[int] | None = None,
    ) -> bool:
        """out[j] = price of [i, j) for j in i+1..stop (left inf where nothing fits);
        `ends`: only those j priced (the others left inf, their steps only merging the
        settled kernels: the pending kernels' front is built where a price is);
        False when a front grows past FRONT_LIMIT, or the sweep passes the valve's
        `deadline` (perf_counter seconds; checked every DEADLINE_STRIDE kernels).
        `resume`: start from this state of the sweep (kernels [i, resume.j) done);
        `saved[j]`: the state at each j with keep(j) (not with `ends`)."""
        assert ends is None or keep is None, "resume states are kept at every j"
        problem = self.problem
        final = np.zeros((1, 2))  # Pareto rows (buffer bytes, traffic bytes)
        pending: list[int] = []
        comp = net = ovh = 0.0
        first = i + 1
        waiting = _Waiting(self, i)
        if resume is not None:
            final, pending, first = resume.final, list(resume.pending), resume.j + 1
            comp, net, ovh = resume.comp, resume.net, resume.ovh
            for q in pending:
                self.kernel(q)
        for j in range(first, stop + 1):
            k = j - 1
            menu = problem.kernels[k]
            self.kernel(k)
            comp += menu.options[0].compute_s + menu.overhead_s
            ovh += menu.overhead_s
            net += menu.options[0].network_s + self._conv_in[k]
            final, pending = self._settle(final, pending, k, i, j)
            # buffers of waiting kernels only grow: rows that leave them no room are dead
            room = self.cap - waiting.least_buffer(pending, k, j)
            final = final[: int(np.searchsorted(final[:, 0], room, side="right"))]
            if not len(final):
                break  # buffers only grow with j: no longer segment from i fits either
            if len(final) > FRONT_LIMIT:
                return False
            if j % DEADLINE_STRIDE == 0 and time.perf_counter() > deadline:
                return False
            if ends is not None and j not in ends:
                continue
            # least traffic of [i, j): a settled row plus the waiting kernels' that fit
            least = least_traffic(waiting.front(j), final, self.cap)
            if not math.isfinite(least):
                break  # buffers only grow with j: no longer segment from i fits either
            mem = least / problem.dram_bandwidth_Bps
            out[j] = problem.latency(comp, mem, net, ovh)
            if saved is not None and keep is not None and keep(j):
                saved[j] = RowState(j, final, tuple(pending), comp, net, ovh)
        return True

    def sources(self, k: int) -> list[int]:
        """The kernels feeding kernel k, ascending."""
        found = self._sources_of.get(k)
        if found is None:
            found = self._sources_of[k] = sorted({e.src for e in self.problem.in_edges(k)})
        return found

    def _settle(
        self, final: np.ndarray, pending: list[int], k: int, i: int, j: int
    ) -> tuple[np.ndarray, list[int]]:
        """Kernel k joins [i, j): merge the kernels whose status settles at j into the
        running front; returns it and the kernels still waiting for a consumer. Only k
        and its producers inside the segment can settle at j (a kernel settles when its
        last consumer joins), merged in kernel order as the pending list holds them."""
        leaving = [p for p in (*self.sources(k), k) if p >= i and self.kernels[p].settled(j)]
        if not leaving:
            return self._thinned(final), [*pending, k]
        joining = [self.kernels[p].choices(i, j) for p in leaving]
        gone = set(leaving)
        still = [p for p in pending if p not in gone]
        if k not in gone:
            still.append(k)
        return self._thinned(merge_all(final, joining, self.cap)), still

    def _thinned(self, final: np.ndarray) -> np.ndarray:
        if self.thin_bytes > 0 and len(final) > self.problem.sram_bytes / self.thin_bytes:
            return thinned(final, self.thin_bytes)
        return final


class _Waiting:
    """The kernels of a row sweep [i, j) still waiting for a consumer, as prefixes: the
    sums of their least buffers and the merges of their fronts, each up to one of them
    (`members[t]`: the last kernel of prefix t). At each j only the part from the first
    producer of a kernel that joined is redone: a pending kernel's choices change only
    when its first consumer joins and it leaves when its last one does, so every pending
    kernel before is as it was. The merged fronts are built only where a price is read
    (`front`). A training step's saved activations wait at the start of the list for
    their backward: merging every pending kernel again at each j was 82% of a 17-layer
    step's search. The least-buffer sums are the old per-j sums bit for bit; a price adds
    a settled state's traffic to the waiting kernels' merged traffic (they used to be
    merged into the settled front), equal up to rounding."""

    def __init__(self, pricer: KnapsackPricer, i: int):
        self.pricer, self.i = pricer, i
        self.members: list[int] = []  # the waiting kernels, in list order
        self.least_sums: list[float] = []  # their least buffers summed up to each
        self.fronts: list[np.ndarray] = []  # merged fronts (a prefix of the prefixes)

    def least_buffer(self, pending: list[int], k: int, j: int) -> float:
        """Kernel k joined at j: the summed least buffers of `pending` (the list after)."""
        sources = self.pricer.sources(k)
        changed = next((p for p in sources if p >= self.i), math.inf)
        cut = bisect.bisect_left(self.members, changed)
        del self.members[cut:], self.least_sums[cut:], self.fronts[cut:]
        total = self.least_sums[-1] if self.least_sums else 0.0
        kernels = self.pricer.kernels
        for p in pending[cut:]:
            total += float(kernels[p].choices(self.i, j)[0, 0])
            self.members.append(p)
            self.least_sums.append(total)
        return total

    def front(self, j: int) -> np.ndarray:
        """The merged front of the pending kernels at j (after `least_buffer(..., j)`)."""
        merged = self.fronts[-1] if self.fronts else _NOTHING
        kernels, cap = self.pricer.kernels, self.pricer.cap
        for p in self.members[len(self.fronts) :]:
            merged = merge_all(merged, [kernels[p].choices(self.i, j)], cap)
            self.fronts.append(merged)
        return merged
