"""The machinery behind the recipes: resumable stages, paired statistics, tables and plots.

A *study* trains and evaluates several *arms* on one world, each the same way:

    base model --(SFT on d expert demos)--> warm start --(RL, E episodes, one algorithm)--> policy
                                                                      |
                     every arm's policy plays the same held-out panels, greedily by default

:mod:`turngym.recipes.compare_algorithms` makes one arm per RL algorithm (same SFT checkpoint, same
episode budget) plus the base and SFT-only arms; :mod:`turngym.recipes.sft_rl_budget` makes one arm per
split of a fixed budget between demos and RL episodes.

Everything lands in ``results/<name>/``. Each stage (an SFT run, an RL run, one evaluation) writes
its output folder and then a ``done.json``; a rerun skips finished stages and an interrupted RL run
resumes from its last checkpoint, so ``Ctrl-C`` loses at most ``save_steps`` steps.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from turngym.recipes.study_config import (
    RESERVED_SPLITS,
    Arm,
    EvaluationOptions,
    StudyConfig,
    add_study_arguments,
    adds_seeds,
    load_config,
)
from turngym.recipes.study_memory import peak_rss_gb, release_freed_memory
from turngym.recipes.study_outcomes import (
    OUTCOMES,
    moving_average,
    outcome_record,
    pairwise_differences,
    panel_summary,
    recompute,
    success_grid,
)
from turngym.recipes.study_progress import PlannedStage, duration, study_progress, time_left
from turngym.recipes.study_tables import (
    INTERVAL_NOTE,
    difference_cell,
    peak_memory,
    percent,
    print_outputs,
    recomputed_markdown,
    seed_table,
    seeds_cell,
    success_cell,
)

# The study's parts live in study_config (configuration, arms), study_outcomes (grids, statistics, the outcome
# record), study_tables (text), study_progress (stages done, time left) and study_memory; their names are importable
# from here as before.
__all__ = ["DONE", "INTERVAL_NOTE", "OUTCOMES", "RESERVED_SPLITS", "Arm", "EvaluationOptions", "PlannedStage", "Study",
           "StudyConfig", "add_study_arguments", "adds_seeds", "curve_callback", "difference_cell", "duration",
           "episodes_per_step", "load_config", "moving_average", "outcome_record", "pairwise_differences",
           "panel_summary", "peak_memory", "peak_rss_gb", "percent", "print_outputs", "recompute",
           "recomputed_markdown", "release_freed_memory", "save_policy", "seed_table", "seeds_cell", "study_progress",
           "success_cell", "success_grid", "time_left", "write_json"]

DONE = "done.json"


# ---------------------------------------------------------------------- the study
class Study:
    """Runs the arms of a :class:`StudyConfig` into ``results/<name>/``, resumably."""

    def __init__(self, config: StudyConfig, arms: Sequence[Arm], *, restart: bool = False,
                 progress: bool = True) -> None:
        self.config = config
        self.arms = list(arms)
        self.progress = progress
        self.out = Path(config.results_dir) / config.name
        if restart and self.out.exists():
            shutil.rmtree(self.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self._check_same_config()
        self._panels: dict[str, Any] = {}
        self.panel_check: dict[str, Any] | None = None  # check_panels()'s report, once run() made it
        self._plan: list[PlannedStage] = []  # run()'s stages, for the progress line

    # ---------------------------------------------------------------- bookkeeping
    @staticmethod
    def changed_options(config: StudyConfig) -> list[str]:
        """Top-level options that differ from the run already in ``results/<name>/`` (none: resumable)."""
        saved = Path(config.results_dir) / config.name / "config.json"
        if not saved.exists():
            return []
        before, current = json.loads(saved.read_text()), json.loads(json.dumps(config.to_dict()))
        # A run saved before an evaluation option existed ran with that option's default.
        before["evaluation"] = {**asdict(EvaluationOptions()), **(before.get("evaluation") or {})}
        if adds_seeds(before.get("seeds") or [], current.get("seeds") or []):
            before["seeds"] = current["seeds"]  # more seeds of the same study: each seed's stages are its own
        return sorted(k for k in set(before) | set(current) if before.get(k) != current.get(k))

    def _check_same_config(self) -> None:
        saved = self.out / "config.json"
        current = self.config.to_dict()
        if saved.exists():
            changed = self.changed_options(self.config)
            if changed:
                raise ValueError(
                    f"{self.out} holds a study run with a different config (changed: {', '.join(changed)}); resume it "
                    "with the same config (or the same seeds and more after them), pick another name, or start over "
                    "with --restart")
        saved.write_text(json.dumps(current, indent=1))  # seeds added to a study are saved with it

    @staticmethod
    def _done(folder: Path) -> dict[str, Any] | None:
        marker = folder / DONE
        return json.loads(marker.read_text()) if marker.exists() else None

    @staticmethod
    def _mark_done(folder: Path, data: Mapping[str, Any]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / DONE).write_text(json.dumps({**data, "peak_rss_gb": peak_rss_gb()}, indent=1))

    def _stage(self, title: str) -> None:
        if self.progress:
            print(f"\n== {title}", flush=True)
            if self._plan:
                print(f"   {study_progress(self._plan)}", flush=True)

    def stage_plan(self) -> list[PlannedStage]:
        """Every stage :meth:`run` runs, in its order (an SFT warm start shared by arms once, reused evaluations not
        at all), each with the file that marks it finished."""
        plan, seen = [], set()
        for seed in self.config.seeds:
            for arm in self.arms:
                if arm.demos and (seed, arm.demos) not in seen:
                    seen.add((seed, arm.demos))
                    plan.append(PlannedStage("sft", self.out / f"seed{seed}" / f"sft-{arm.demos}demos" / DONE))
                if arm.trains_rl:
                    plan.append(PlannedStage("rl", self.out / f"seed{seed}" / arm.label / DONE))
                if seed == self.config.seeds[0] or not self.seed_independent(arm):
                    plan += [PlannedStage("eval", self.out / "evals" / arm.label / f"seed{seed}-{panel}.json")
                             for panel in self.panel_names()]
        return plan

    def world(self, panel: str | None = None) -> Any:
        """World options (a panel's overrides merged in) as a :class:`~turngym.trainers.config.WorldOptions`."""
        from turngym.trainers.config import WorldOptions

        fields_ = dict(self.config.world)
        fields_["env_kwargs"] = dict(fields_.get("env_kwargs") or {})
        for key, value in (self.config.evaluation.panels.get(panel, {}) if panel else {}).items():
            if key == "env_kwargs":
                fields_["env_kwargs"].update(value)
            else:
                fields_[key] = value
        return WorldOptions(**fields_)

    def panel_names(self) -> list[str]:
        return ["held_out", *self.config.evaluation.panels]

    def tasks(self, panel: str) -> Any:
        """``num_tasks`` tasks of the evaluation split from its ``first_task``-th on (games generated once and
        cached; a panel after the first games is how a later study gets games no earlier study played)."""
        if panel not in self._panels:
            from turngym.envs.panels import task_panel

            world = self.world(None if panel == "held_out" else panel)
            evaluation = self.config.evaluation
            first, n = evaluation.first_task, evaluation.num_tasks
            tasks = task_panel(world.env_id, evaluation.split, first + n, world.world_kwargs(), progress=self.progress)
            if len(tasks) < first + n:
                raise ValueError(f"evaluation: the {evaluation.split} split of {world.env_id} has {len(tasks)} tasks, "
                                 f"not the {first + n} that first_task {first} and num_tasks {n} need")
            self._panels[panel] = tasks.take(n, start=first) if first else tasks
        return self._panels[panel]

    # ---------------------------------------------------------------- stages
    def sft_stage(self, demos: int, seed: int) -> Path:
        """SFT on the first ``demos`` expert episodes of the train split; returns the model folder."""
        from turngym.trainers.sft import TurnGymSFTConfig, run_sft

        folder = self.out / f"seed{seed}" / f"sft-{demos}demos"
        if self._done(folder):
            return folder / "model"
        self._stage(f"SFT warm start on {demos} expert demos (seed {seed})")
        started = time.perf_counter()
        config = TurnGymSFTConfig(**{
            **self.config.world, **(self.config.sft or {}), "num_demos": demos, "output_dir": str(folder / "model"),
            "eval_split": None, "seed": seed, "save_strategy": "no", "report_to": "none",
            "disable_tqdm": not self.progress})
        run_sft(config)
        stats = json.loads((folder / "model" / "sft_demos.json").read_text())
        elapsed = time.perf_counter() - started
        self._mark_done(folder, {"seconds": elapsed, "demos": stats})
        release_freed_memory()
        return folder / "model"

    def rl_config(self, arm: Arm, start: str, seed: int, folder: Path) -> Any:
        """The :class:`~turngym.trainers.config.TurnGymConfig` of one RL arm: the study's ``rl`` fields, the
        algorithm's overrides, the budget as ``max_steps``, and the learning-curve evaluation."""
        from turngym.trainers.config import TurnGymConfig

        overrides = dict(self.config.algorithms.get(arm.algorithm or "", {}))
        if arm.algorithm and "algorithm" not in overrides and arm.algorithm in _algorithm_names():
            overrides["algorithm"] = arm.algorithm
        overrides.pop("null", None)
        if arm.null and arm.null_kind == "lr0":
            overrides["learning_rate"] = 0.0
        elif arm.null:
            overrides["shuffle_advantages"] = True
        fields_ = {**self.config.world, **self.config.rl, **overrides, "model_name_or_path": start,
                   "output_dir": str(folder / "trainer"), "seed": seed, "report_to": "none", "logging_steps": 1,
                   "disable_tqdm": not self.progress}
        # RL plays other games than the SFT demos (the train split's first `demos` tasks), unless told otherwise.
        fields_.setdefault("skip_train_tasks", arm.demos)
        per_step = episodes_per_step(TurnGymConfig(**fields_))
        if arm.episodes % per_step:
            raise ValueError(f"{arm.label}: the budget of {arm.episodes} episodes is not a whole number of steps of "
                             f"{per_step} episodes "
                             "(per_device_train_batch_size x gradient_accumulation_steps x processes)")
        steps = arm.episodes // per_step
        evaluation = self.config.evaluation
        # Held-out curve points inside the run come from curve_callback; its two ends are the start
        # policy's and the final policy's evaluations, restricted to the curve's tasks.
        fields_.update(eval_split=evaluation.split if evaluation.curve_points > 2 else None,
                       num_eval_tasks=evaluation.curve_tasks, eval_temperature=evaluation.temperature,
                       eval_strategy="no")
        if fields_.get("save_strategy", "steps") != "no" and not fields_.get("save_steps"):
            fields_["save_steps"] = max(1, steps // 4)  # checkpoints only serve resuming this stage
        fields_.setdefault("save_total_limit", 1)  # the newest checkpoint is all a resume needs
        return TurnGymConfig(**{**fields_, "max_steps": steps}).resolve()

    def rl_stage(self, arm: Arm, start: Path | str, seed: int) -> Path:
        """RL from ``start`` for the arm's episode budget; returns the policy folder."""
        from turngym.agents.models import load_policy
        from turngym.trainers.trainer import EPISODE_SAMPLES, TurnGymTrainer

        folder = self.out / f"seed{seed}" / arm.label
        if self._done(folder):
            return folder / "policy"
        config = self.rl_config(arm, str(start), seed, folder)
        per_step = episodes_per_step(config)
        self._stage(f"{arm.label}: {config.algorithm} for {arm.episodes} episodes "
                    f"({config.max_steps} steps of {per_step}) from {start} (seed {seed})")
        started = time.perf_counter()
        model, tokenizer = load_policy(str(start))
        points = self.config.evaluation.curve_points
        interior = sorted({round(config.max_steps * k / (points - 1)) for k in range(1, points - 1)}
                          - {0, config.max_steps})
        trainer = TurnGymTrainer(model=model, args=config, processing_class=tokenizer,
                                 eval_tasks=self._curve_tasks() if interior else None)
        trainer.add_callback(curve_callback(trainer, interior))
        checkpoints = sorted((folder / "trainer").glob("checkpoint-*"))
        trainer.train(resume_from_checkpoint=True if checkpoints else None)
        save_policy(trainer, folder / "policy")
        history = trainer.state.log_history
        del trainer, model
        release_freed_memory()
        (folder / "log.json").write_text(json.dumps(history, indent=1))
        samples = folder / "trainer" / EPISODE_SAMPLES
        if samples.exists():  # the trainer's decoded episodes per step, for `turngym view`
            shutil.move(samples, folder / EPISODE_SAMPLES)
        shutil.rmtree(folder / "trainer", ignore_errors=True)  # checkpoints: only for resuming this stage
        steps = [h for h in history if "episode/return" in h]
        sampled = sum(h.get("episode/sampled_tokens", 0.0) * per_step for h in steps)
        self._mark_done(folder, {"seconds": time.perf_counter() - started, "algorithm": config.algorithm,
                                 "episodes": arm.episodes, "steps": config.max_steps,
                                 "episodes_per_step": per_step, "sampled_tokens": round(sampled),
                                 "start": str(start)})
        return folder / "policy"

    def _curve_tasks(self) -> Any:
        """The learning curve's panel: the first ``curve_tasks`` tasks of the held-out panel."""
        tasks = self.tasks("held_out")
        curve_tasks = self.config.evaluation.curve_tasks
        return tasks.take(curve_tasks) if curve_tasks < len(tasks) else tasks

    def eval_stage(self, label: str, model_path: Path | str, seed: int, panel: str) -> dict[str, Any]:
        """One policy on one held-out panel; the report plus every task's outcome."""
        from turngym.agents.evaluate import write_trajectories
        from turngym.agents.models import load_policy
        from turngym.trainers.rollout import evaluate_policy

        file = self.out / "evals" / label / f"seed{seed}-{panel}.json"
        if file.exists():
            return json.loads(file.read_text())
        self._stage(f"evaluate {label} (seed {seed}) on {panel}")
        started = time.perf_counter()
        world, tasks = self.world(None if panel == "held_out" else panel), self.tasks(panel)
        model, tokenizer = load_policy(str(model_path))
        evaluation = self.config.evaluation
        report = evaluate_policy(model, tokenizer, world, tasks, temperature=evaluation.temperature,
                                 seed=seed, batch=evaluation.batch, name=label, progress=self.progress,
                                 samples_per_task=evaluation.samples_per_task,
                                 pass_at=evaluation.pass_at_k or None)
        del model
        release_freed_memory()
        result = {
            "label": label, "seed": seed, "panel": panel, "seconds": time.perf_counter() - started,
            "peak_rss_gb": peak_rss_gb(), "report": report.to_dict(),
            "outcomes": [{"task": t.task.get("id"), "difficulty": t.task.get("difficulty"), "won": t.won,
                          "return": t.episode_reward, "turns": t.num_turns, "invalid": sum(t.invalid_actions),
                          "sample": t.sample}
                         for t in report.trajectories],
        }
        file.parent.mkdir(parents=True, exist_ok=True)
        # The episodes' text (no token ids) next to the numbers, for `turngym view`.
        write_trajectories(report.trajectories, file.with_suffix(".jsonl"), token_ids=False)
        file.write_text(json.dumps(result, indent=1))
        return result

    def train_panel(self) -> Any:
        """The tasks the study trains on: the first ``num_train_tasks`` of the train split (the SFT demos are
        its first ``num_demos``, RL plays the ones after them)."""
        from turngym.envs.panels import task_panel

        world = self.world()
        return task_panel(world.env_id, world.train_split, world.num_train_tasks, world.world_kwargs(),
                          progress=self.progress)

    def check_panels(self) -> dict[str, Any]:
        """Before any stage: every held-out panel is disjoint from the training panel, by task and by content
        (:func:`~turngym.envs.tasks.assert_disjoint`, a SplitOverlapError naming the shared tasks), and the
        summary says how many held-out tasks share a quest template with a training task."""
        from turngym.envs.panels import template_overlap
        from turngym.envs.tasks import assert_disjoint, split_overlaps

        if self.world().num_train_tasks is None:
            raise ValueError("world.num_train_tasks is not set: a study checks its held-out panels against the "
                             "games it trains on, so it names how many (the train split's first N)")
        train = self.train_panel()
        report = {}
        for panel in self.panel_names():
            held_out = self.tasks(panel)
            if self.config.evaluation.overlap != "report":
                assert_disjoint(train, held_out, hint=f" (panel {panel}; a world whose splits share tasks by "
                                "design, like Signals, can run with evaluation.overlap: report)")
            report[panel] = {**template_overlap(train, held_out),
                             "shared_with_train": len({task.id for task, _ in split_overlaps(train, held_out)}),
                             "fingerprint": held_out.fingerprint}
        return {"train": {"taskset": train.name, "tasks": len(train), "fingerprint": train.fingerprint}, **report}

    def seed_independent(self, arm: Arm) -> bool:
        """An arm whose evaluation no seed changes: untrained (the base model) and played greedily."""
        return not arm.demos and not arm.trains_rl and not self.config.evaluation.temperature

    def reused_eval(self, label: str, first_seed: int, seed: int, panel: str) -> dict[str, Any]:
        """The first seed's evaluation of a :meth:`seed_independent` arm, standing for ``seed``: the base model
        is evaluated once per study, and its outcomes pair with every seed's policies on the same tasks."""
        result = json.loads((self.out / "evals" / label / f"seed{first_seed}-{panel}.json").read_text())
        return {**result, "seed": seed, "seconds": 0.0, "reused_from_seed": first_seed}

    # ---------------------------------------------------------------- the whole study
    def run(self) -> dict[str, Any]:
        """Every stage of every arm for every seed (finished stages are skipped); the summary."""
        base = self.world().model_name_or_path
        evals: dict[str, list[dict[str, Any]]] = {arm.label: [] for arm in self.arms}
        stages: dict[str, dict[str, Any]] = {}
        self.panel_check = self.check_panels()
        self._plan = self.stage_plan()
        for seed in self.config.seeds:
            for arm in self.arms:
                start: Path | str = base
                if arm.demos:
                    start = self.sft_stage(arm.demos, seed)
                    stages[f"seed{seed}/sft-{arm.demos}demos"] = self._done(start.parent) or {}
                policy = start
                if arm.trains_rl:
                    policy = self.rl_stage(arm, start, seed)
                    stages[f"seed{seed}/{arm.label}"] = self._done(policy.parent) or {}
                for panel in self.panel_names():
                    if seed != self.config.seeds[0] and self.seed_independent(arm):
                        evals[arm.label].append(self.reused_eval(arm.label, self.config.seeds[0], seed, panel))
                    else:
                        evals[arm.label].append(self.eval_stage(arm.label, policy, seed, panel))
                if arm.trains_rl and not self.config.keep_models:
                    shutil.rmtree(policy, ignore_errors=True)
        write_json(self.out / OUTCOMES, outcome_record(self.config.name, evals, self.arms,
                                                       {p: self.tasks(p).fingerprint for p in self.panel_names()}))
        return self.summarise(evals, stages)

    def summarise(self, evals: Mapping[str, list[dict[str, Any]]],
                  stages: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
        """Every number of the study (also written to ``summary.json``)."""
        reference = next((a.label for a in self.arms if a.demos and not a.trains_rl), None) or self.arms[0].label
        arms = {}
        for arm in self.arms:
            arms[arm.label] = {
                **asdict(arm),
                "panels": {panel: panel_summary(evals[arm.label], evals[reference], panel)
                           for panel in self.panel_names()},
                "rl": [stages[k] for k in stages if k.endswith(f"/{arm.label}")],
            }
        return {
            "name": self.config.name,
            "reference_arm": reference,
            "arms": arms,
            "stages": dict(stages),
            "pairwise": pairwise_differences(evals, [a.label for a in self.arms if a.trains_rl]),
            "curves": {arm.label: self.curves(arm) for arm in self.arms if arm.trains_rl},
            "curve_reference": self.curve_reference(),
            "stage_seconds": sum(s.get("seconds", 0.0) for s in stages.values())
            + sum(e["seconds"] for rows in evals.values() for e in rows),
            "peak_rss_gb": max((peak for record in [*stages.values(), *(e for rows in evals.values() for e in rows)]
                                if (peak := record.get("peak_rss_gb")) is not None), default=None),
            "panels": {p: {"taskset": self.tasks(p).name, "fingerprint": self.tasks(p).fingerprint}
                       for p in self.panel_names()},
            "panel_check": self.panel_check,
            "preregistered": _plan_record(self.config.preregistered),
            "versions": _versions(),
            "config": self.config.to_dict(),
        }

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


# ---------------------------------------------------------------------- the trainer's side, and the record
def save_policy(trainer: Any, folder: Path) -> None:
    """The trained policy as a plain model folder: a LoRA run's adapters are merged into the weights first, so
    every evaluation loads the policy the same way."""
    from accelerate.utils import is_peft_model

    policy = trainer.accelerator.unwrap_model(trainer.model)
    if not is_peft_model(policy):
        trainer.save_model(str(folder))
        return
    if trainer.accelerator.is_main_process:
        policy.merge_and_unload().save_pretrained(str(folder))
        trainer.processing_class.save_pretrained(str(folder))
    trainer.accelerator.wait_for_everyone()


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


def episodes_per_step(config: Any) -> int:
    """Episodes one optimizer step of a :class:`~turngym.trainers.config.TurnGymConfig` consumes."""
    return config.per_device_train_batch_size * config.gradient_accumulation_steps * config.world_size


def _algorithm_names() -> tuple[str, ...]:
    """The registered estimators' names (an arm labelled with one trains it unless its entry names another)."""
    from turngym.trainers.estimators import estimator_names

    return estimator_names()


def _plan_record(path: str | None) -> dict[str, Any] | None:
    """A pre-registered plan's path, sha256 and the commit that last changed it (None outside git)."""
    if not path:
        return None
    import hashlib
    import subprocess

    file = Path(path)
    try:
        commit = subprocess.run(["git", "log", "-1", "--format=%H %cI", "--", file.name], check=False, cwd=file.parent,
                                capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"path": path, "sha256": hashlib.sha256(file.read_bytes()).hexdigest(), "commit": commit}


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("turngym", "torch", "transformers", "trl", "textworld", "alfworld"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1, default=str))
