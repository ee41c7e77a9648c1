"""Advantage estimators for whole multi-turn episodes: pure functions, the math beside the code.

Notation: a *group* is G episodes of the same task. Episode i has turn rewards r_{i,0..T_i-1},
return R_i = sum_t r_{i,t}, and return-to-go

    G_{i,t} = sum_{t' >= t} gamma^(t' - t) r_{i,t'}.

Episode-level estimators give one number per episode, spread over all its model tokens;
turn-level ones give one number per turn, spread over that turn's model tokens; GAE gives one
number per model token. Environment tokens never get an advantage (they are masked from the loss).
Every function takes plain Python lists and returns plain lists, so each can be checked by hand.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from enum import StrEnum

EPSILON = 1e-4  # added to standard deviations, as TRL's GRPO does


class Scale(StrEnum):
    """What a group-relative advantage is divided by (TRL's ``scale_rewards``), for every estimator that scales:

    ``group``: the standard deviation of the values it is compared with (+ eps); ``batch``: one standard
    deviation over the whole batch (+ eps); ``none``: 1 (Dr. GRPO, and GiGPO's ``mean_norm``).
    """

    GROUP = "group"
    BATCH = "batch"
    NONE = "none"

    @classmethod
    def of(cls, value: Scale | str | bool) -> Scale:
        """The Scale of ``value``; TRL's booleans too (True: group, False: none)."""
        if isinstance(value, bool):
            return cls.GROUP if value else cls.NONE
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"scale must be one of {', '.join(repr(s.value) for s in cls)} (or True/False), "
                             f"got {value!r}") from None


def _std(values: Sequence[float]) -> float:
    """Unbiased sample standard deviation (divides by n - 1, like ``torch.std``); 0 for n < 2."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def _members(groups: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    members: dict[Hashable, list[int]] = defaultdict(list)
    for index, group in enumerate(groups):
        members[group].append(index)
    return members


# ---------------------------------------------------------------------- episode level
def episode_grpo(returns: Sequence[float], groups: Sequence[Hashable], scale: Scale | str = Scale.GROUP) -> list[float]:
    """GRPO on episode returns:

        A_i = (R_i - mean_{j in g(i)} R_j) / (s + eps)

    with s = std over the group (``scale="group"``), std over the whole batch (``"batch"``), or
    s + eps = 1 (``"none"``, Dr. GRPO). Standard deviations are unbiased (n - 1), eps = 1e-4.
    """
    scale = Scale.of(scale)
    advantages = [0.0] * len(returns)
    batch_std = _std(returns)
    for members in _members(groups).values():
        rewards = [returns[i] for i in members]
        mean = sum(rewards) / len(rewards)
        denominator = {"group": _std(rewards) + EPSILON, "batch": batch_std + EPSILON, "none": 1.0}[scale]
        for i in members:
            advantages[i] = (returns[i] - mean) / denominator
    return advantages


def episode_rloo(returns: Sequence[float], groups: Sequence[Hashable]) -> list[float]:
    """REINFORCE leave-one-out on episode returns:

        A_i = R_i - (1 / (G - 1)) sum_{j in g(i), j != i} R_j

    An episode alone in its group has no baseline to compare with and gets A_i = 0.
    """
    advantages = [0.0] * len(returns)
    for members in _members(groups).values():
        if len(members) < 2:
            continue
        total = sum(returns[i] for i in members)
        for i in members:
            advantages[i] = returns[i] - (total - returns[i]) / (len(members) - 1)
    return advantages


def component_grpo(components: Sequence[Mapping[str, float]], groups: Sequence[Hashable],
                   weights: Mapping[str, float], renormalise: bool = True) -> list[float]:
    """GDPO (Liu et al. 2026, "Group reward-Decoupled Normalization Policy Optimization"): each reward component
    normalised within the group on its own, then the weighted sum, then one normalisation over the batch:

        Ahat_{i,k} = (c_{i,k} - mean_{j in g_k(i)} c_{j,k}) / (std_{j in g_k(i)} c_{j,k} + eps)
        S_i        = sum_k w_k Ahat_{i,k}
        A_i        = (S_i - mean_batch S) / (std_batch S + eps)      (``renormalise=False``: A_i = S_i)

    c_{i,k} is episode i's total of component k (``components[i][k]``), w_k = ``weights[k]``; only the weighted
    components count. g_k(i) is i's group among the episodes that have component k: an episode without it (a failed
    judgement has no ``judge``) is left out of that component's mean and std and gets Ahat_{i,k} = 0, never a 0
    score. GRPO on the summed reward lets a component with a large spread drown one with a small spread and maps
    different combinations to the same advantage; normalising each first keeps them apart, and the batch step keeps
    the scale from growing with the number of components. Standard deviations are unbiased (n - 1), eps = 1e-4; a
    group of one gets Ahat = 0.
    """
    if not weights:
        raise ValueError("component_grpo needs the weights of the components to combine, e.g. {'outcome': 1.0}")
    summed = [0.0] * len(components)
    for name, weight in weights.items():
        having = [i for i, c in enumerate(components) if c.get(name) is not None]
        normalised = episode_grpo([float(components[i][name]) for i in having], [groups[i] for i in having])
        for i, a in zip(having, normalised, strict=True):
            summed[i] += weight * a
    if not renormalise:
        return summed
    mean, std = sum(summed) / max(len(summed), 1), _std(summed)
    return [(s - mean) / (std + EPSILON) for s in summed]


# ---------------------------------------------------------------------- turn level
def returns_to_go(turn_rewards: Sequence[float], gamma: float = 1.0) -> list[float]:
    """G_t = sum_{t' >= t} gamma^(t' - t) r_{t'}, computed backwards: G_t = r_t + gamma G_{t+1}."""
    out = [0.0] * len(turn_rewards)
    running = 0.0
    for t in range(len(turn_rewards) - 1, -1, -1):
        running = turn_rewards[t] + gamma * running
        out[t] = running
    return out


def turn_rloo(
    turn_rewards: Sequence[Sequence[float]],
    groups: Sequence[Hashable],
    gamma: float = 1.0,
    alone: str = "return",
) -> list[list[float]]:
    """Turn-level REINFORCE leave-one-out:

        A_{i,t} = G_{i,t} - b_{i,t},   b_{i,t} = mean { G_{j,t} : j in g(i), j != i, T_j > t }

    The baseline for turn t averages the return-to-go of the group's *other* episodes that reached
    turn t. It never uses episode i's own rewards, actions or stopping turn, and it is not
    normalised by turn index (which would tie it to the episode's own length).

    When no other episode reached turn t: ``alone="return"`` uses b = 0, so A_{i,t} = G_{i,t}
    (plain REINFORCE, still unbiased); ``alone="zero"`` sets A_{i,t} = 0 (no signal without a
    comparison).
    """
    if alone not in ("return", "zero"):
        raise ValueError(f"alone must be 'return' or 'zero', got {alone!r}")
    to_go = [returns_to_go(r, gamma) for r in turn_rewards]
    advantages = [[0.0] * len(r) for r in turn_rewards]
    for members in _members(groups).values():
        for i in members:
            for t, g in enumerate(to_go[i]):
                others = [to_go[j][t] for j in members if j != i and len(to_go[j]) > t]
                if others:
                    advantages[i][t] = g - sum(others) / len(others)
                else:
                    advantages[i][t] = g if alone == "return" else 0.0
    return advantages


def turn_grpo(turn_rewards: Sequence[Sequence[float]], groups: Sequence[Hashable], gamma: float = 1.0,
              scale: Scale | str = Scale.GROUP) -> list[list[float]]:
    """Turn-level GRPO: centre the return-to-go among the group's episodes that reached turn t, then scale:

        A_{i,t} = (G_{i,t} - mean_{j in S_t} G_{j,t}) / d_t,
        S_t = { j in g(i) : T_j > t }   (i itself included, as in GRPO)

    with the denominator chosen by ``scale``:

        "group":  d_t = std_{j in S_t} G_{j,t} + eps      (the spread among the episodes compared at t)
        "batch":  d   = std { G_{j,u} : every episode j of the batch, every turn u < T_j } + eps
                  (one number for the whole batch: every (episode, turn) return-to-go counts once, as
                  episode GRPO's "batch" takes the std of every return; "local mean, global std")
        "none":   d   = 1                                 (Dr. GRPO)

    Standard deviations are unbiased (n - 1), eps = 1e-4. A turn reached by episode i alone gets A_{i,t} = 0.
    """
    scale = Scale.of(scale)
    to_go = [returns_to_go(r, gamma) for r in turn_rewards]
    batch_denominator = _std([g for row in to_go for g in row]) + EPSILON
    advantages = [[0.0] * len(r) for r in turn_rewards]
    for members in _members(groups).values():
        longest = max((len(to_go[i]) for i in members), default=0)
        for t in range(longest):
            reached = [i for i in members if len(to_go[i]) > t]
            if len(reached) < 2:
                continue
            values = [to_go[i][t] for i in reached]
            mean = sum(values) / len(values)
            denominator = {"group": _std(values) + EPSILON, "batch": batch_denominator, "none": 1.0}[scale]
            for i in reached:
                advantages[i][t] = (to_go[i][t] - mean) / denominator
    return advantages


def anchor_groups(states: Sequence[Sequence[Hashable]], groups: Sequence[Hashable]) -> dict[Hashable, list[tuple]]:
    """GiGPO's step-level groups: every (episode i, turn t) whose state s_{i,t} is the same, within one task group.

    Returns {(g, s): [(i, t), ...]}, the members in batch order. A state None is unknown: a group of its own.
    """
    members: dict[Hashable, list[tuple[int, int]]] = defaultdict(list)
    for i, (row, group) in enumerate(zip(states, groups, strict=True)):
        for t, state in enumerate(row):
            members[(group, state) if state is not None else ("unknown", i, t)].append((i, t))
    return members


def anchor_group_stats(states: Sequence[Sequence[Hashable]], groups: Sequence[Hashable]) -> dict[str, float]:
    """How much GiGPO's step-level groups share: ``mean_size``, the mean number of steps per anchor group, and
    ``shared_fraction``, the share of steps whose anchor group has more than one step (only they get A^S != 0)."""
    sizes = [len(m) for m in anchor_groups(states, groups).values()]
    steps = sum(sizes)
    return {"mean_size": steps / len(sizes) if sizes else 0.0,
            "shared_fraction": sum(s for s in sizes if s > 1) / steps if steps else 0.0}


def gigpo(turn_rewards: Sequence[Sequence[float]], groups: Sequence[Hashable],
          states: Sequence[Sequence[Hashable]], gamma: float = 1.0, step_weight: float = 1.0,
          scale: Scale | str = Scale.GROUP) -> list[list[float]]:
    """Group-in-Group Policy Optimization (GiGPO; Feng et al. 2025, "Group-in-Group Policy Optimization for
    LLM Agent Training", the verl-agent estimator): an episode-level group advantage plus a step-level one
    computed among the steps, across the group's episodes, that acted in the same *anchor state*:

        A_{i,t}   = A^E_i + omega * A^S_{i,t}
        A^E_i     = (R_i - mean_{j in g(i)} R_j) / F_E,                R_i = sum_t r_{i,t}
        A^S_{i,t} = (G_{i,t} - mean_{(j,u) in S(i,t)} G_{j,u}) / F_S,  G_{i,t} = sum_{t' >= t} gamma^(t'-t) r_{i,t'}
        S(i,t)    = { (j, u) : g(j) = g(i), s_{j,u} = s_{i,t} }        (the anchor group: i itself included)

    ``states[i][t]`` is s_{i,t}, a key of the state episode i acted in at turn t (the trainer's: a hash of the
    observation text and the admissible commands, :attr:`~turngym.trainers.episodes.Episode.anchor_states`).
    One episode can sit in an anchor group more than once (it came back to a state). omega is ``step_weight``.

    F by ``scale`` (:class:`Scale`, the trainer's ``scale_rewards``): ``"group"`` (verl-agent's ``mean_std_norm``):
    F_E = std_{j in g(i)} R_j + eps, F_S = std_{(j,u) in S(i,t)} G_{j,u} + eps; ``"none"`` (verl-agent's default,
    ``mean_norm``): F = 1; ``"batch"``: F_E = std of every return of the batch + eps, F_S = std of every step
    return of the batch + eps. Standard deviations are unbiased (n - 1), eps = 1e-4. The paper's runs use
    omega = 1 and gamma = 0.95.

    An anchor group of one step gives A^S = 0 (its return is its own mean), and an episode alone in its task
    group gives A^E = 0. verl-agent trains on one sample per step and takes A^E's mean and std over those
    samples (so a long episode weighs more); here they are over the group's episodes, as the paper's equation.
    """
    scale = Scale.of(scale)
    episode = episode_grpo([sum(r) for r in turn_rewards], groups, scale)
    if len(states) != len(turn_rewards) or any(len(s) != len(r) for s, r in zip(states, turn_rewards, strict=False)):
        raise ValueError("gigpo needs one state per turn of every episode: states and turn_rewards differ in shape")
    to_go = [returns_to_go(r, gamma) for r in turn_rewards]
    batch_denominator = _std([g for row in to_go for g in row]) + EPSILON
    step = [[0.0] * len(r) for r in turn_rewards]
    for members in anchor_groups(states, groups).values():
        if len(members) < 2:
            continue
        values = [to_go[i][t] for i, t in members]
        mean = sum(values) / len(values)
        denominator = {Scale.GROUP: _std(values) + EPSILON, Scale.BATCH: batch_denominator, Scale.NONE: 1.0}[scale]
        for i, t in members:
            step[i][t] = (to_go[i][t] - mean) / denominator
    return [[a + step_weight * s for s in row] for a, row in zip(episode, step, strict=True)]


def shuffle_advantages(rows: Sequence[Sequence[float]], rng: random.Random,
                       cells: Sequence[Sequence[Hashable]] | None = None) -> list[list[float]]:
    """A null control: the same advantages, dealt out at random within cells.

    ``rows`` is ragged (one row per episode, one entry per turn or per model token); ``cells`` has the
    same shape and names each entry's cell. Within every cell the entries are permuted with ``rng``
    (cells in order of first appearance) and refilled into the same places:

        A'_{i,t} = A_{pi_c(i,t)}   with pi_c a uniform permutation of the entries of cell c = cells[i][t]

    so every cell keeps its multiset of advantages (its sum, its signs), but which of its episodes
    receives which value is independent of what the episode did. The fair null
    (:func:`group_turn_cells`: cell = (group, turn index)) keeps each group's sum at each turn, leaves a
    group whose episodes tied at 0 untouched, and so takes the same steps as the real arm without its
    signal. ``cells=None`` puts everything in one cell: the whole step's advantages dealt across groups,
    a harsher null that also moves advantages onto groups the real arm leaves alone.
    """
    cells = cells if cells is not None else [[None] * len(row) for row in rows]
    if [len(r) for r in cells] != [len(r) for r in rows]:
        raise ValueError("cells must have the shape of rows: one cell per advantage")
    members: dict[Hashable, list[tuple[int, int]]] = defaultdict(list)
    for i, row in enumerate(cells):
        for t, cell in enumerate(row):
            members[cell].append((i, t))
    out = [list(row) for row in rows]
    for places in members.values():
        values = [rows[i][t] for i, t in places]
        rng.shuffle(values)
        for (i, t), value in zip(places, values, strict=True):
            out[i][t] = value
    return out


def zero_signal_groups(rows: Sequence[Sequence[float]], groups: Sequence[Hashable],
                       tolerance: float = 1e-8) -> set[Hashable]:
    """Groups in which every advantage of every episode (``rows``: per turn or per token) is 0 (|A| <= ``tolerance``).

    Such a group (every episode of the task scored alike, e.g. all lost) adds no policy gradient; DAPO's
    dynamic sampling (Yu et al. 2025) keeps it out of the batch so that it does not dilute the step.
    """
    signal: dict[Hashable, bool] = {}
    for row, group in zip(rows, groups, strict=True):
        signal[group] = signal.get(group, False) or any(abs(a) > tolerance for a in row)
    return {group for group, has in signal.items() if not has}


def group_turn_cells(groups: Sequence[Hashable], turns: Sequence[Sequence[int]]) -> list[list[tuple[Hashable, int]]]:
    """The fair null's cells: entry t of episode i (turn ``turns[i][t]``) sits in cell (groups[i], turns[i][t])."""
    return [[(group, turn) for turn in row] for group, row in zip(groups, turns, strict=True)]


# ---------------------------------------------------------------------- token level
def spread_over_tokens(per_turn: Sequence[float], turn_index: Sequence[int], env_mask: Sequence[int]) -> list[float]:
    """Give each model token its turn's advantage; environment tokens get 0."""
    return [per_turn[t] if m else 0.0 for t, m in zip(turn_index, env_mask, strict=True)]


def token_rewards(turn_rewards: Sequence[float], turn_ends: Sequence[int], length: int) -> list[float]:
    """Per-token rewards: each turn's reward sits on that turn's last sampled token."""
    out = [0.0] * length
    for reward, end in zip(turn_rewards, turn_ends, strict=False):
        out[end] += reward
    return out


def token_gae(
    rewards: Sequence[float],
    values: Sequence[float],
    env_mask: Sequence[int],
    gamma: float = 1.0,
    lam: float = 0.95,
    last_value: float = 0.0,
) -> tuple[list[float], list[float]]:
    """Generalised advantage estimation over the model tokens of one episode.

    Let k = 0..K-1 index the model tokens (env_mask = 1) in order; environment tokens are skipped,
    so the token after a turn's end-of-turn token in the chain is the next turn's first model token.
    With V_K = ``last_value`` (0 for a terminated episode; the critic's value of the state after
    the last turn for a truncated one, so running out of turns is not scored as failing):

        delta_k = r_k + gamma V_{k+1} - V_k
        A_k     = delta_k + gamma lam A_{k+1},   A_K = 0
        return_k = A_k + V_k                      (the critic's regression target)

    Returns (advantages, returns) aligned with the full sequence, 0 at environment tokens.
    """
    if not len(rewards) == len(values) == len(env_mask):
        raise ValueError(f"rewards, values and env_mask differ in length: {len(rewards)}, {len(values)}, "
                         f"{len(env_mask)}")
    advantages = [0.0] * len(rewards)
    returns = [0.0] * len(rewards)
    next_value, running = last_value, 0.0
    for k in range(len(rewards) - 1, -1, -1):
        if not env_mask[k]:
            continue
        delta = rewards[k] + gamma * next_value - values[k]
        running = delta + gamma * lam * running
        advantages[k], returns[k] = running, running + values[k]
        next_value = values[k]
    return advantages, returns


def whiten(rows: Sequence[Sequence[float]], masks: Sequence[Sequence[int]]) -> list[list[float]]:
    """(A_k - mean) / (std + eps) over every model token (m_k = 1) of the batch; 0 elsewhere.

    mean and std (the population's, divides by n) are over the model tokens of every row, eps = 1e-4.
    """
    values = [a for row, mask in zip(rows, masks, strict=True) for a, m in zip(row, mask, strict=True) if m]
    total, squares, count = sum(values), sum(v * v for v in values), float(len(values))
    mean = total / max(count, 1.0)
    std = max(squares / max(count, 1.0) - mean * mean, 0.0) ** 0.5
    return [[(a - mean) / (std + EPSILON) if m else 0.0 for a, m in zip(row, mask, strict=True)]
            for row, mask in zip(rows, masks, strict=True)]
