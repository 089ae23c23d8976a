"""The outer search: KernelGraph phases + System -> Plan.

Outer loop over candidates (each parallel choice, times the training knobs the setup left
unset: solver/search/training_space.py) ordered by a roofline lower bound (DESIGN.md 1): a
candidate is solved only while its bound is below the best plan found, so the result is
optimal over the whole space, and the report says how many were solved, pruned and found
infeasible.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

from generator.graph import Phase, Workload
from hardware.system import System
from schema.errors import Interrupted, NoPlanError
from solver.cost.problem import MappingProblem
from solver.cost.weights import StepWeights, WeightRule, least_stored, stored_params
from solver.dfmodel import search_dfmodel
from solver.fusion.segment_search import GraphSolution
from solver.options import ExecutionOptions, SolverOptions
from solver.plan import ChoiceResult, MemoryUse, Plan, SolveStats
from solver.search import assemble, dram_split, infeasible, stages, training_space
from solver.search.bounds import bound_of, step_times
from solver.search.exact_first import solve_graph_exact_first, solved_by
from solver.search.parallel import Choice, enumerate_choices, spans_key
from solver.search.phase_problem import build_key, micro_batches_of, param_cap, phase_problem
from solver.search.plan_build import Solved, build_plan, fusion_search_text, proven_bound
from solver.search.progress import SearchProgress
from solver.search.solve_memo import solve_graph_memo
from solver.search.storage_rule import weight_rule
from solver.search.training_space import Candidate

# the graph search the planner runs: the exact kernel-by-kernel elimination first, then
# solver.fusion.solve.solve_graph (a name of this module, so a test can replace it)
solve_graph = solve_graph_exact_first


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
    """A candidate's graphs solved (`_OuterSearch.solve_phases`): each phase's (problem,
    solution) and latency, a proven lower bound on the step, why it failed, its memory."""

    solutions: dict[str, tuple[MappingProblem, GraphSolution]] = field(default_factory=dict)
    latency: dict[str, float] = field(default_factory=dict)
    bound: float = 0.0
    failed: infeasible.Reason | None = None
    memory: _Memory = field(default_factory=_Memory)
    no_plan: str = "no plan in time"  # why a phase has no finite latency


def search_workload(
    workload: Workload,
    system: System,
    execution: ExecutionOptions,
    options: SolverOptions,
    scenario: str = "",
    progress: Callable[[SearchProgress], None] | None = None,
    start_with: tuple[str, str] | None = None,
) -> Plan:
    """The best plan over every parallel choice (solver.api.solve_workload); `start_with`:
    training_space.start_with."""
    if execution.cost_model == "dfmodel":
        return search_dfmodel(workload, system, execution, options, scenario, progress)
    search = _OuterSearch(workload, system, execution, options, time.perf_counter())
    limits = infeasible.limits_of(workload, system)
    choices = enumerate_choices(
        system,
        limits.max_tp,
        limits.max_pp,
        limits.max_dp,
        allow_dp=limits.allow_dp,
        cp=workload.context_parallel,
        ep=workload.expert_parallel,
    )
    candidates = training_space.expand(workload, choices)
    if not candidates:
        raise infeasible.no_layout(workload, system, limits)
    bounds = training_space.ordered_bounds(candidates, system, execution)
    bounds = training_space.start_with(bounds, start_with)
    search.bounds = bounds
    search.group_sizes = training_space.group_sizes(candidates)
    stop: KeyboardInterrupt | None = None
    try:
        if progress is not None:  # from the start: the first choice and its roofline bound
            progress(search.progress())
        for lb, _, candidate in bounds:
            solves = search.graph_solves
            settled = search.settle(lb, candidate)
            if settled and progress is not None:
                progress(search.progress())
            if not settled and search.graph_solves == solves:  # graph-bound prunes count too
                continue
            if 0 < options.time_limit_s < time.perf_counter() - search.t0:
                search.statuses.append("time_limit")
                search.stops.append("time_limit")
                break
    except KeyboardInterrupt as signal:  # Ctrl-C / SIGTERM: keep the best plan found
        if search.best is None:
            raise
        search.statuses.append("interrupted")
        search.stops.insert(0, "interrupted")
        stop = signal
    if search.best is None:
        search.raise_no_plan(limits)
    stats = search.solve_stats()
    plan = build_plan(system, execution, search.best, stats, search.results, scenario)
    if stop is not None:
        raise Interrupted(plan) from stop
    return plan


@dataclass
class _OuterSearch:
    """What the outer search has found so far over the candidates (`bounds`: each parallel
    choice with its training knobs, and its roofline bound, in the order they are settled)."""

    workload: Workload
    system: System
    execution: ExecutionOptions
    options: SolverOptions
    t0: float
    bounds: list[tuple[float, int, Candidate]] = field(default_factory=list)
    group_sizes: dict[tuple, int] = field(default_factory=dict)  # training_space.group_key
    cache: dict[tuple, tuple[MappingProblem, GraphSolution]] = field(default_factory=dict)
    problems: dict[tuple, MappingProblem] = field(default_factory=dict)
    # per problem build (build_key): (parameter cap, optimal solution) of each solve
    capped: dict[tuple, list[tuple[float, GraphSolution]]] = field(default_factory=dict)
    best: Solved | None = None
    results: list[ChoiceResult] = field(default_factory=list)
    infeasible_reasons: list[tuple[infeasible.Reason, str]] = field(default_factory=list)
    milps: int = 0
    graph_solves: int = 0  # graph searches run (cache misses), for the time-limit check
    num_vars: int = 0
    num_binaries: int = 0
    num_rows: int = 0
    build_s: float = 0.0
    statuses: list[str] = field(default_factory=list)
    # proven lower bounds of the choices not pruned by the best plan, and how many of them
    # stopped at the time limit before a first plan
    open_bounds: list[float] = field(default_factory=list)
    no_plan: int = 0
    # why graph searches stopped short of a proof ("time_limit", "path_cap"), and the
    # restricted fusion spaces searched (empty: every legal configuration assignment)
    stops: list[str] = field(default_factory=list)
    spaces: list[str] = field(default_factory=list)
    # which solvers proved the graphs' solutions (solver.search.exact_first.solved_by)
    solvers: set[str] = field(default_factory=set)

    def settle(self, lb: float, candidate: Candidate) -> bool:
        """Prune, reject or solve one candidate; True when it was solved (or ran out of time)."""
        workload, choice, system = candidate.workload, candidate.choice, self.system
        deg = {k.lower(): v for k, v in choice.degrees}

        def result(latency: float | None, status: str, reason: str = "") -> None:
            knobs = training_space.describe(workload)
            self.results.append(
                ChoiceResult(deg, choice.describe(), lb, latency, status, reason, knobs)
            )

        if self.best is not None and lb >= self.best.times.latency_s * (1 - 1e-9):
            result(None, "pruned")
            return False
        failed = training_space.memory_floor_reason(candidate, system.dram.capacity_bytes)
        if failed is None and self.beaten_by_graph_bound(candidate):
            result(None, "pruned", "graph bound")
            return False
        if failed is None:
            phases = self.solve_phases(candidate)
            solutions, phase_latency, memory = phases.solutions, phases.latency, phases.memory
            failed = phases.failed
        if failed is not None:
            knobs = training_space.describe(workload)
            where = choice.describe() + (f"; {knobs}" if knobs else "")
            self.infeasible_reasons.append((failed, where))
            result(None, "infeasible", failed.text)
            return False
        if all(math.isfinite(v) for v in phase_latency.values()):
            hidden = self.execution.comm_hidden_share
            times = step_times(workload, choice, phase_latency, system, *memory.step, hidden)
            result(times.latency_s, "solved")
            self.open_bounds.append(phases.bound)
            if self.best is None or times.latency_s < self.best.times.latency_s:
                self.best = Solved(workload, choice, times, solutions, memory.use, phases.bound)
        else:  # stopped at the time limit without a plan: only its bounds are known
            self.no_plan += 1
            self.statuses.append("time_limit")
            result(None, "pruned", phases.no_plan)
            self.open_bounds.append(max(lb, phases.bound))
        return True

    def beaten_by_graph_bound(self, candidate: Candidate) -> bool:
        """True when the candidate's step, assembled from its graphs' proven bounds with
        weights free (`training_space.FREE_WEIGHTS`), cannot beat the best plan. Worth it
        only for a group of candidates that share graphs, TP and placement (they differ in
        ZeRO stage or interleaving): one relaxed solve serves them all."""
        if self.best is None or self.group_sizes.get(training_space.group_key(candidate), 0) < 2:
            return False
        workload, choice = candidate.workload, candidate.choice
        tp, spans = choice.degree("TP"), spans_key(choice.spans)
        micro_batches = micro_batches_of(workload, choice)
        free = training_space.FREE_WEIGHTS
        problems = self.phase_problems(workload, choice, free, micro_batches)
        if not isinstance(problems, dict):
            return False
        bounds = {}
        for phase in workload.phases:
            key = (id(phase.graph), tp, spans, free, micro_batches, math.inf)
            _, sol = self.solve_cached(key, problems[phase.name])
            self.remember(build_key(phase, choice, micro_batches), problems[phase.name], sol)
            bounds[phase.name] = sol.bound_s if sol.bound_s < math.inf else 0.0
        lb = bound_of(workload, choice, bounds, self.system, self.execution.comm_hidden_share)
        return lb >= self.best.times.latency_s * (1 - 1e-9)

    def reuse(self, build: tuple, key: tuple, problem: MappingProblem) -> None:
        """Problems of one build (`build_key`) differ only in the memory row, sum of the
        stored parameters <= cap = budget / bytes per parameter. An optimum found under
        cap c1 that stores s1 <= c2 <= c1 parameters is optimal under c2 too (a smaller
        feasible set that still holds it; its bound stays valid): cached under `key`
        instead of a second solve. The relaxation of beaten_by_graph_bound is such a
        solve with no cap (the step, not the menus, pays what weights cost beyond bytes)."""
        if key in self.cache:
            return
        cap = param_cap(problem)
        for cap1, sol in self.capped.get(build, ()):
            if cap <= cap1 and stored_params(problem, sol.choice) <= cap * (1 + 1e-9):
                self.cache[key] = (problem, sol)
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
        rule = weight_rule(workload, choice)
        micro_batches = micro_batches_of(workload, choice)
        problems = self.phase_problems(workload, choice, rule, micro_batches)
        if not isinstance(problems, dict):
            return _Phases(failed=problems)
        least = {name: least_stored(problem) for name, problem in problems.items()}
        rest = assemble.unmapped_params(workload) / (tp * pp)
        floor = sum(assemble.stored_params(workload, pp, least).values()) + rest
        memory = assemble.memory_use(workload, choice, capacity, floor)
        if memory.total > capacity * (1 + 1e-9):
            return _Phases(failed=infeasible.dram_reason(memory))
        instances = {p.name: stages.instances_per_stage(p, pp) for p in workload.phases}
        layout = dram_split.Layout(
            workload.phases,
            instances,
            least,
            rule.bytes_per_param,
            capacity - memory.total,
            rest,
            pp,
        )

        def solve(phase: Phase, cap: float) -> tuple[MappingProblem, GraphSolution]:
            return self.solve_at(phase, choice, rule, micro_batches, problems[phase.name], cap)

        tops: dict[str, dram_split.Point] = {}
        latency: dict[str, float] = {}
        bounds: dict[str, float] = {}
        for phase in workload.phases:
            cap = layout.top_cap(phase)
            problem, sol = solve(phase, cap)
            bounds[phase.name] = sol.bound_s if sol.bound_s < math.inf else 0.0
            latency[phase.name] = math.inf
            if sol.status == "infeasible":
                unbudgeted = partial(solve, phase, math.inf)  # the graph without DRAM row
                failed = infeasible.phase_reason(problem, phase.name, memory, sol, unbudgeted)
                if failed is not None:
                    return _Phases(failed=failed)
                if sol.bound_s == math.inf:  # proven infeasible, yet no resource binds
                    self.stops.append(infeasible.UNEXPLAINED)
                continue
            tops[phase.name] = dram_split.point(cap, problem, sol)
            latency[phase.name] = sol.objective_s
        if len(tops) < len(workload.phases) or not all(map(math.isfinite, latency.values())):
            hidden = self.execution.comm_hidden_share
            bound = bound_of(workload, choice, bounds, self.system, hidden)
            return _Phases(latency=latency, bound=bound)
        return self.split(candidate, layout, tops, solve)

    def split(
        self,
        candidate: Candidate,
        layout: dram_split.Layout,
        tops: dict[str, dram_split.Point],
        solve: dram_split.Solve,
    ) -> _Phases:
        """The graphs' DRAM split (solver.search.dram_split) as the candidate's phases; a
        split not proven optimal is recorded as a search stopped short of a proof."""
        workload, choice, system = candidate.workload, candidate.choice, self.system
        capacity = system.dram.capacity_bytes

        def evaluate(latency: dict, stored: float | None, weights: StepWeights | None) -> float:
            hidden = self.execution.comm_hidden_share
            return step_times(workload, choice, latency, system, stored, weights, hidden).latency_s

        split = dram_split.split_dram(layout, tops, solve, evaluate, self.options.gap)
        if not split.chosen:  # no plans of the graphs fit together
            least = assemble.memory_use(workload, choice, capacity, split.stored_per_chip)
            return _Phases(failed=infeasible.dram_reason(least))
        for pt in split.chosen.values():
            self.statuses.append(pt.sol.status)
        if not split.proven:
            self.statuses.append("split")
            self.stops.append(dram_split.STOP)
        total = split.stored_per_chip
        memory = assemble.memory_use(workload, choice, capacity, total)
        if memory.total > capacity * (1 + 1e-9):
            # defence in depth (the split prices storage as memory_use does): no plan, no proof
            self.stops.append(infeasible.SPLIT_OVER)
            over = "DRAM split over capacity (a search defect)"
            return _Phases(
                latency=dict.fromkeys(split.chosen, math.inf), bound=split.bound_s, no_plan=over
            )
        return _Phases(
            {name: (pt.problem, pt.sol) for name, pt in split.chosen.items()},
            {name: pt.sol.objective_s for name, pt in split.chosen.items()},
            split.bound_s,
            None,
            _Memory(memory, total, split.weights_per_chip),
        )

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
                    phase.graph, self.system, choice, self.execution, micro_batches, rule
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
            sol = solve_graph_memo(problem, self.options.remaining(self.t0), solve_graph)
            self.graph_solves += 1
            self.count(sol)
            if sol.stats.stop:
                self.stops.append(sol.stats.stop)
            for space in (sol.stats.space, problem.sampled_space()):
                if space and space not in self.spaces:
                    self.spaces.append(space)
            self.cache[key] = (problem, sol)
        return self.cache[key]

    def count(self, sol: GraphSolution) -> None:
        self.solvers.add(solved_by(sol, self.options.name))
        self.milps += sol.stats.milps
        self.num_vars = max(self.num_vars, sol.stats.num_vars)
        self.num_binaries = max(self.num_binaries, sol.stats.num_binaries)
        self.num_rows = max(self.num_rows, sol.stats.num_rows)
        self.build_s += sol.stats.build_s

    def progress(self) -> SearchProgress:
        unsolved = [b for b, _, _ in self.bounds[len(self.results) :]]
        return SearchProgress(
            len(self.results),
            len(self.bounds),
            self.best.times.latency_s if self.best is not None else math.inf,
            min([*self.open_bounds, *unsolved], default=0.0),
        )

    def raise_no_plan(self, limits: infeasible.Limits) -> None:
        workload = self.workload
        stopped = self.no_plan > 0 or not self.infeasible_reasons
        counts = (self.no_plan, len(self.bounds), self.options.time_limit_s)
        text = infeasible.no_plan_text(self.statuses, self.stops, stopped, *counts)
        if text is not None:
            raise NoPlanError(text)
        suggest = (
            limits if workload.kind in ("training", "inference") else infeasible.any_tp(limits)
        )
        least = training_space.least_memory(workload)  # the layout suggestion's knobs
        infeasible.raise_infeasible(self.infeasible_reasons, least, self.system, suggest)

    def solve_stats(self) -> SolveStats:
        """The search's statistics; choices never reached are listed as pruned."""
        best, bounds, results = self.best, self.bounds, self.results
        assert best is not None
        solve_s = time.perf_counter() - self.t0
        status = "optimal" if all(s == "optimal" for s in self.statuses) else "time_limit"
        status = "interrupted" if "interrupted" in self.statuses else status
        # The proven bound: pruned choices have a roofline bound >= the best plan; every
        # other choice contributes its proven bound, and a choice never reached (time
        # limit) its roofline bound.
        unexplored = [lb for lb, _, _ in bounds[len(results) :]]
        proven = proven_bound(best, self.system, self.execution.comm_hidden_share)
        bound_latency = min([proven, *self.open_bounds, *unexplored])
        gap = max(0.0, (best.times.latency_s - bound_latency) / best.times.latency_s)
        if status != "optimal" and len(results) < len(bounds):
            why = status.replace("_", " ")
            for lb, _, cand in bounds[len(results) :]:
                deg = {k.lower(): v for k, v in cand.choice.degrees}
                knobs = training_space.describe(cand.workload)
                results.append(
                    ChoiceResult(deg, cand.choice.describe(), lb, None, "pruned", why, knobs)
                )
        return SolveStats(
            status=status,
            objective=best.times.latency_s,
            bound=bound_latency,
            gap=gap,
            solve_time_s=solve_s,
            build_time_s=self.build_s,
            num_vars=self.num_vars,
            num_binaries=self.num_binaries,
            num_rows=self.num_rows,
            milps_solved=self.milps,
            choices_total=len(bounds),
            choices_solved=sum(r.status == "solved" for r in results),
            choices_pruned=sum(r.status == "pruned" for r in results),
            choices_infeasible=sum(r.status == "infeasible" for r in results),
            fusion_search=self.fusion_search(),
            stop_reason=self.stop_reason(status),
            search_space="; ".join(self.spaces) if self.spaces else "all",
            solver="+".join(sorted(self.solvers)) or self.options.name,
        )

    def stop_reason(self, status: str) -> str:
        """ "proof" when optimal; else what stopped a search first: the time limit wins
        over the path cap (`SolverOptions.max_paths`)."""
        if status == "optimal":
            return "proof"
        if status == "interrupted":
            return "interrupted"
        if "time_limit" in self.stops or not self.stops:
            return "time_limit"
        return self.stops[0]

    def fusion_search(self) -> str:
        return fusion_search_text(self.execution.dataflow, self.spaces)
