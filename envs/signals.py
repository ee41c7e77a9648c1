"""``turngym/Signals-v0``: a small deterministic multi-turn world that a tiny model can learn.

Each turn the world shows a signal ("The light is red."); the right command depends only on the
signal, through a fixed rule the agent is not told (red: stop, green: go, yellow: wait, blue:
turn). A task is a seeded sequence of signals, so every episode of a task sees the same signals.

It is the CartPole of turngym: the trainers' tests check that each algorithm learns the rule in
seconds on CPU, with a tiny model built from a config. Chance is known exactly: with k commands
and a uniform random choice, each turn is right with probability 1/k.

Rewards: dense mode gives 1/T for each right command (sums to 1 when all T are right, which is
the win); sparse mode gives 1 on the win. A wrong command ends the episode as lost when
``strict=True`` (the default is to go on).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from turngym.envs.core import TextEnv, WorldState
from turngym.envs.tasks import Task, TaskSet

RULE = {"red": "stop", "green": "go", "yellow": "wait", "blue": "turn"}
COMMANDS = sorted(set(RULE.values()))  # always all four: chance is 1/4 per turn


def signal_tasks(split: str = "train", n: int = 64, turns: int = 3, colours: int = 2) -> TaskSet:
    """``n`` tasks of ``turns`` signals drawn from the first ``colours`` colours of :data:`RULE`.

    Train tasks use seeds 0..n-1 and eval tasks seeds 10_000... Their ids differ, but there are
    only ``colours ** turns`` signal sequences, so the same sequences recur across splits: this
    world checks that a rule is learned, not that it generalises to unseen content.
    """
    if not 2 <= colours <= len(RULE):
        raise ValueError(f"colours must be between 2 and {len(RULE)}, got {colours}")
    offset = {"train": 0, "eval": 10_000}.get(split)
    if offset is None:
        raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
    names = list(RULE)[:colours]
    tasks = []
    for seed in range(offset, offset + n):
        rng = np.random.default_rng(seed)
        signals = [names[int(i)] for i in rng.integers(0, colours, size=turns)]
        tasks.append(Task(world="signals", id=f"signals/{split}/{seed}", split=split,
                          difficulty=f"{turns}x{colours}", payload={"signals": signals}))
    return TaskSet(name=f"signals/{split}", version="1", tasks=tuple(tasks))


def task_panel(split: str, n: int | None, env_kwargs: dict[str, Any], *, workers: int | None = None,
               progress: bool = True) -> TaskSet:
    """The panel of ``turngym/Signals-v0``: :func:`signal_tasks` with the world's ``turns`` and ``colours``
    (``n`` defaults to its ``num_tasks``, 64)."""
    options = {k: env_kwargs[k] for k in ("turns", "colours") if k in env_kwargs}
    return signal_tasks(split, n=n or env_kwargs.get("num_tasks", 64), **options)


class SignalsEnv(TextEnv):
    """See the module docstring. ``tasks`` defaults to :func:`signal_tasks` for ``split``."""

    world_name = "signals"
    action_hint = "Reply with one command: " + ", ".join(COMMANDS) + "."

    def __init__(self, *, split: str = "train", num_tasks: int = 64, turns: int = 3, colours: int = 2,
                 strict: bool = False, **kwargs) -> None:
        kwargs.setdefault("tasks", signal_tasks(split, num_tasks, turns, colours))
        super().__init__(**kwargs)
        self.strict = strict
        self._signals: list[str] = []
        self._position = 0

    def _start(self, task: Task | None) -> WorldState:
        if task is None:
            raise ValueError("SignalsEnv needs a task")
        self._signals = list(task.payload["signals"])
        self._position = 0
        return self._world_state(f"Obey the traffic lights. {self._prompt()}", progress=0.0)

    def _execute(self, command: str) -> WorldState:
        right = command.strip().lower() == RULE[self._signals[self._position]]
        if not right:
            if self.strict:
                return self._world_state("Wrong. Game over.", lost=True)
            return self._world_state(f"Wrong. {self._prompt()}")
        self._position += 1
        progress = self._position / len(self._signals)
        if self._position == len(self._signals):
            return self._world_state("Right. You made it through.", progress=1.0, won=True)
        return self._world_state(f"Right. {self._prompt()}", progress=progress)

    def _prompt(self) -> str:
        return f"The light is {self._signals[self._position]}."

    def _world_state(self, text: str, progress: float | None = None, won: bool = False,
                     lost: bool = False) -> WorldState:
        return WorldState(text=text, progress=progress, won=won, lost=lost, admissible_commands=list(COMMANDS),
                          optimal_length=len(self._signals), extra={"walkthrough": [RULE[s] for s in self._signals]})
