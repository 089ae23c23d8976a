"""A MILP as plain arrays, solved by HiGHS directly or through Pyomo.

The fusion search solves hundreds of small segment MILPs; building each as a Pyomo model
costs more than HiGHS takes to solve it (measured: ~20 ms of Pyomo per 2 ms of HiGHS on the
DFModel GPT-3 segments). So a model is written once as rows and columns (`LinearModel`) and
handed either to HiGHS's own Python interface (`backend="highs"`, the default for segment
pricing) or to Pyomo with any MILP solver it knows (`backend="pyomo"`, the user's
`solver.name`). Both read the same arrays, so the two can be compared in tests.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

INF = math.inf


@dataclass
class LinearModel:
    """min cost·x subject to lower <= A x <= upper on rows, bounds on columns."""

    cost: list[float] = field(default_factory=list)
    col_lower: list[float] = field(default_factory=list)
    col_upper: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    rows: list[tuple[dict[int, float], float, float]] = field(default_factory=list)
    row_names: list[str] = field(default_factory=list)  # one per row ("" when unnamed)

    def add_col(self, cost: float = 0.0, lower: float = 0.0, upper: float = INF, integer=False):
        self.cost.append(cost)
        self.col_lower.append(lower)
        self.col_upper.append(upper)
        self.integer.append(integer)
        return len(self.cost) - 1

    def add_row(
        self, terms: dict[int, float], lower: float = -INF, upper: float = INF, name: str = ""
    ) -> None:
        """A row (dropped when it has no nonzero term); `name` labels it for inspection."""
        terms = {j: v for j, v in terms.items() if v != 0.0}
        if not terms:
            return
        self.rows.append((terms, lower, upper))
        self.row_names.append(name)

    @property
    def num_cols(self) -> int:
        return len(self.cost)

    @property
    def num_integer(self) -> int:
        return sum(self.integer)


@dataclass(frozen=True)
class LinearResult:
    status: str  # "optimal" | "time_limit" (stopped by a limit) | "infeasible" | "error"
    objective: float  # inf when no solution was found
    bound: float
    values: tuple[float, ...]
    solve_s: float
    # which limit stopped a "time_limit" run: "time_limit" (the wall-clock valve) or
    # "node_limit" (the node budget: the same stop on every machine); "" otherwise
    stop: str = ""


def solve(
    model: LinearModel,
    gap: float,
    time_limit_s: float = 0.0,
    node_limit: int = 0,
    backend: str = "highs",
    solver_name: str = "highs",
    threads: int = 1,
    start: dict[int, float] | None = None,
    cutoff: float = INF,
) -> LinearResult:
    """`node_limit`: branch-and-bound nodes (0 = none), the budget that decides where a
    hard MILP stops; `time_limit_s` only a safety valve (0 = none). `start`: values of
    some columns from a known solution, a warm start (HiGHS completes the other columns;
    the Pyomo path ignores it). `cutoff`: only solutions below it are of interest (HiGHS
    prunes nodes with it; the result may be no solution, or one above)."""
    if backend == "highs":
        return _solve_highspy(model, gap, time_limit_s, node_limit, threads, start, cutoff)
    return _solve_pyomo(model, gap, time_limit_s, node_limit, solver_name, threads)


def _solve_highspy(
    model: LinearModel,
    gap: float,
    time_limit_s: float,
    node_limit: int,
    threads: int = 1,
    start: dict[int, float] | None = None,
    cutoff: float = INF,
) -> LinearResult:
    import highspy
    import numpy as np

    t0 = time.perf_counter()
    h = _highs(gap, time_limit_s, node_limit, threads, cutoff)
    backstop = _valve_backstop(h, t0, time_limit_s)
    lp = highspy.HighsLp()
    n = model.num_cols
    lp.num_col_ = n
    lp.num_row_ = len(model.rows)
    lp.col_cost_ = np.asarray(model.cost, dtype=float)
    lp.col_lower_ = np.asarray(model.col_lower, dtype=float)
    big = highspy.kHighsInf
    lp.col_upper_ = np.minimum(np.asarray(model.col_upper, dtype=float), big)
    lp.row_lower_ = np.maximum(np.asarray([lo for _, lo, _ in model.rows], dtype=float), -big)
    lp.row_upper_ = np.minimum(np.asarray([up for _, _, up in model.rows], dtype=float), big)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    starts, index, value = [0], [], []
    for terms, _, _ in model.rows:
        keys = sorted(terms)
        index.extend(keys)
        value.extend([terms[j] for j in keys])
        starts.append(len(index))
    lp.a_matrix_.start_ = np.asarray(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.asarray(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.asarray(value, dtype=float)
    if any(model.integer):
        if math.isfinite(cutoff) and _relaxation_meets(h, lp, cutoff):
            # nothing below the cutoff: the answer the MILP under its cutoff would give
            return LinearResult("infeasible", INF, INF, (), time.perf_counter() - t0)
        lp.integrality_ = [
            highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
            for i in model.integer
        ]
    h.passModel(lp)
    if start:
        cols = sorted(start)
        h.setSolution(
            len(cols),
            np.asarray(cols, dtype=np.int32),
            np.asarray([start[c] for c in cols], dtype=float),
        )
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    solve_s = time.perf_counter() - t0
    if status == highspy.HighsModelStatus.kInfeasible:
        return LinearResult("infeasible", INF, INF, (), solve_s)
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    bound = info.mip_dual_bound if any(model.integer) else info.objective_function_value
    if not math.isfinite(bound):
        bound = 0.0
    stop = "time_limit" if backstop["tripped"] else _stop_of(status)
    if not has_solution:  # a limit stopped it, or HiGHS failed (numerical trouble)
        if status not in _stopped_statuses():
            return LinearResult("error", INF, bound, (), solve_s)
        return LinearResult("time_limit", INF, bound, (), solve_s, stop)
    objective = info.objective_function_value
    values = tuple(h.getSolution().col_value)
    if status == highspy.HighsModelStatus.kOptimal:
        return LinearResult("optimal", objective, min(bound, objective), values, solve_s)
    return LinearResult("time_limit", objective, min(bound, objective), values, solve_s, stop)


def _highs(gap: float, time_limit_s: float, node_limit: int, threads: int, cutoff: float):
    """A HiGHS instance with this solve's options (`_solve_highspy`)."""
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("random_seed", 0)
    h.setOptionValue("mip_rel_gap", gap)
    h.setOptionValue("threads", max(1, threads))  # HiGHS keeps the first count per process
    # the feasibility-jump heuristic ran most of the root of the fusion search's segment
    # MILPs (one node each) and found nothing the root did not: off, a GPT-3 layer's MILPs
    # take 5.5-5.8 CPU-s instead of 7.2-7.4, every answer the same
    h.setOptionValue("mip_heuristic_run_feasibility_jump", False)
    if time_limit_s > 0:
        h.setOptionValue("time_limit", float(time_limit_s))
    if node_limit:
        h.setOptionValue("mip_max_nodes", int(node_limit))
    if math.isfinite(cutoff):
        h.setOptionValue("objective_bound", float(cutoff))
    return h


def _solve_pyomo(
    model: LinearModel,
    gap: float,
    time_limit_s: float,
    node_limit: int,
    solver_name: str,
    threads: int,
) -> LinearResult:
    import pyomo.environ as pyo

    t0 = time.perf_counter()
    m = pyo.ConcreteModel(name="mapshard")
    cols = range(model.num_cols)
    m.v = pyo.Var(
        cols,
        domain=lambda m, j: pyo.Integers if model.integer[j] else pyo.Reals,
        bounds=lambda m, j: (
            None if model.col_lower[j] == -INF else model.col_lower[j],
            None if model.col_upper[j] == INF else model.col_upper[j],
        ),
    )
    m.rows = pyo.ConstraintList()
    for terms, lo, up in model.rows:
        expr = sum(v * m.v[j] for j, v in sorted(terms.items()))
        m.rows.add(
            pyo.inequality(None if lo == -INF else lo, expr, None if up == INF else up)
            if lo != up
            else expr == lo
        )
    m.obj = pyo.Objective(
        expr=sum(c * m.v[j] for j, c in enumerate(model.cost) if c), sense=pyo.minimize
    )
    solver = pyomo_solver(solver_name)
    options: dict[str, object] = {"mip_rel_gap": gap, "random_seed": 0, "output_flag": False}
    if node_limit:
        options["mip_max_nodes"] = node_limit
    kwargs: dict[str, object] = {"threads": threads, "solver_options": options}
    if time_limit_s > 0:
        kwargs["time_limit"] = time_limit_s
    if solver_name != "highs":
        kwargs["solver_options"] = {}
    res = solver.solve(
        m, load_solutions=False, raise_exception_on_nonoptimal_result=False, **kwargs
    )
    solve_s = time.perf_counter() - t0
    term = str(res.termination_condition).lower()
    bound = res.objective_bound
    bound = 0.0 if bound is None or not math.isfinite(bound) else float(bound)
    stop = "time_limit" if "time" in term else "node_limit"
    if res.incumbent_objective is None:
        if "infeasible" in term:
            return LinearResult("infeasible", INF, INF, (), solve_s)
        return LinearResult("time_limit", INF, bound, (), solve_s, stop)
    res.solution_loader.load_vars()
    values = tuple(float(pyo.value(m.v[j], exception=False) or 0.0) for j in cols)
    objective = float(res.incumbent_objective)
    if "convergence" in term or "optimal" in term:
        return LinearResult("optimal", objective, min(bound, objective), values, solve_s)
    return LinearResult("time_limit", objective, min(bound, objective), values, solve_s, stop)


def pyomo_solver(name: str):
    """Pyomo's solver object for `name` (HiGHS through Pyomo's own interface)."""
    import pyomo.environ  # noqa: F401  (registers the solvers)
    from pyomo.contrib.solver.common.factory import SolverFactory

    return SolverFactory(name)


def _relaxation_meets(h, lp, cutoff: float) -> bool:
    """Whether the LP relaxation alone proves that no solution lies below `cutoff`: then no
    branch-and-bound is needed (most segment prices of the fusion search end so). One LP,
    deterministic; HiGHS's dual simplex may stop early once its bound passes the cutoff.
    Without presolve: on these small LPs it cost as much as the simplex itself (the fusion
    search's LP checks of a GPT-3 layer: 2.3-2.8 -> 1.2-1.4 CPU-s, every answer the same);
    the MILP that may follow on `h` presolves as usual."""
    import highspy

    m = highspy.HighsModelStatus
    h.passModel(lp)
    h.setOptionValue("presolve", "off")
    h.run()
    h.setOptionValue("presolve", "choose")
    status = h.getModelStatus()
    if status in (m.kInfeasible, m.kObjectiveBound):
        return True
    return status == m.kOptimal and h.getInfo().objective_function_value >= cutoff


# HiGHS checks its own time limit between steps, and one step can run long: a central-
# rounding or separation step of a 58,000-column fused MILP ran 40 s past a 60 s valve.
# Its interrupt callbacks (MIP, simplex, interior point) are polled inside those steps, so
# they stop the run at the valve plus this grace (its own limit normally stops it first).
VALVE_GRACE_S = 0.25


def _valve_backstop(h, t0: float, time_limit_s: float) -> dict[str, bool]:
    """Interrupt `h` once time.perf_counter() passes t0 + time_limit_s + VALVE_GRACE_S (no
    limit: nothing); the returned flag says whether it did."""
    import highspy

    state = {"tripped": False}
    if time_limit_s <= 0 or not math.isfinite(time_limit_s):
        return state
    deadline = t0 + time_limit_s + VALVE_GRACE_S

    def interrupt(_type, _message, _data_out, data_in, _user) -> None:
        if time.perf_counter() > deadline:
            state["tripped"] = True
            data_in.user_interrupt = True

    kinds = highspy.cb.HighsCallbackType
    h.setCallback(interrupt, None)
    for kind in (kinds.kCallbackMipInterrupt, kinds.kCallbackSimplexInterrupt,
                 kinds.kCallbackIpmInterrupt):  # fmt: skip
        h.startCallback(kind)
    return state


def _stop_of(status) -> str:
    """The limit a HiGHS model status names: "time_limit" (the valve), "node_limit" (the
    node budget), "" (neither: a cutoff or an interrupt)."""
    import highspy

    m = highspy.HighsModelStatus
    if status == m.kTimeLimit:
        return "time_limit"
    budgets = (getattr(m, n, None) for n in ("kSolutionLimit", "kIterationLimit"))
    return "node_limit" if status in budgets else ""


def _stopped_statuses() -> frozenset:
    """HiGHS model statuses of a search stopped by a limit (or a cutoff), not by an error."""
    import highspy

    m = highspy.HighsModelStatus
    names = ("kTimeLimit", "kIterationLimit", "kSolutionLimit", "kInterrupt", "kObjectiveBound",
             "kObjectiveTarget", "kNotset")  # fmt: skip
    return frozenset(getattr(m, n) for n in names if hasattr(m, n))


def load_backends() -> None:
    """Import the MILP stack now (Pyomo's solver registry, HiGHS), so that the first solve's
    time is the solve's; a missing backend is reported by that solve."""
    try:
        import highspy  # noqa: F401
        import pyomo.environ  # noqa: F401
    except ImportError:
        pass


def available_solvers() -> list[str]:
    """MILP solvers Pyomo's solver interface can run here."""
    import pyomo.environ  # noqa: F401
    from pyomo.contrib.solver.common.factory import SolverFactory

    names = []
    for name in sorted(SolverFactory._cls):
        try:
            if SolverFactory(name).available():
                names.append(name)
        except Exception:  # noqa: BLE001  (a broken plugin is simply not available)
            continue
    return names
