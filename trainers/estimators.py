"""The advantage-estimator registry: ``algorithm`` names one entry, and the trainer looks it up once.

An estimator turns one training step's episodes (from every process: an :class:`AdvantageBatch`) into advantages:
one per turn of every episode (``level="turn"``, the default; the trainer spreads each over the turn's model
tokens) or one per completion token (``level="token"``). It declares what it reads besides the turn rewards,
groups and anchor states every batch has: ``needs=("values",)`` gives it a critic's values (``batch.tokens[i].
values``, ``batch.turn_values(i)``), and it returns the critic's regression targets with its advantages
(:class:`Estimate`); the trainer builds the critic (:mod:`turngym.trainers.critic`) and trains it on them. PPO is
the GAE estimator plus that critic. Register your own with :func:`register_estimator` and select it with
``algorithm: <name>`` (a YAML config's ``imports`` or ``turngym train --import`` loads the module that
registers it)::

    from turngym.trainers.estimators import AdvantageBatch, register_estimator

    @register_estimator("episode_sign")
    def episode_sign(batch: AdvantageBatch, args) -> list[list[float]]:
        \"\"\"+1 on every turn of an episode that beat its group's mean return, -1 below it.\"\"\"
        means = batch.group_means(batch.returns)
        return [[float((r > m) - (r < m))] * len(t) for r, m, t in
                zip(batch.returns, means, batch.turn_rewards, strict=True)]

The trainer acts on an entry's properties (``needs_values``, ``level``), never on its name. After the estimator,
:func:`step_advantages` applies the step's options (dynamic sampling, the null control) the same way to every one.
"""

from __future__ import annotations

import difflib
import random
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import SimpleNamespace
from typing import Any

from turngym.agents.base import stable_seed
from turngym.trainers import advantages as adv
from turngym.trainers.episodes import Episode

# What estimators receive as ``args``: the run's TurnGymConfig (turngym.trainers.config, which imports this module,
# so it is not imported here).
TurnGymConfig = Any


class Algorithm(StrEnum):
    """The built-in estimators (``TurnGymConfig.algorithm``); a registered name of your own works too."""

    PPO = "ppo"
    GRPO = "grpo"
    RLOO = "rloo"
    TURN_GRPO = "turn_grpo"
    TURN_RLOO = "turn_rloo"
    GIGPO = "gigpo"


class Level(StrEnum):
    """What an estimator's rows index."""

    TURN = "turn"  # one advantage per turn, spread over the turn's model tokens
    TOKEN = "token"  # one advantage per completion token (0 on the world's tokens)


class Input(StrEnum):
    """What an estimator may need besides the turn rewards, groups and anchor states every batch carries."""

    VALUES = "values"  # a critic's values of every token's state; the estimator returns the critic's targets


@dataclass
class EpisodeTokens:
    """One episode's completion, token by token: what a token-level or value-based estimator reads.

    Token k = 0..K-1 of the completion (the model's and the world's tokens, in order); V_k is the value of the
    state before token k, V_K the value after the last one (the state a truncated episode stopped in).
    """

    env_mask: list[int]  # m_k = 1 on the model's own tokens
    turn_index: list[int]  # the turn of token k
    turn_ends: list[int]  # the last sampled token of each turn (where its reward sits)
    truncated: bool  # ended on a limit (turns, time, context), not on an outcome
    values: list[float] | None = None  # V_0..V_K (K + 1 values): with needs=("values",)
    kl: list[float] | None = None  # log pi(a_k) - log pi_ref(a_k) at sampling, when the KL goes in the reward
    kl_coef: float = 0.0  # beta

    @classmethod
    def of(cls, episode: Episode, values: Sequence[float] | None = None, kl: Sequence[float] | None = None,
           kl_coef: float = 0.0) -> EpisodeTokens:
        n = len(episode.completion_ids)
        return cls(list(episode.env_mask), list(episode.turn_index), list(episode.turn_ends), episode.truncated,
                   None if values is None else list(values[: n + 1]), None if kl is None else list(kl[:n]), kl_coef)


@dataclass
class AdvantageBatch:
    """One step's episodes, from every process, in TRL's order; episode i has turns t = 0..T_i-1.

    ``metrics``: statistics an estimator wants logged with the step (name -> value, logged as given).
    ``tokens``: each episode's tokens (and values), for token-level and value-based estimators; None otherwise.
    """

    turn_rewards: list[list[float]]  # r_{i,t}
    groups: list[Hashable]  # g(i): the episodes of one task, played in the same step, share a group
    states: list[list[str | None]]  # s_{i,t}: a key of the state turn t acted in (Episode.anchor_states)
    metrics: dict[str, float] = field(default_factory=dict)
    tokens: list[EpisodeTokens] | None = None
    # c_{i,k}: episode i's totals of its reward components over its turns (Trajectory.reward_components)
    components: list[dict[str, float]] | None = None

    @property
    def returns(self) -> list[float]:
        """R_i = sum_t r_{i,t}."""
        return [sum(r) for r in self.turn_rewards]

    def group_means(self, values: Sequence[float]) -> list[float]:
        """For each episode, the mean of ``values`` (one per episode) over its group, itself included."""
        totals: dict[Hashable, list[float]] = {}
        for value, group in zip(values, self.groups, strict=True):
            totals.setdefault(group, []).append(value)
        return [sum(totals[g]) / len(totals[g]) for g in self.groups]

    def token_rewards(self, i: int) -> list[float]:
        """r_{i,k}: each turn's reward on its last sampled token, minus beta * KL_k on the model's tokens when the
        KL to the reference goes in the reward (``kl_penalty: reward``)."""
        tokens = self._tokens(i)
        rewards = adv.token_rewards(self.turn_rewards[i], tokens.turn_ends, len(tokens.env_mask))
        if tokens.kl is None:
            return rewards
        return [r - tokens.kl_coef * k * m for r, k, m in zip(rewards, tokens.kl, tokens.env_mask, strict=False)]

    def turn_values(self, i: int) -> list[float]:
        """V(s_{i,t}): the critic's value of the state turn t acted in, read before the turn's first sampled token."""
        tokens = self._tokens(i)
        if tokens.values is None:
            raise ValueError("this batch has no values: register the estimator with needs=('values',)")
        first: dict[int, int] = {}
        for k, (turn, m) in enumerate(zip(tokens.turn_index, tokens.env_mask, strict=True)):
            if m:
                first.setdefault(turn, k)
        return [tokens.values[first.get(t, end)] for t, end in enumerate(tokens.turn_ends)]

    def _tokens(self, i: int) -> EpisodeTokens:
        if self.tokens is None:
            raise ValueError("this batch has no tokens: register the estimator with level='token' or "
                             "needs=('values',)")
        return self.tokens[i]


@dataclass
class Estimate:
    """An estimator's result: ``advantages`` (per turn or per token, by its level) and, for one that needs
    values, ``value_targets`` of the same shape: what the critic regresses V towards."""

    advantages: list[list[float]]
    value_targets: list[list[float]] | None = None


EstimatorFunction = Callable[[AdvantageBatch, TurnGymConfig], "list[list[float]] | Estimate"]


@dataclass(frozen=True)
class Estimator:
    """A registered estimator: its function and the properties the trainer and the config act on."""

    name: str
    function: EstimatorFunction
    needs: frozenset[Input] = frozenset()
    level: Level = Level.TURN

    @property
    def needs_values(self) -> bool:
        """It reads a critic's values (and returns the critic's targets): the trainer builds and trains a critic."""
        return Input.VALUES in self.needs

    needs_critic = needs_values

    @property
    def needs_tokens(self) -> bool:
        """Its batch carries each episode's tokens (:class:`EpisodeTokens`)."""
        return self.level is Level.TOKEN or self.needs_values

    @property
    def description(self) -> str:
        return (self.function.__doc__ or "").strip().split("\n")[0]

    def __call__(self, batch: AdvantageBatch, args: TurnGymConfig) -> Estimate:
        """The function's advantages (and value targets), checked to have one value per turn (or token) of every
        episode."""
        if self.needs_tokens and batch.tokens is None:
            raise ValueError(f"estimator {self.name!r} reads the episodes' tokens: this batch has none")
        found = self.function(batch, args)
        estimate = found if isinstance(found, Estimate) else Estimate(found)
        targets = None
        if self.needs_values:
            if estimate.value_targets is None:
                raise ValueError(f"estimator {self.name!r} needs values: it must return "
                                 "Estimate(advantages, value_targets), the critic's targets")
            targets = self._checked(estimate.value_targets, batch, "value target")
        return Estimate(self._checked(estimate.advantages, batch, "advantage"), targets)

    def _checked(self, rows: Iterable[Iterable[float]], batch: AdvantageBatch, what: str) -> list[list[float]]:
        rows = [[float(a) for a in row] for row in rows]
        expected = ([len(r) for r in batch.turn_rewards] if self.level is Level.TURN
                    else [len(t.env_mask) for t in batch.tokens or ()])
        if [len(a) for a in rows] != expected:
            raise ValueError(f"estimator {self.name!r} must return one {what} per {self.level.value} of every episode "
                             f"({expected} {self.level.value}s), got {[len(a) for a in rows]}")
        return rows


_REGISTRY: dict[str, Estimator] = {}


def register_estimator(name: str, *, needs: Iterable[str] = (), level: str = Level.TURN,
                       replace: bool = False) -> Callable[[EstimatorFunction], EstimatorFunction]:
    """Decorator: register ``function(batch, args)`` under ``name`` (``algorithm: name``).

    ``args`` is the run's :class:`~turngym.trainers.config.TurnGymConfig` (``gamma``, ``scale_rewards``...). The
    function returns one advantage per turn of every episode (``level="turn"``) or per completion token
    (``level="token"``), or an :class:`Estimate`. ``needs=("values",)``: the batch carries a critic's values and
    the function returns ``Estimate(advantages, value_targets)``. A name taken by another function raises unless
    ``replace=True`` (the same function defined again, as a re-run notebook cell does, replaces itself). The
    function is returned unchanged.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"an estimator's name is a plain identifier such as 'my_rloo', got {name!r}")
    try:
        wanted, level = frozenset(Input(n) for n in needs), Level(level)
    except ValueError as error:
        raise ValueError(f"estimator {name!r}: {error} (needs: {[i.value for i in Input]}; level: "
                         f"{[v.value for v in Level]})") from None

    def decorator(function: EstimatorFunction) -> EstimatorFunction:
        taken = _REGISTRY.get(str(name))
        if taken is not None and not replace and _origin(taken.function) != _origin(function):
            raise ValueError(f"estimator {name!r} is already registered (by {'.'.join(_origin(taken.function))}); "
                             "pass replace=True to override it")
        _REGISTRY[str(name)] = Estimator(str(name), function, wanted, level)
        return function

    return decorator


def _origin(function: EstimatorFunction) -> tuple[str, str]:
    return getattr(function, "__module__", "?") or "?", getattr(function, "__qualname__", repr(function))


def unregister_estimator(name: str) -> None:
    """Remove a registered estimator (the built-in ones stay)."""
    if name in Algorithm._value2member_map_:
        raise ValueError(f"{name!r} is built in and cannot be unregistered")
    _REGISTRY.pop(name, None)


def estimator_names() -> tuple[str, ...]:
    """Every registered name, the built-in ones first."""
    return tuple(_REGISTRY)


def get_estimator(name: str) -> Estimator:
    """The estimator registered under ``name``; an error listing the choices otherwise."""
    found = _REGISTRY.get(str(name))
    if found is None:
        close = difflib.get_close_matches(str(name), list(_REGISTRY), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"algorithm must be one of {', '.join(_REGISTRY)} (or a name registered with "
                         f"@register_estimator, in a module listed in imports); got {name!r}{hint}")
    return found


def resolve_algorithm(name: str) -> Algorithm | str:
    """``name`` as an :class:`Algorithm` when it is built in, as itself when it is registered; else an error."""
    get_estimator(name)
    return Algorithm(name) if name in Algorithm._value2member_map_ else str(name)


# ---------------------------------------------------------------------- the built-in estimators
@register_estimator(Algorithm.PPO, needs=[Input.VALUES], level=Level.TOKEN)
def gae(batch: AdvantageBatch, args: TurnGymConfig) -> Estimate:
    """PPO: token-level GAE(gamma, lambda) on a critic's values (advantages.token_gae), whitened over the batch.

    Each turn's reward sits on its last sampled token and the chain skips the world's tokens; a truncated episode
    ends on V of the state it stopped in (``bootstrap_truncated``), a terminated one on 0. The critic's targets
    are the GAE returns A_k + V_k. ``args.critic_config``: ``lam``, ``bootstrap_truncated``, ``whiten_advantages``.
    """
    critic = args.critic_config
    advantages, targets = [], []
    for i, tokens in enumerate(batch.tokens):
        n = len(tokens.env_mask)
        last_value = tokens.values[n] if tokens.truncated and critic.bootstrap_truncated else 0.0
        a, g = adv.token_gae(batch.token_rewards(i), tokens.values[:n], tokens.env_mask, args.gamma, critic.lam,
                             last_value)
        advantages.append(a)
        targets.append(g)
    if critic.whiten_advantages:
        advantages = adv.whiten(advantages, [t.env_mask for t in batch.tokens])
    return Estimate(advantages, targets)


@register_estimator(Algorithm.GRPO)
def grpo(batch: AdvantageBatch, args: TurnGymConfig) -> list[list[float]]:
    """Episode-level GRPO (advantages.episode_grpo): every turn carries its episode's advantage."""
    per_episode = adv.episode_grpo(batch.returns, batch.groups, args.scale_rewards)
    return [[a] * len(r) for a, r in zip(per_episode, batch.turn_rewards, strict=True)]


@register_estimator(Algorithm.RLOO)
def rloo(batch: AdvantageBatch, args: TurnGymConfig) -> list[list[float]]:
    """Episode-level RLOO (advantages.episode_rloo): every turn carries its episode's advantage."""
    per_episode = adv.episode_rloo(batch.returns, batch.groups)
    return [[a] * len(r) for a, r in zip(per_episode, batch.turn_rewards, strict=True)]


@register_estimator(Algorithm.TURN_GRPO)
def turn_grpo(batch: AdvantageBatch, args: TurnGymConfig) -> list[list[float]]:
    """Turn-level GRPO (advantages.turn_grpo) on the return-to-go, scaled by scale_rewards."""
    return adv.turn_grpo(batch.turn_rewards, batch.groups, args.gamma, scale=args.scale_rewards)


@register_estimator(Algorithm.TURN_RLOO)
def turn_rloo(batch: AdvantageBatch, args: TurnGymConfig) -> list[list[float]]:
    """Turn-level RLOO (advantages.turn_rloo) on the return-to-go, leave-one-out over the group."""
    return adv.turn_rloo(batch.turn_rewards, batch.groups, args.gamma, args.turn_baseline_alone)


@register_estimator(Algorithm.GIGPO)
def gigpo(batch: AdvantageBatch, args: TurnGymConfig) -> list[list[float]]:
    """GiGPO (advantages.gigpo): episode-level group advantage + omega x anchor-state step advantage."""
    stats = adv.anchor_group_stats(batch.states, batch.groups)
    batch.metrics["gigpo/anchor_group_size_mean"] = stats["mean_size"]
    batch.metrics["gigpo/anchor_shared_step_fraction"] = stats["shared_fraction"]
    return adv.gigpo(batch.turn_rewards, batch.groups, batch.states, gamma=args.gamma,
                     step_weight=args.step_advantage_weight, scale=args.scale_rewards)


@register_estimator("gdpo")
def gdpo(batch: AdvantageBatch, args: TurnGymConfig) -> list[list[float]]:
    """GDPO (advantages.component_grpo): each reward component of ``component_weights`` normalised within its group on
    its own, the weighted sum normalised over the batch; every turn carries its episode's advantage.

    The components are the worlds' ``info["reward_components"]``, summed over each episode's turns (``outcome``,
    ``progress``, a judge's ``judge``, a world's own); an episode without one (a failed judgement) is left out of
    that component's comparison. A component no episode of the batch has is an error (a misspelt name).
    """
    weights = getattr(args, "component_weights", None)
    if not weights:
        raise ValueError('algorithm gdpo combines reward components: set component_weights, e.g. '
                         '{"outcome": 1.0, "judge": 0.5} (the names of info["reward_components"])')
    components = batch.components or [{} for _ in batch.turn_rewards]
    seen = {name for c in components for name in c}
    unknown = sorted(set(weights) - seen)
    if unknown:
        raise ValueError(f"component_weights names {unknown}, which no episode of this step reported; the episodes' "
                         f"reward components are {sorted(seen)}")
    for name in weights:
        values = [c[name] for c in components if c.get(name) is not None]
        batch.metrics[f"gdpo/{name}_mean"] = sum(values) / len(values)
        batch.metrics[f"gdpo/{name}_missing"] = float(len(components) - len(values))
    per_episode = adv.component_grpo(components, batch.groups, weights)
    return [[a] * len(r) for a, r in zip(per_episode, batch.turn_rewards, strict=True)]


# ---------------------------------------------------------------------- the step
@dataclass
class StepAdvantages:
    """What one process's rows train on, after the estimator and the step's options."""

    tokens: list[list[float]]  # one advantage per completion token of each of this process's episodes
    turns: list[list[float]] | None  # one per turn (turn-level estimators): what per-turn rows read
    dropped: list[bool]  # the episode's group is out of the loss (dynamic sampling)
    any_dropped: bool  # some group of the step, on any process, is
    value_targets: list[list[float]] | None  # one per completion token, for the critic
    metrics: dict[str, float]


def step_advantages(estimator: Estimator, batch: AdvantageBatch, args: TurnGymConfig, episodes: Sequence[Episode],
                    local: slice, *, step: int, process: int) -> StepAdvantages:
    """The estimator on every process's episodes (``batch``), then, for this process's ``episodes`` (``local``:
    their place in the batch):

    - dynamic sampling (``dynamic_sampling: drop``): a group whose advantages are all 0 leaves the loss,
      decided on the honest advantages; with ``judge_failed: drop``, so does a group holding an episode whose
      judgement failed (its world-only reward would otherwise be compared with judged ones);
    - the null control (``shuffle_advantages``): the advantages permuted with a generator seeded by (seed, step),
      within each (group, turn) cell (``shuffle_scope: group``) or across the step. Turn-level advantages are
      permuted over every process's kept episodes; token-level ones over this process's model tokens (the
      generator salted by ``process``);
    - turn-level rows spread over each turn's model tokens (value targets too).
    """
    estimate = estimator(batch, args)
    rows, groups, metrics = estimate.advantages, batch.groups, dict(batch.metrics)
    dropped = [False] * len(rows)
    if args.dynamic_sampling == "drop":
        silent = adv.zero_signal_groups(rows, groups)
        dropped = [group in silent for group in groups]
        metrics["dynamic_sampling/dropped_groups"] = float(len(silent))
        metrics["dynamic_sampling/dropped_fraction"] = len(silent) / max(len(set(groups)), 1)
    if getattr(args, "judge", None) and args.judge_failed == "drop":  # a failed judgement's group leaves the loss
        unjudged = {g for g, c in zip(groups, batch.components or [{}] * len(groups), strict=True)
                    if c.get("judge_failed")}
        dropped = [d or g in unjudged for d, g in zip(dropped, groups, strict=True)]
        metrics["judge/dropped_groups"] = float(len(unjudged))
    targets = estimate.value_targets[local] if estimate.value_targets is not None else None
    if estimator.level is Level.TOKEN:
        tokens = rows[local]
        if args.shuffle_advantages:
            tokens = shuffled_over_model_tokens(tokens, episodes, groups[local], args.shuffle_scope,
                                                null_rng(args.seed, step, process))
        return StepAdvantages(tokens, None, dropped[local], any(dropped), targets, metrics)
    if args.shuffle_advantages:
        kept = [i for i, d in enumerate(dropped) if not d]
        cells = (adv.group_turn_cells([groups[i] for i in kept], [range(len(rows[i])) for i in kept])
                 if args.shuffle_scope == "group" else None)
        for i, row in zip(kept, adv.shuffle_advantages([rows[i] for i in kept], null_rng(args.seed, step), cells),
                          strict=True):
            rows[i] = row
    turns = rows[local]
    tokens = [adv.spread_over_tokens(a, e.turn_index, e.env_mask) for a, e in zip(turns, episodes, strict=True)]
    if targets is not None:
        targets = [adv.spread_over_tokens(g, e.turn_index, e.env_mask) for g, e in zip(targets, episodes, strict=True)]
    return StepAdvantages(tokens, turns, dropped[local], any(dropped), targets, metrics)


def null_rng(seed: int, step: int, *salt: Any) -> random.Random:
    """The null control's generator: the same on every process (unless salted), new at every step."""
    return random.Random(stable_seed(seed, "shuffle_advantages", step, *salt))


def shuffled_over_model_tokens(token_advantages: Sequence[Sequence[float]], episodes: Sequence[Episode],
                               groups: Sequence[Hashable], scope: str, rng: random.Random) -> list[list[float]]:
    """:func:`~turngym.trainers.advantages.shuffle_advantages` over the model tokens only (the world's keep 0); with
    ``scope="group"`` within each (group, turn index) cell, so each group keeps its token sum at every turn."""
    on_model = [[a for a, m in zip(row, e.env_mask, strict=True) if m]
                for row, e in zip(token_advantages, episodes, strict=True)]
    turns = [[t for t, m in zip(e.turn_index, e.env_mask, strict=True) if m] for e in episodes]
    cells = adv.group_turn_cells(groups, turns) if scope == "group" else None
    dealt = [iter(row) for row in adv.shuffle_advantages(on_model, rng, cells)]
    return [[next(values) if m else 0.0 for m in e.env_mask] for values, e in zip(dealt, episodes, strict=True)]


@dataclass
class EpisodeEntry:
    """What one episode sends every process for the step's advantages."""

    key: Hashable  # its group: the task key (world::task id with several worlds)
    turn_rewards: list[float]
    states: list[str | None]
    won: bool
    tokens: EpisodeTokens | None = None
    components: dict[str, float] = field(default_factory=dict)  # the episode's reward components, summed over turns


def step_entries(episodes: Sequence[Episode], estimator: Estimator, values: Any = None,
                 kl: Sequence[Sequence[float]] | None = None, kl_coef: float = 0.0) -> list[EpisodeEntry]:
    """This process's episodes as :class:`EpisodeEntry` records, with their tokens when the estimator reads them
    (``values``: a critic's (rows, C + 1) values of this process's rows; ``kl``: :func:`token_kl`)."""
    def tokens(row: int, episode: Episode) -> EpisodeTokens | None:
        if not estimator.needs_tokens:
            return None
        found = values[row, : len(episode.completion_ids) + 1].tolist() if values is not None else None
        return EpisodeTokens.of(episode, found, kl[row] if kl is not None else None, kl_coef)

    return [EpisodeEntry(e.group, e.turn_rewards, e.anchor_states, e.won, tokens(row, e),
                         dict(getattr(e.trajectory, "reward_components", None) or {}))
            for row, e in enumerate(episodes)]


def advantage_batch(entries: Sequence[EpisodeEntry], groups: Sequence[Hashable]) -> AdvantageBatch:
    """The :class:`AdvantageBatch` of every process's entries (gathered, in TRL's order)."""
    tokens = [e.tokens for e in entries]
    return AdvantageBatch([e.turn_rewards for e in entries], list(groups), [e.states for e in entries],
                          tokens=tokens if entries and all(t is not None for t in tokens) else None,
                          components=[dict(e.components) for e in entries])


def token_kl(policy_logps: Any, reference_logps: Any, episodes: Sequence[Episode]) -> tuple[list[list[float]], float]:
    """KL_{i,k} = log pi(a_k) - log pi_ref(a_k) at sampling, per completion token of each episode (``policy_logps``:
    the policy's at sampling time, (B, C), or None: the sampler's own), and its mean over the model's tokens."""
    policy = policy_logps.tolist() if policy_logps is not None else [e.logprobs for e in episodes]
    reference = reference_logps.tolist()
    kl = [[p - r for p, r in zip(ps, rs, strict=False)] for ps, rs in zip(policy, reference, strict=True)]
    model_tokens = [(k, m) for row, e in zip(kl, episodes, strict=True) for k, m in zip(row, e.env_mask, strict=False)]
    return kl, sum(k for k, m in model_tokens if m) / max(1, sum(m for _, m in model_tokens))


def turn_advantages(algorithm: str, turn_rewards: Sequence[Sequence[float]], groups: Sequence[Hashable], *,
                    gamma: float = 1.0, scale: adv.Scale | str | bool = "group", alone: str = "return",
                    states: Sequence[Sequence[Hashable]] | None = None,
                    step_weight: float = 1.0) -> list[list[float]]:
    """One advantage per turn of every episode from the registered turn-level estimator ``algorithm`` that needs no
    values, with the config fields it reads given here (``scale``: ``scale_rewards``; ``alone``:
    ``turn_baseline_alone``; ``step_weight``: ``step_advantage_weight``; ``states``: the anchor states, default all
    unknown). The trainer itself calls the estimator with its config."""
    estimator = get_estimator(algorithm)
    if estimator.needs_tokens:
        raise ValueError(f"no turn advantages for algorithm {algorithm!r}: it reads tokens or a critic's values")
    settings = SimpleNamespace(gamma=gamma, scale_rewards=adv.Scale.of(scale), turn_baseline_alone=alone,
                               step_advantage_weight=step_weight)
    batch = AdvantageBatch([list(r) for r in turn_rewards], list(groups),
                           [list(s) for s in states] if states is not None else [[None] * len(r) for r in turn_rewards])
    return estimator(batch, settings).advantages


def check_kl_reference(reference: Any, policy: Any, beta: float) -> None:
    """With ``beta > 0`` the KL's reference must be the policy RL starts from (e.g. the SFT checkpoint).

    TRL builds the reference model again from ``model.config._name_or_path``; a policy object whose weights
    differ from that folder would silently be pulled towards another model. Parameters are compared in the
    reference's dtype (a recipe may load it in bf16 next to an fp32 policy).
    """
    import torch

    others = dict(reference.named_parameters())
    for name, parameter in policy.named_parameters():
        other = others.get(name)
        same = other is not None and other.shape == parameter.shape
        if not same or not torch.equal(other, parameter.detach().to(other.dtype)):
            raise ValueError(
                f"the KL reference (beta={beta}) loaded from {reference.config._name_or_path!r} differs from the "
                f"policy being trained ({name}): save the starting policy (e.g. the SFT checkpoint) and pass its "
                "folder as model_name_or_path, so the reference is the policy RL starts from")
