"""Intervals for held-out results that account for every source of variance in a study.

A study plays the *same* T held-out tasks with policies from S training runs (seeds). Its numbers form a
seeds x tasks grid ``y[s][t]`` (an outcome, or a paired difference of two policies), and the grid has two
crossed sources of variance: which training run you got (a seed effect, shared by all its tasks) and which
tasks were drawn (a task effect, shared by all seeds). Treating the S*T cells as independent draws, as a
pooled Wilson or normal interval does, ignores both correlations and is too narrow whenever runs differ.

- :func:`crossed_interval`: the primary interval, a two-way crossed random-effects model (method of
  moments, Satterthwaite degrees of freedom); with one seed it is the paired t interval over tasks, and
  says that run-to-run variance is not in it.
- :func:`seed_t_interval`: Student's t over the S per-seed means, the simplest honest interval.
- :func:`mcnemar_exact_p`: the exact McNemar test of two policies on one seed's tasks.
- :func:`paired_comparison`: all of the above for two policies on a grid of (seed, task) outcomes.
- :func:`no_spread_interval`: where every cell of a 0/1 grid is equal (every seed lost every task), the
  models above have no spread to estimate; the Wilson interval over the tasks bounds it instead of the point
  (:func:`bounded_crossed_interval`, which the comparisons use).
- :func:`wilson_interval` (one policy, one seed, tasks independent) and :func:`pass_at_k_summary` (a
  bootstrap over tasks), for ``turngym eval``.

Hand-written on scipy's distributions: statsmodels' mixed models fit by (RE)ML with iterative optimisers
whose edge cases (a zero variance component, three seeds) would need more code to guard than the closed
form below, and the balanced crossed design has exact expected mean squares.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

CROSSED = "seeds x tasks random effects (Satterthwaite t)"
TASKS_ONLY = "t over tasks (one seed: run-to-run variance not measured)"
SEEDS_T = "t over seed means"


@dataclass(frozen=True)
class Interval:
    """A mean with a two-sided interval; ``df`` of the t quantile used (None: no spread to estimate)."""

    mean: float
    low: float
    high: float
    method: str
    se: float = 0.0
    df: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _t_interval(mean: float, variance: float, df: float | None, level: float, method: str) -> Interval:
    if variance <= 0 or df is None or df <= 0:
        return Interval(mean, mean, mean, method, 0.0, None)
    from scipy import stats  # imported here: scipy.stats costs half a second, and `import turngym` need not pay it

    se = math.sqrt(variance)
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    return Interval(mean, mean - half, mean + half, method, se, df)


def _check_grid(grid: Sequence[Sequence[float]]) -> tuple[int, int]:
    if not grid or not grid[0]:
        raise ValueError("an interval needs at least one seed and one task")
    widths = {len(row) for row in grid}
    if len(widths) != 1:
        raise ValueError(f"every seed must have played the same tasks: rows of lengths {sorted(widths)}")
    return len(grid), len(grid[0])


def crossed_interval(grid: Sequence[Sequence[float]], level: float = 0.95) -> Interval:
    r"""The mean of a seeds x tasks grid with an interval for both run-to-run and task-sampling variance.

    Model (two-way crossed random effects, balanced, one value per cell):

        y_st = mu + a_s + b_t + e_st,   a_s ~ (0, s2_seed), b_t ~ (0, s2_task), e_st ~ (0, s2_e)

    With S seeds, T tasks, row means y_s., column means y_.t and grand mean y:

        MS_seed = T / (S-1)          * sum_s (y_s. - y)^2                       E = s2_e + T s2_seed
        MS_task = S / (T-1)          * sum_t (y_.t - y)^2                       E = s2_e + S s2_task
        MS_e    = 1 / ((S-1)(T-1))   * sum_st (y_st - y_s. - y_.t + y)^2        E = s2_e

        Var(y) = s2_seed / S + s2_task / T + s2_e / (S T)  =  (MS_seed + MS_task - MS_e) / (S T)

    Each variance component is floored at 0 (a mean square below MS_e adds nothing), so the estimate is
    V = (MS_e + max(MS_seed - MS_e, 0) + max(MS_task - MS_e, 0)) / (S T). The interval is
    y -+ t_{nu} sqrt(V), with Satterthwaite's nu = (sum_i c_i MS_i)^2 / sum_i (c_i MS_i)^2 / nu_i over
    the mean squares kept (nu_seed = S-1, nu_task = T-1, nu_e = (S-1)(T-1)). With few seeds, nu is
    small whenever runs disagree, and the interval is as wide as the seeds make it.

    One seed (S = 1): the paired t interval over tasks, V = sum_t (y_t - y)^2 / (T (T-1)), nu = T-1;
    one task (T = 1): t over seeds. A grid without spread gives the point.
    """
    n_seeds, n_tasks = _check_grid(grid)
    grand = sum(map(sum, grid)) / (n_seeds * n_tasks)
    if n_seeds == 1 or n_tasks == 1:
        values = [v for row in grid for v in row]
        n = len(values)
        if n < 2:
            return Interval(grand, grand, grand, TASKS_ONLY, 0.0, None)
        variance = sum((v - grand) ** 2 for v in values) / (n * (n - 1))
        return _t_interval(grand, variance, n - 1, level, TASKS_ONLY if n_seeds == 1 else SEEDS_T)
    seed_means = [sum(row) / n_tasks for row in grid]
    task_means = [sum(row[t] for row in grid) / n_seeds for t in range(n_tasks)]
    df_seed, df_task = n_seeds - 1, n_tasks - 1
    df_e = df_seed * df_task
    ms_seed = n_tasks * sum((m - grand) ** 2 for m in seed_means) / df_seed
    ms_task = n_seeds * sum((m - grand) ** 2 for m in task_means) / df_task
    ms_e = sum((grid[s][t] - seed_means[s] - task_means[t] + grand) ** 2
               for s in range(n_seeds) for t in range(n_tasks)) / df_e
    keep_seed, keep_task = ms_seed > ms_e, ms_task > ms_e  # a component estimated below 0 is 0
    terms = [(1.0 - keep_seed - keep_task, ms_e, df_e), (float(keep_seed), ms_seed, df_seed),
             (float(keep_task), ms_task, df_task)]  # (coefficient, mean square, its degrees of freedom)
    total = sum(c * ms for c, ms, _ in terms)
    denominator = sum((c * ms) ** 2 / df for c, ms, df in terms)
    df = total ** 2 / denominator if denominator else None
    return _t_interval(grand, total / (n_seeds * n_tasks), df, level, CROSSED)


def seed_t_interval(seed_means: Sequence[float], level: float = 0.95) -> Interval | None:
    r"""Student's t over S per-seed means m_s: m -+ t_{S-1} sd(m_s) / sqrt(S). None for one seed.

    It treats each training run as one observation, whatever the number of tasks: exact under normal
    seed means, and wide with 3 seeds (t_2 = 4.30) because 3 runs say little about run-to-run spread.
    """
    n = len(seed_means)
    if n < 2:
        return None
    mean = sum(seed_means) / n
    variance = sum((m - mean) ** 2 for m in seed_means) / (n - 1) / n
    return _t_interval(mean, variance, n - 1, level, SEEDS_T)


def mcnemar_exact_p(gained: int, lost: int) -> float:
    """Two-sided exact McNemar p of two policies on the same tasks: ``gained`` tasks only the first wins,
    ``lost`` only the second. Under no difference each discordant task is a fair coin:
    p = P(|Binomial(gained + lost, 1/2) - n/2| >= |gained - n/2|) (scipy's exact binomial test); 1 if none."""
    from scipy import stats

    n = gained + lost
    if n == 0:
        return 1.0
    return float(stats.binomtest(gained, n, 0.5).pvalue)


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion p = k / n:

        centre = (p + z^2 / 2n) / (1 + z^2 / n)
        half   = z * sqrt(p (1 - p) / n + z^2 / 4n^2) / (1 + z^2 / n)

    Unlike the normal approximation it stays inside [0, 1] and is sensible at k = 0 or k = n.
    """
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)



def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task from ``n`` samples of which ``c`` passed (Chen et al. 2021, eq. 1):

        pass@k = 1 - C(n - c, k) / C(n, k)
               = 1 - prod_{i = n - c + 1}^{n} (1 - k / i)        (the same, as a stable product)

    the probability that at least one of k samples drawn without replacement from the n passed.
    It is 1 when n - c < k (every k-subset holds a pass) and 0 when c = 0. The product never forms
    the binomial coefficients, which overflow floats for large n.
    """
    if n < 1 or not 0 <= c <= n:
        raise ValueError(f"pass@k needs n >= 1 samples and 0 <= c <= n passes, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n = {n} samples per task")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


@dataclass
class PassAtK:
    """pass@k over a panel: the mean of the per-task unbiased estimates, with its 95 % bootstrap interval."""

    k: int
    estimate: float
    ci95: tuple[float, float]
    tasks: int
    samples_per_task: int  # the smallest n over the tasks


def pass_at_k_summary(passes: Mapping[Any, Sequence[bool]], k: int, *, resamples: int = 2000,
                      seed: int = 0) -> PassAtK:
    """pass@k of a panel from each task's sample outcomes (``task -> [won, ...]``).

        pass@k = (1/T) sum_t pass@k(n_t, c_t)          (:func:`pass_at_k` per task, then the mean)

    The 95 % interval is a percentile bootstrap over *tasks*: ``resamples`` times, draw T tasks with
    replacement and take the mean of their per-task estimates; the interval is the 2.5 and 97.5
    percentiles of those means. Resampling tasks (not episodes) keeps each task's n samples together,
    so the interval covers both the task sample and the sampling noise within tasks. The generator
    is seeded: the same outcomes give the same interval. With fewer than two tasks there is nothing
    to resample and the interval is the whole range [0, 1]; where every task's pass@k is 0 (or every one 1),
    resampling gives the point, and the interval is Wilson's over the T tasks instead (as
    :func:`no_spread_interval`).
    """
    import numpy as np

    if not passes:
        raise ValueError("pass@k needs at least one task")
    n_min = min(len(outcomes) for outcomes in passes.values())
    if not 1 <= k <= n_min:
        raise ValueError(f"pass@{k} needs at least {k} samples of every task; the fewest here is {n_min} "
                         f"(raise samples_per_task to {k} or more)")
    per_task = np.array([pass_at_k(len(o), sum(map(bool, o)), k) for o in passes.values()])
    estimate = float(per_task.mean())
    if len(per_task) < 2:
        return PassAtK(k, estimate, (0.0, 1.0), len(per_task), n_min)
    if set(per_task.tolist()) in ({0.0}, {1.0}):  # every task failed (or passed) every draw: no spread to resample
        return PassAtK(k, estimate, wilson_interval(round(estimate) * len(per_task), len(per_task)), len(per_task),
                       n_min)
    rng = np.random.default_rng(seed)
    means = per_task[rng.integers(0, len(per_task), size=(resamples, len(per_task)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return PassAtK(k, estimate, (float(low), float(high)), len(per_task), n_min)


NO_SPREAD = "Wilson over tasks (no spread over seeds x tasks: every cell equal)"


def no_spread_interval(value: float, n_tasks: int, level: float = 0.95, span: float = 1.0
                       ) -> tuple[float, float] | None:
    r"""A bound for a grid of 0/1 outcomes (or of their differences, -1/0/1) whose every cell equals ``value``,
    where the variance models above have no spread to estimate and give the point.

    All seeds agree on every task, so the T tasks are the only independent draws: the share of tasks with that
    outcome, k = T, has the Wilson interval (l, u) = wilson(T, T) at the level's z for the rate of ``value``
    among tasks, and

        value = 1:  [l, 1]        value = 0:  [-(1 - l), 1 - l]        value = -1: [-1, -l]

    For a difference that is 0 everywhere, 1 - l bounds the share of tasks where the two policies differ
    (1 - l is wilson(0, T)'s upper end: 16.1 % at T = 20 and 95 %). A contrast whose cells can reach +-``span``
    (an interaction of four arms: 2) that is 0 everywhere gets +-span (1 - l). None for any other value."""
    if n_tasks < 1 or (span != 1.0 and value != 0.0) or value not in (-1.0, 0.0, 1.0):
        return None
    from scipy import stats

    z = 1.96 if level == 0.95 else float(stats.norm.ppf(0.5 + level / 2))  # 1.96: as every Wilson cell beside it
    low, _ = wilson_interval(n_tasks, n_tasks, z=z)
    if value == 1.0:
        return low, 1.0
    if value == -1.0:
        return -1.0, -low
    return -span * (1.0 - low), span * (1.0 - low)


def bounded_crossed_interval(grid: Sequence[Sequence[float]], level: float = 0.95, span: float = 1.0) -> Interval:
    """:func:`crossed_interval`, except for a grid of one value in -1, 0 or 1 (every pair tied, or every task won
    by one side on every seed): there the point says nothing of the tasks not drawn, and the interval is
    :func:`no_spread_interval`'s (method :data:`NO_SPREAD`). ``span``: the largest |cell| the contrast allows."""
    interval = crossed_interval(grid, level)
    constant = _constant(grid)
    bound = no_spread_interval(constant, len(grid[0]), level, span) if constant is not None else None
    return interval if bound is None else Interval(interval.mean, bound[0], bound[1], NO_SPREAD)


def _constant(grid: Sequence[Sequence[float]]) -> float | None:
    values = {v for row in grid for v in row}
    return values.pop() if len(values) == 1 else None


def complete_grid(by_seed: Mapping[Any, Mapping[Any, float]]) -> tuple[list[Any], list[Any], list[list[float]]]:
    """Seeds, tasks and the grid of values over the tasks every seed played (sorted, for a stable order)."""
    seeds = sorted(by_seed, key=str)
    shared = set.intersection(*(set(by_seed[s]) for s in seeds)) if seeds else set()
    tasks = sorted(shared, key=str)
    return seeds, tasks, [[float(by_seed[s][t]) for t in tasks] for s in seeds]


def paired_comparison(a: Mapping[Any, Mapping[Any, float]], b: Mapping[Any, Mapping[Any, float]],
                      level: float = 0.95) -> dict[str, Any]:
    """Policy a against policy b, each given as {seed: {task: success}} on the same held-out tasks.

    The difference d_st = a_st - b_st on every (seed, task) both played, then: the mean with the
    :func:`crossed_interval` (``ci95``, the primary interval), the :func:`seed_t_interval`, the
    difference per seed, the tasks gained and lost, and per seed the exact McNemar p (outcomes 0/1). A grid
    whose every pair has the same difference (-1, 0 or 1: e.g. both policies lost every task on every seed) has
    no spread for either model; its ``ci95`` is then :func:`no_spread_interval`'s Wilson bound over the tasks.
    """
    seeds = [s for s in a if s in b]
    by_seed = {s: {t: a[s][t] - b[s][t] for t in a[s] if t in b[s]} for s in seeds}
    seeds, tasks, grid = complete_grid(by_seed)
    if not tasks:
        return {"mean": 0.0, "ci95": [-1.0, 1.0], "method": "no shared (seed, task) pairs", "pairs": 0,
                "seeds": len(seeds), "tasks": 0, "per_seed": {}, "seed_t_ci95": None, "gained": 0, "lost": 0,
                "mcnemar_p": {}}
    primary = bounded_crossed_interval(grid, level)
    per_seed = {s: sum(row) / len(row) for s, row in zip(seeds, grid, strict=True)}
    seed_t = seed_t_interval(list(per_seed.values()), level)
    gained = {s: sum(d > 0 for d in row) for s, row in zip(seeds, grid, strict=True)}
    lost = {s: sum(d < 0 for d in row) for s, row in zip(seeds, grid, strict=True)}
    return {
        "mean": primary.mean, "ci95": [primary.low, primary.high], "method": primary.method, "df": primary.df,
        "pairs": len(seeds) * len(tasks), "seeds": len(seeds), "tasks": len(tasks),
        "per_seed": per_seed,
        "seed_t_ci95": [seed_t.low, seed_t.high] if seed_t else None,
        "gained": sum(gained.values()), "lost": sum(lost.values()),
        "mcnemar_p": {s: mcnemar_exact_p(gained[s], lost[s]) for s in seeds},
    }


def success_interval(by_seed: Mapping[Any, Mapping[Any, float]], level: float = 0.95) -> dict[str, Any]:
    """One policy's success over {seed: {task: success}}: with several seeds the :func:`crossed_interval`
    (the tasks every seed played), or, when every seed won (or lost) every task, the Wilson interval over the
    tasks (:func:`bounded_crossed_interval`: the crossed model has no spread and would give the point), clipped
    to [0, 1]; with one seed, the Wilson interval, which assumes independent tasks."""
    seeds, tasks, grid = complete_grid(by_seed)
    if len(seeds) == 1 and tasks:
        outcomes = grid[0]
        if all(v in (0.0, 1.0) for v in outcomes):
            low, high = wilson_interval(int(sum(outcomes)), len(outcomes))
            return {"ci95": [low, high], "method": "Wilson (one seed; tasks independent)"}
    if not tasks:
        return {"ci95": [0.0, 1.0], "method": "no tasks"}
    interval = bounded_crossed_interval(grid, level)  # all 0 (or all 1): Wilson's over the tasks, once clipped
    return {"ci95": [max(0.0, interval.low), min(1.0, interval.high)], "method": interval.method}
