"""A study's learning curves: held-out success and training return against RL episodes.

``Study`` inherits :class:`CurveStages`; :func:`curve_callback` evaluates a policy during its RL stage.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from turngym.recipes.study_config import Arm


class CurveStages:
    """The curve's panel and points, from the stages' logs and evaluations (``Study``'s folders and config)."""

    def _curve_tasks(self) -> Any:
        """The learning curve's panel: the first ``curve_tasks`` tasks of the held-out panel."""
        tasks = self.tasks("held_out")
        curve_tasks = self.config.evaluation.curve_tasks
        return tasks.take(curve_tasks) if curve_tasks < len(tasks) else tasks

    def curves(self, arm: Arm) -> list[dict[str, Any]]:
        """Per seed: held-out success and training return against RL episodes, from the run's log."""
        out = []
        for seed in self.config.seeds:
            folder = self.out / f"seed{seed}" / arm.label
            log = folder / "log.json"
            done = self._done(folder)
            if not log.exists() or not done:
                continue
            per_step = done["episodes_per_step"]
            history = json.loads(log.read_text())
            start_arm = next((a.label for a in self.arms if a.demos == arm.demos and not a.trains_rl), None)
            ends = [(0, self._curve_success(start_arm, seed))] if start_arm else []
            during = [(h["step"] * per_step, h["eval/success"]) for h in history if "eval/success" in h]
            ends_after = [(arm.episodes, self._curve_success(arm.label, seed))]
            out.append({
                "seed": seed,
                "held_out": [(x, y) for x, y in ends + during + ends_after if y is not None],
                "train_return": [(h["step"] * per_step, h["episode/return"]) for h in history if "episode/return" in h],
                "train_success": [(h["step"] * per_step, h["episode/success"])
                                  for h in history if "episode/success" in h],
                "signal": learning_signal(history),
            })
        return out

    def curve_reference(self) -> dict[str, float]:
        """Each arm without RL (base, SFT-only): its success on the learning curve's tasks, the same games the
        curves' points are measured on, pooled over seeds (the full panel's number would compare other games)."""
        out = {}
        for arm in self.arms:
            if arm.trains_rl:
                continue
            rates = [r for seed in self.config.seeds if (r := self._curve_success(arm.label, seed)) is not None]
            if rates:
                out[arm.label] = sum(rates) / len(rates)
        return out

    def _curve_success(self, label: str, seed: int) -> float | None:
        """A finished evaluation's success on the learning curve's tasks (None if not evaluated)."""
        file = self.out / "evals" / label / f"seed{seed}-held_out.json"
        if not file.exists():
            return None
        ids = {task.id for task in self._curve_tasks()}
        won = [o["won"] for o in json.loads(file.read_text())["outcomes"] if o["task"] in ids]
        return sum(won) / len(won) if won else None


def learning_signal(history: Iterable[dict[str, Any]]) -> dict[str, list[float]] | None:
    """An RL stage's per-step signal metrics from its trainer log (None: no group metric logged).

    A group (one task's episodes) whose advantages are all 0, every episode scoring the same, gives no gradient.
    Per step: ``tied_groups`` is ``advantages/frac_zero_groups``, ``skipped`` is ``policy/skipped_zero_advantages``
    (the share of micro-batches whose passes were skipped; absent before the trainer logged it) and
    ``is_weight_means`` TRL's mean importance weight. ``signal_table`` pools them over seeds.
    """
    steps = [h for h in history if "advantages/frac_zero_groups" in h]
    if not steps:
        return None
    return {"tied_groups": [h["advantages/frac_zero_groups"] for h in steps],
            "skipped": [h["policy/skipped_zero_advantages"] for h in steps if "policy/skipped_zero_advantages" in h],
            "is_weight_means": [h["sampling/importance_sampling_ratio/mean"] for h in steps
                                if "sampling/importance_sampling_ratio/mean" in h]}


def curve_callback(trainer: Any, steps: Iterable[int]) -> Any:
    """A ``TrainerCallback`` that evaluates the policy on the curve's held-out tasks after ``steps``.

    Not ``eval_strategy="steps"``: transformers would also evaluate after the last step, which the
    study's final evaluation already covers on the full panel.
    """
    from transformers import TrainerCallback

    class CurveCallback(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step in chosen:
                trainer.evaluate()

    chosen = set(steps)
    return CurveCallback()
