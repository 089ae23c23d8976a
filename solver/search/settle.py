"""Settling one outer candidate: prune it by its bounds, reject it, or solve its graphs.

Each phase's graph is solved under the candidate's parallel choice (cached by graph, TP
layout, weight rule and DRAM budget; solver.search.solve_memo across sweep points), the
DRAM left over divided among the graphs (solver.search.dram_split), and the step assembled
from the phases' latencies (solver.search.bounds.step_times). What became of the
candidate goes to the search's ledger (solver.search.ledger).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

from generator.graph import Phase, Workload
from hardware.system import System
from solver.check import mapping_cost
from solver.cost.problem import MappingProblem
from solver.cost.weights import StepWeights, WeightRule, least_stored, stored_params
from solver.fusion.segment_search import GraphSolution
from solver.milp.model import solve_configurations
from solver.options import VALVE_STOP, ExecutionOptions, SolverOptions, past
from solver.plan import MemoryUse
from solver.search import dram_split, footprint, infeasible, stages, training_space
from solver.search.bounds import bound_of, step_times
from solver.search.expert_group import expert_span
from solver.search.ledger import Ledger, no_plan_reason
from solver.search.parallel import Choice, spans_key
from solver.search.phase_problem import (
    build_key,
    held_instances,
    micro_batches_of,
    param_cap,
    phase_problem,
)
from solver.search.plan_build import Solved
from solver.search.solve_memo import solve_graph_memo
from solver.search.training_space import Candidate

GraphSearch = Callable[[MappingProblem, SolverOptions], GraphSolution]
RuleOf = Callable[[Workload, Choice], WeightRule]


@dataclass(frozen=True)
class _Memory:
    """The memory of a mapping: its per-chip footprint, the parameters it stores per chip
    and what they cost the step besides (solver.cost.weights)."""

    use: MemoryUse = field(default_factory=MemoryUse)
    stored: float | None = None
    weights: StepWeights | None = None

    @property
    def step(self) -> tuple[float | None, StepWeights | None]:
        return self.stored, self.weights


@dataclass(frozen=True)
class _Phases:
    """A candidate's graphs solved (`Settler.solve_phases`): each phase's (problem,
    solution) and latency, a proven lower bound on the step, why it failed, its memory."""

    solutions: dict[str, tuple[MappingProblem, GraphSolution]] = field(default_factory=dict)
    latency: dict[str, float] = field(default_factory=dict)
    bound: float = 0.0
    failed: infeasible.Reason | None = None
    memory: _Memory = field(default_factory=_Memory)
    no_plan: str = no_plan_reason("")  # why a phase has no finite latency


@dataclass
class Settler:
    """Settles candidates one at a time, keeping the best plan found (`best`) and the
    graph solutions, which candidates share. `graph_search` solves one graph
    (solver.search.planner.solve_graph), `rule_of` gives a candidate's weight rule."""

    workload: Workload
    system: System
    execution: ExecutionOptions
    options: SolverOptions
    t0: float  # perf_counter at the start of the search (the valve counts from it)
    ledger: Ledger
    graph_search: GraphSearch
    rule_of: RuleOf
    group_sizes: dict[tuple, int] = field(default_factory=dict)  # training_space.group_key
    cache: dict[tuple, tuple[MappingProblem, GraphSolution]] = field(default_factory=dict)
    problems: dict[tuple, MappingProblem] = field(default_factory=dict)
    # per problem build (build_key): (parameter cap, optimal solution) of each solve
    capped: dict[tuple, list[tuple[float, GraphSolution]]] = field(default_factory=dict)
    best: Solved | None = None

    def settle(self, lb: float, candidate: Candidate) -> bool:
        """Prune, reject or solve one candidate (its label goes to the ledger); True when
        it was solved, or its search stopped before a first plan."""
        workload, choice = candidate.workload, candidate.choice
        system, ledger = self.system, self.ledger
        if self.best is not None and lb >= self.best.times.latency_s * (1 - 1e-9):
            ledger.record(lb, candidate, None, "pruned")
            return False
        failed = training_space.memory_floor_reason(candidate, system.dram.capacity_bytes)
        graph_lb = self.graph_bound(candidate) if failed is None else 0.0
        if graph_lb >= self.best_latency() * (1 - 1e-9):
            # the bound that prunes it is the one recorded (the roofline's is below the plan)
            ledger.record(max(lb, graph_lb), candidate, None, "pruned", "graph bound")
            return False
        if failed is None:
            phases = self.solve_phases(candidate)
            solutions, phase_latency, memory = phases.solutions, phases.latency, phases.memory
            failed = phases.failed
        if failed is not None:
            ledger.infeasible(lb, candidate, failed)
            return False
        if not all(math.isfinite(v) for v in phase_latency.values()):
            # stopped before a first plan: only its bounds are known
            ledger.stopped_without_plan(lb, candidate, phases.bound, phases.no_plan)
            return True
        hidden = self.execution.comm_hidden_share
        times = step_times(workload, choice, phase_latency, system, *memory.step, hidden)
        ledger.record(lb, candidate, times.latency_s, "solved", memory_bytes=memory.use.total)
        ledger.open_bounds.append(phases.bound)
        if self.best is None or times.latency_s < self.best.times.latency_s:
            self.best = Solved(workload, choice, times, solutions, memory.use, phases.bound)
        return True

    def best_latency(self) -> float:
        return self.best.times.latency_s if self.best is not None else math.inf

    def graph_bound(self, candidate: Candidate) -> float:
        """The candidate's step assembled from its graphs' proven bounds with weights free
        (`training_space.FREE_WEIGHTS`): it is pruned when that reaches the best plan (0:
        not computed). Worth it only for a group of candidates that share graphs, TP and
        placement (they differ in ZeRO stage or interleaving): one relaxed solve serves
        them all."""
        if self.best is None or self.group_sizes.get(training_space.group_key(candidate), 0) < 2:
            return 0.0
        workload, choice = candidate.workload, candidate.choice
        tp, spans = choice.degree("TP"), spans_key(choice.spans)
        micro_batches = micro_batches_of(workload, choice)
        free = training_space.FREE_WEIGHTS
        problems = self.phase_problems(workload, choice, free, micro_batches)
        if not isinstance(problems, dict):
            return 0.0
        bounds = {}
        for phase in workload.phases:
            key = (id(phase.graph), tp, spans, free, micro_batches, math.inf)
            _, sol = self.solve_cached(key, problems[phase.name])
            self.remember(build_key(phase, choice, micro_batches), problems[phase.name], sol)
            bounds[phase.name] = sol.bound_s if sol.bound_s < math.inf else 0.0
        return bound_of(workload, choice, bounds, self.system, self.execution.comm_hidden_share)

    def reuse(self, build: tuple, key: tuple, problem: MappingProblem) -> None:
        """Problems of one build (`build_key`) differ only in the memory row, sum of the
        stored parameters <= cap = budget / bytes per parameter. An optimum found under
        cap c1 that stores s1 <= c2 <= c1 parameters is optimal under c2 too (a smaller
        feasible set that still holds it; its bound stays valid): cached under `key`
        instead of a second solve. The relaxation of graph_bound is such a
        solve with no cap (the step, not the menus, pays what weights cost beyond bytes)."""
        if key in self.cache:
            return
        cap = param_cap(problem)
        for cap1, sol in self.capped.get(build, ()):
            mine = problem
            if sol.problem is not None:  # its option indices are the opened menus'
                budget = problem.resident_budget_bytes
                mine = replace(sol.problem, resident_budget_bytes=budget)
            if cap <= cap1 and stored_params(mine, sol.choice) <= cap * (1 + 1e-9):
                self.cache[key] = (mine, sol)
                return

    def remember(self, build: tuple, problem: MappingProblem, sol: GraphSolution) -> None:
        if sol.status == "optimal":
            self.capped.setdefault(build, []).append((param_cap(problem), sol))

    def solve_phases(self, candidate: Candidate) -> _Phases:
        """Every phase's graph solved under `choice` (cached by graph, TP layout, weight
        rule and DRAM budget): solutions, latencies, a proven bound on the step, why it
        failed, the memory of the mapping.

        DRAM: the memory no option changes (activations, KV cache, parameters no kernel
        reads) plus every weight group at its least storage must fit, or the choice is
        infeasible. The rest (`slack`) is divided among the graphs by
        solver.search.dram_split: each graph is solved with all of it; only when those
        optima do not fit together, or store more than the least (a training step updates
        every copy), is the split chosen over the graphs' latency-vs-storage frontiers."""
        workload, choice = candidate.workload, candidate.choice
        capacity = self.system.dram.capacity_bytes
        tp, pp = choice.degree("TP"), choice.degree("PP")
        rule = self.rule_of(workload, choice)
        micro_batches = micro_batches_of(workload, choice)
        problems = self.phase_problems(workload, choice, rule, micro_batches)
        if not isinstance(problems, dict):
            return _Phases(failed=problems)
        least = {name: least_stored(problem) for name, problem in problems.items()}
        rest = footprint.unmapped_params(workload) / (tp * pp)
        floor = sum(footprint.stored_params(workload, pp, least).values()) + rest
        use = footprint.memory_use(workload, choice, capacity, floor)
        if use.total > capacity * (1 + 1e-9):
            return _Phases(failed=infeasible.dram_reason(use))
        layers = stages.model_layers(workload)
        instances = {p.name: stages.instances_per_stage(p, pp, layers) for p in workload.phases}
        layout = dram_split.Layout(
            workload.phases,
            instances,
            least,
            rule.bytes_per_param,
            capacity - use.total,
            rest,
            pp,
            footprint.LayoutBytes(workload, choice),
        )

        def solve(phase: Phase, cap: float) -> tuple[MappingProblem, GraphSolution]:
            return self.solve_at(phase, choice, rule, micro_batches, problems[phase.name], cap)

        def refit(name: str, top: dram_split.Point, cap: float) -> dram_split.Point | None:
            return self.refit(top, cap, cap * rule.bytes_per_param)

        tops: dict[str, dram_split.Point] = {}
        latency: dict[str, float] = {}
        bounds: dict[str, float] = {}
        stop = ""  # why a phase has no plan (a work budget, the valve)
        for phase in workload.phases:
            cap = layout.top_cap(phase)
            problem, sol = solve(phase, cap)
            bounds[phase.name] = sol.bound_s if sol.bound_s < math.inf else 0.0
            latency[phase.name] = math.inf
            if sol.status == "infeasible":
                unbudgeted = partial(solve, phase, math.inf)  # the graph without DRAM row
                failed = infeasible.phase_reason(problem, phase.name, use, sol, unbudgeted)
                if failed is not None:
                    return _Phases(failed=failed)
                if sol.bound_s == math.inf:  # proven infeasible, yet no resource binds
                    self.ledger.stops.append(infeasible.UNEXPLAINED)
                continue
            tops[phase.name] = dram_split.point(cap, problem, sol)
            latency[phase.name] = sol.objective_s
            if not math.isfinite(sol.objective_s):
                stop = stop or sol.stats.stop
        if len(tops) < len(workload.phases) or not all(map(math.isfinite, latency.values())):
            hidden = self.execution.comm_hidden_share
            bound = bound_of(workload, choice, bounds, self.system, hidden)
            return _Phases(latency=latency, bound=bound, no_plan=no_plan_reason(stop))
        return self.split(candidate, layout, tops, solve, refit)

    def split(
        self,
        candidate: Candidate,
        layout: dram_split.Layout,
        tops: dict[str, dram_split.Point],
        solve: dram_split.Solve,
        refit: dram_split.Refit,
    ) -> _Phases:
        """The graphs' DRAM split (solver.search.dram_split) as the candidate's phases; a
        split not proven optimal is recorded as a search stopped short of a proof."""
        workload, choice, system = candidate.workload, candidate.choice, self.system
        capacity = system.dram.capacity_bytes

        def evaluate(latency: dict, stored: float | None, weights: StepWeights | None) -> float:
            hidden = self.execution.comm_hidden_share
            return step_times(workload, choice, latency, system, stored, weights, hidden).latency_s

        limit_s = self.options.time_limit_s
        deadline = self.t0 + limit_s if limit_s > 0 else math.inf
        valve = partial(past, deadline)
        gap = self.options.gap
        split = dram_split.split_dram(layout, tops, solve, evaluate, gap, valve, refit)
        if valve() and not split.proven:  # the valve, not the split's solves, stopped it
            self.ledger.stops.append(VALVE_STOP)
        if not split.chosen:  # no plans of the graphs fit together
            least = footprint.memory_use(workload, choice, capacity, split.stored_per_chip)
            if least.total > capacity * (1 + 1e-9):
                return _Phases(failed=infeasible.dram_reason(least))
            # they fit with activations at their floor only: no proof either way
            self.ledger.stops.append(footprint.LAYOUT_STOP)
            no_fit = dict.fromkeys((p.name for p in workload.phases), math.inf)
            return _Phases(latency=no_fit, bound=split.bound_s, no_plan=footprint.LAYOUT_TEXT)
        for pt in split.chosen.values():
            self.ledger.statuses.append(pt.sol.status)
        if not split.proven:
            self.ledger.statuses.append("split")
            self.ledger.stops.append(dram_split.STOP)
        total = split.stored_per_chip
        plans = {name: (pt.problem, pt.sol.choice) for name, pt in split.chosen.items()}
        use = footprint.memory_use(
            workload, choice, capacity, total, footprint.plan_shardings(plans)
        )
        if use.total > capacity * (1 + 1e-9):
            # defence in depth (the split prices storage as memory_use does): no plan, no proof
            self.ledger.stops.append(infeasible.SPLIT_OVER)
            over = "DRAM split over capacity (a search defect)"
            return _Phases(
                latency=dict.fromkeys(split.chosen, math.inf), bound=split.bound_s, no_plan=over
            )
        return _Phases(
            {name: (pt.problem, pt.sol) for name, pt in split.chosen.items()},
            {name: pt.sol.objective_s for name, pt in split.chosen.items()},
            split.bound_s,
            None,
            _Memory(use, total, split.weights_per_chip),
        )

    def refit(self, top: dram_split.Point, cap: float, budget: float) -> dram_split.Point | None:
        """The top plan's configurations re-solved with `budget` bytes of weights per graph
        instance (`cap` parameters): one MILP over its options (dram_split's refit)."""
        problem = replace(top.problem, resident_budget_bytes=budget)
        configs = top.sol.configs
        r = solve_configurations(problem, configs, self.options.remaining(self.t0))
        self.ledger.milps += 1
        if not r.choice or not math.isfinite(r.objective_s):
            return None
        latency, _ = mapping_cost(problem, configs, r.choice)  # the plan's own price
        if not math.isfinite(latency):
            return None
        bound = min(top.sol.bound_s, latency)
        sol = replace(top.sol, choice=r.choice, objective_s=latency, bound_s=bound, problem=None)
        return dram_split.point(cap, problem, sol)

    def solve_at(
        self,
        phase: Phase,
        choice: Choice,
        rule: WeightRule,
        micro_batches: int,
        problem: MappingProblem,
        cap: float,
    ) -> tuple[MappingProblem, GraphSolution]:
        """The phase's graph solved with at most `cap` parameters stored per instance."""
        budget = cap * rule.bytes_per_param if math.isfinite(cap) else math.inf
        problem = replace(problem, resident_budget_bytes=budget)
        key = (id(phase.graph), choice.degree("TP"), spans_key(choice.spans), rule)
        key += (micro_batches, round(budget, 3))
        build = build_key(phase, choice, micro_batches)
        self.reuse(build, key, problem)
        problem, sol = self.solve_cached(key, problem)
        self.remember(build, problem, sol)
        return problem, sol

    def phase_problems(
        self, workload: Workload, choice: Choice, rule: WeightRule, micro_batches: int
    ) -> dict[str, MappingProblem] | infeasible.Reason:
        """Each phase's inner problem under `choice` (cached), or why one cannot be tiled."""
        problems: dict[str, MappingProblem] = {}
        for phase in workload.phases:
            key = build_key(phase, choice, micro_batches)
            if key not in self.problems:
                problem = phase_problem(
                    phase.graph,
                    self.system,
                    choice,
                    self.execution,
                    micro_batches,
                    rule,
                    self.options.tile_menu_size,
                    grid=workload.process_grid,
                    expert_span=expert_span(workload, choice, self.system.network),
                    held=held_instances(workload, phase, choice, self.execution.dataflow),
                )
                failed = infeasible.untileable(problem, phase.graph, phase.name)
                if failed is not None:
                    return failed
                self.problems[key] = problem
            per_param = rule.bytes_per_param
            problems[phase.name] = replace(self.problems[key], resident_bytes_per_param=per_param)
        return problems

    def solve_cached(
        self, key: tuple, problem: MappingProblem
    ) -> tuple[MappingProblem, GraphSolution]:
        """The graph's solution (solved once per key), counted in the statistics."""
        if key not in self.cache:
            options = self.options.remaining(self.t0)
            sol = solve_graph_memo(problem, options, self.graph_search)
            self.ledger.count(problem, sol)
            self.cache[key] = (sol.problem or problem, sol)
        return self.cache[key]
