"""The machinery behind the recipes: resumable stages, paired statistics, tables and plots.

A *study* trains and evaluates several *arms* on one world, each the same way:

    base model --(SFT on d expert demos)--> warm start --(RL, E episodes, one algorithm)--> policy
                                                       `--(RFT: E sampled episodes, the wins fine-tuned)--> policy
                                                                      |
                     every arm's policy plays the same held-out panels, greedily by default

:mod:`turngym.recipes.compare_algorithms` makes one arm per RL algorithm (same SFT checkpoint, same
episode budget) plus the base and SFT-only arms; :mod:`turngym.recipes.sft_rl_budget` makes one arm per
split of a fixed budget between demos and RL episodes.

An algorithm entry with ``algorithm: rft`` is rejection-sampling fine-tuning (expert iteration,
``turngym sft --demos policy``) at the same budget: ``rounds`` rounds, each sampling ``episodes / rounds``
episodes with the current policy, keeping the wins and fine-tuning on them (:meth:`Study.rft_stage`).

Everything lands in ``results/<name>/``. Each stage (an SFT run, an RL or RFT run, one evaluation) writes
its output folder and then a ``done.json``; a rerun skips finished stages and an interrupted RL run
resumes from its last checkpoint, so ``Ctrl-C`` loses at most ``save_steps`` steps (an interrupted RFT run, at
most one round). A study can run its arms a few at a time into one folder (``only``: tier by tier); each call
tables every arm finished so far.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from turngym.recipes.study_clock import StudyClock, steps_callback
from turngym.recipes.study_config import (
    RESERVED_SPLITS,
    Arm,
    EvaluationOptions,
    StudyConfig,
    add_study_arguments,
    adds_seeds,
    load_config,
    resolve_backend,
)
from turngym.recipes.study_curves import CurveStages, curve_callback
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
from turngym.recipes.study_progress import PlannedStage, StagePlan, duration, study_progress
from turngym.recipes.study_rft import RFT, RFTStages
from turngym.recipes.study_tables import (
    INTERVAL_NOTE,
    cost_table,
    difference_cell,
    peak_memory,
    percent,
    print_outputs,
    recomputed_markdown,
    seed_table,
    seeds_cell,
    stage_costs,
    success_cell,
)

# The study's parts live in study_config (configuration, arms), study_outcomes (grids, statistics, the outcome
# record), study_tables (text), study_progress (the stage plan, stages done, time left), study_clock (saying it as
# stages run), study_memory, study_rft (the RFT arm's stages) and study_curves (learning curves); their names are
# importable from here as before.
__all__ = ["DONE", "INTERVAL_NOTE", "OUTCOMES", "RESERVED_SPLITS", "RFT", "Arm", "EvaluationOptions", "PlannedStage",
           "Study", "StudyConfig", "add_study_arguments", "adds_seeds", "cost_table", "curve_callback",
           "difference_cell", "duration", "episodes_per_step", "load_config", "moving_average", "outcome_record",
           "pairwise_differences", "panel_summary", "peak_memory", "peak_rss_gb", "percent", "print_outputs",
           "recompute", "recomputed_markdown", "release_freed_memory", "save_policy", "seed_table", "seeds_cell",
           "study_progress", "success_cell", "success_grid", "write_json"]

DONE = "done.json"


# ---------------------------------------------------------------------- the study
class MoreStagesRemain(Exception):
    """A study stopped at its ``max_train_stages``: the message names the next unfinished training stage."""


class Study(RFTStages, CurveStages, StagePlan):
    """Runs the arms of a :class:`StudyConfig` into ``results/<name>/``, resumably."""

    def __init__(self, config: StudyConfig, arms: Sequence[Arm], *, only: Iterable[str] | None = None,
                 restart: bool = False, progress: bool = True, max_train_stages: int | None = None) -> None:
        """``arms``: every arm of the study, in its order. ``only``: the labels of the arms this call runs (None:
        all); every other arm is left alone, and is in the tables if all its stages have finished (an earlier call
        ran it), so a study's arms can run a few at a time, tier by tier, into one folder. ``max_train_stages``:
        run at most that many RL (or RFT) stages, each with its evaluations, then raise :class:`MoreStagesRemain`
        before the next unfinished one (None: no limit)."""
        self.config = config
        self.train_stages_left = max_train_stages
        self.progress = progress
        self.out = Path(config.results_dir) / config.name
        # hf or vllm: RL rollouts, RFT sampling and held-out evaluations generate with it (auto: vllm where
        # `import vllm` works)
        self.backend, self.backend_reason = resolve_backend(config.backend)
        self._engine: Any = None  # the evaluations' vLLM engine, built once and synced to each policy
        if restart and self.out.exists():
            shutil.rmtree(self.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self._check_same_config()
        from turngym.envs.registry import import_worlds

        import_worlds(self.config.world.get("imports") or [])  # they may register the world whose panels this looks up
        labels = [arm.label for arm in arms]
        chosen = set(labels) if only is None else set(only)
        unknown = sorted(chosen - set(labels))
        if unknown:
            raise ValueError(f"no arm {', '.join(unknown)} in study {config.name}; its arms are {', '.join(labels)}")
        self.all_arms = list(arms)
        self.run_labels = [label for label in labels if label in chosen]  # the arms this call runs
        # The tables' arms: the ones run now and every other one already finished, in the study's order.
        self.arms = [arm for arm in arms if arm.label in chosen or self.finished(arm)]
        self.left_out = [arm.label for arm in arms if arm not in self.arms]  # neither run now nor finished
        self._panels: dict[str, Any] = {}
        self.panel_check: dict[str, Any] | None = None  # check_panels()'s report, once run() made it
        self.clock: StudyClock | None = None  # run()'s stage lines and live status

    # ---------------------------------------------------------------- bookkeeping
    @staticmethod
    def changed_options(config: StudyConfig) -> list[str]:
        """Top-level options that differ from the run already in ``results/<name>/`` (none: resumable). The backend
        is not one of them: the backend the run resolved to is checked by itself (:meth:`recorded_backend`); nor is
        ``results_dir``, which says where the run is, not what it is (``results`` and ``/abs/path/results`` are one)."""
        saved = Path(config.results_dir) / config.name / "config.json"
        if not saved.exists():
            return []
        before, current = json.loads(saved.read_text()), json.loads(json.dumps(config.to_dict()))
        for where in ("backend", "results_dir"):
            before.pop(where, None)
            current.pop(where, None)
        # A run saved before an evaluation option existed ran with that option's default.
        before["evaluation"] = {**asdict(EvaluationOptions()), **(before.get("evaluation") or {})}
        if adds_seeds(before.get("seeds") or [], current.get("seeds") or []):
            before["seeds"] = current["seeds"]  # more seeds of the same study: each seed's stages are its own
        return sorted(k for k in set(before) | set(current) if before.get(k) != current.get(k))

    @staticmethod
    def recorded_backend(config: StudyConfig) -> str | None:
        """The generation backend the study in ``results/<name>/`` ran on (its ``config.json``; a study saved before
        backends were recorded evaluated on HF), or None where no study is saved yet."""
        saved = Path(config.results_dir) / config.name / "config.json"
        if not saved.exists():
            return None
        return json.loads(saved.read_text()).get("backend", "hf")

    def _check_same_config(self) -> None:
        saved = self.out / "config.json"
        current = {**self.config.to_dict(), "backend": self.backend}  # the backend it resolved to, not "auto"
        if saved.exists():
            changed = self.changed_options(self.config)
            if changed:
                raise ValueError(
                    f"{self.out} holds a study run with a different config (changed: {', '.join(changed)}); resume it "
                    "with the same config (or the same seeds and more after them), pick another name, or start over "
                    "with --restart")
            recorded = self.recorded_backend(self.config)
            if recorded != self.backend:
                raise ValueError(
                    f"{self.out} ran on the {recorded} backend and this run resolves to {self.backend} "
                    f"({self.backend_reason}); their outcomes differ within the numerical gap, so a study stays on "
                    f"one: resume it with --backend {recorded} (backend: {recorded}) where it imports, or start over "
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

    def backend_line(self) -> str:
        """The one line a study opens with: which backend generates, and why."""
        what = ("vLLM (a colocated engine: RL rollouts, RFT sampling and held-out evaluations)"
                if self.backend == "vllm" else "HF (transformers)")
        return f"study {self.config.name}: generation on {what}; {self.backend_reason}"

    def _stage(self, title: str) -> None:
        if self.clock is not None:
            self.clock.begin(title)
        elif self.progress:
            print(f"\n== {title}", flush=True)

    def world(self, panel: str | None = None) -> Any:
        """World options (a panel's overrides merged in) as a :class:`~turngym.trainers.config.WorldOptions`."""
        from turngym.trainers.config import WorldOptions

        fields_ = dict(self.config.world)
        fields_["env_kwargs"] = dict(fields_.get("env_kwargs") or {})
        for key, value in (self.config.evaluation.panels.get(panel, {}) if panel else {}).items():
            if key == "env_kwargs":
                fields_["env_kwargs"].update(value)
            elif key != "num_tasks":  # the panel's size (tasks()), not a world option
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
            first, n = evaluation.first_task, evaluation.panel_size(panel)
            tasks = task_panel(world.env_id, evaluation.split, n, world.world_kwargs(), first=first,
                               progress=self.progress)
            if len(tasks) < n:
                raise ValueError(f"evaluation: the {evaluation.split} split of {world.env_id} has {first + len(tasks)} "
                                 f"tasks, not the {first + n} that first_task {first} and num_tasks {n} need")
            self._panels[panel] = tasks
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

        if self.rft_entry(arm) is not None:
            raise ValueError(f"{arm.label} is an RFT arm (algorithm: {RFT}): it trains through rft_config, not RL")
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
        # The study's backend decides RL's generation: TRL's vLLM integration (colocated unless rl says server).
        fields_["use_vllm"] = self.backend == "vllm"
        if self.backend == "vllm":
            fields_.setdefault("vllm_mode", "colocate")
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
        trainer.add_callback(steps_callback(self.clock))
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
                                 "start": str(start), "backend": self.backend})
        return folder / "policy"

    def train_stage(self, arm: Arm, start: Path | str, seed: int) -> Path:
        """The arm's training from ``start``: RFT for an RFT arm, else RL; returns the policy folder."""
        if self.rft_entry(arm) is not None:
            return self.rft_stage(arm, start, seed)
        return self.rl_stage(arm, start, seed)

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
                                 pass_at=evaluation.pass_at_k or None,
                                 backend=self.eval_engine(model_path, model, seed) if self.backend == "vllm" else None)
        del model
        release_freed_memory()
        result = {
            "label": label, "seed": seed, "panel": panel, "backend": self.backend,
            "seconds": time.perf_counter() - started,
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
        self.write_outcomes(self.evals_on_disk())  # each evaluation's outcomes are in outcomes.json as it ends
        return result

    def evals_on_disk(self, arms: Sequence[Arm] | None = None) -> dict[str, list[dict[str, Any]]]:
        """Every evaluation record the study's folder holds for ``arms`` (default: the tables' arms), seeds and
        panels, in the plan's order (a seed-independent arm's first-seed record standing for the other seeds): the
        outcomes so far, whichever call or process evaluated them."""
        evals: dict[str, list[dict[str, Any]]] = {}
        first = self.config.seeds[0]
        for seed in self.config.seeds:
            for arm in self.arms if arms is None else arms:
                own = first if seed != first and self.seed_independent(arm) else seed
                for panel in self.panel_names():
                    file = self.out / "evals" / arm.label / f"seed{own}-{panel}.json"
                    if file.is_file():
                        evals.setdefault(arm.label, []).append(json.loads(file.read_text()) if own == seed else
                                                               self.reused_eval(arm.label, own, seed, panel))
        return evals

    def eval_engine(self, model_path: Path | str, model: Any, seed: int) -> Any:
        """The evaluations' vLLM backend holding ``model``'s weights: one colocated engine for the whole study, built
        from the first policy evaluated (in its dtype) and synced to each later one (a study's policies share the base
        model's architecture; a LoRA arm's policy is saved merged). Its random stream is reseeded with ``seed``, so a
        sampled evaluation does not depend on what the engine played before (on CPU vLLM draws from torch's global
        generator; greedy evaluations draw nothing; :meth:`~turngym.agents.backends.VLLMBackend.holding`)."""
        from turngym.agents.backends import VLLMBackend
        from turngym.agents.models import resolve_model

        self._engine = VLLMBackend.holding(model, resolve_model(str(model_path)), self._engine, seed=seed)
        return self._engine

    def train_panel(self) -> Any:
        """The tasks the study trains on: the train split's first :meth:`training_games` (the SFT demos are its
        first ``num_demos``; RL plays ``num_train_tasks`` after them, RFT samples its rounds' games after them)."""
        from turngym.envs.panels import task_panel

        world = self.world()
        return task_panel(world.env_id, world.train_split, self.training_games(), world.world_kwargs(),
                          progress=self.progress)

    def training_games(self) -> int:
        """How many of the train split's first games any arm of the study trains on: its SFT demos, an RL arm's
        ``skip_train_tasks`` + ``num_train_tasks``, an RFT arm's ``skip_train_tasks`` + episodes / samples a game."""
        count = self.world().num_train_tasks or 0
        for arm in self.all_arms:
            count = max(count, arm.demos)
            if not arm.trains_rl:
                continue
            entry = self.config.algorithms.get(arm.algorithm or "", {})
            if (rft := self.rft_entry(arm)) is not None:
                rft = {**(self.config.sft or {}), **rft}
                count = max(count, rft.get("skip_train_tasks", arm.demos)
                            + arm.episodes // int(rft.get("demo_samples_per_task", 1)))
            else:
                count = max(count, {**self.config.rl, **entry}.get("skip_train_tasks", arm.demos)
                            + (self.world().num_train_tasks or 0))
        return count

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
        for arm in self.all_arms:  # before any stage (a later tier's too): an RFT budget that is not whole rounds
            if self.rft_entry(arm) is not None:
                self.rft_budget(arm)
        if self.progress:
            print(self.backend_line(), flush=True)
        self.panel_check = self.check_panels()
        with StudyClock(self.stage_plan(), enabled=self.progress) as self.clock:
            try:
                self.run_arms(base, evals, stages)
            except MoreStagesRemain:  # the outcomes so far (any call's), for `turngym stats` while the study goes on
                self.write_outcomes(self.evals_on_disk())
                raise
        self.write_outcomes(evals)
        return self.summarise(evals, stages)

    def partial_evals(self) -> dict[str, list[dict[str, Any]]]:
        """The evaluations on disk of the arms left out of the tables: an arm finished for some seeds only (a plan's
        stop rule can run an arm on one seed) keeps its outcomes in outcomes.json and its own table."""
        return self.evals_on_disk([arm for arm in self.all_arms if arm.label in self.left_out])

    def write_outcomes(self, evals: Mapping[str, list[dict[str, Any]]]) -> None:
        write_json(self.out / OUTCOMES, outcome_record(self.config.name, {**evals, **self.partial_evals()},
                                                       self.all_arms,
                                                       {p: self.tasks(p).fingerprint for p in self.panel_names()}))

    def run_arms(self, base: str, evals: dict[str, list[dict[str, Any]]], stages: dict[str, dict[str, Any]]) -> None:
        """Every arm's stages for every seed, in the plan's order (finished ones skipped), recorded in the dicts."""
        for seed in self.config.seeds:
            for arm in self.arms:
                start: Path | str = base
                if arm.demos:
                    start = self.sft_stage(arm.demos, seed)
                    stages[f"seed{seed}/sft-{arm.demos}demos"] = self._done(start.parent) or {}
                policy = start
                if arm.trains_rl:
                    self.count_train_stage(arm, seed)
                    policy = self.train_stage(arm, start, seed)
                    stages[f"seed{seed}/{arm.label}"] = self._done(policy.parent) or {}
                for panel in self.panel_names():
                    if seed != self.config.seeds[0] and self.seed_independent(arm):
                        evals[arm.label].append(self.reused_eval(arm.label, self.config.seeds[0], seed, panel))
                    else:
                        evals[arm.label].append(self.eval_stage(arm.label, policy, seed, panel))
                if arm.trains_rl and not self.config.keep_models:
                    shutil.rmtree(policy, ignore_errors=True)

    def count_train_stage(self, arm: Arm, seed: int) -> None:
        """Before an arm's training for ``seed``: an unfinished stage uses one of ``max_train_stages``, and none left
        stops the study here (:class:`MoreStagesRemain`)."""
        if self.train_stages_left is None or self._done(self.out / f"seed{seed}" / arm.label):
            return
        if self.train_stages_left <= 0:
            raise MoreStagesRemain(f"{arm.label}, seed {seed}")
        self.train_stages_left -= 1

    def summarise(self, evals: Mapping[str, list[dict[str, Any]]],
                  stages: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
        """Every number of the study (also written to ``summary.json``)."""
        reference = next((a.label for a in self.arms if a.demos and not a.trains_rl), None) or self.arms[0].label
        arms = {}
        for arm in self.arms:
            arms[arm.label] = {
                **asdict(arm),
                "rft": self.rft_entry(arm) is not None,
                "panels": {panel: panel_summary(evals[arm.label], evals[reference], panel)
                           for panel in self.panel_names()},
                "rl": [stages[k] for k in stages if k.endswith(f"/{arm.label}")],
            }
        partial_rows = self.partial_evals()
        partial = {label: {"seeds": sorted({row["seed"] for row in rows}),
                           "panels": {panel: panel_summary(rows, evals[reference], panel)
                                      for panel in self.panel_names()}}
                   for label, rows in partial_rows.items()}
        rl_labels = [a.label for a in self.all_arms if a.trains_rl and (a in self.arms or a.label in partial)]
        return {
            "name": self.config.name,
            "reference_arm": reference,
            "arms": arms,
            "partial_arms": partial,  # left-out arms evaluated for some seeds: paired with the reference on those
            "stages": dict(stages),
            # the RL arms against each other (paired on the seeds both played), a partly run one's too
            "pairwise": pairwise_differences({**evals, **partial_rows}, rl_labels),
            "curves": {arm.label: self.curves(arm) for arm in self.all_arms if arm.label in rl_labels},
            "curve_reference": self.curve_reference(),
            "stage_seconds": sum(s.get("seconds", 0.0) for s in stages.values())
            + sum(e["seconds"] for rows in evals.values() for e in rows),
            "stage_costs": stage_costs(stages, evals),
            "peak_rss_gb": max((peak for record in [*stages.values(), *(e for rows in evals.values() for e in rows)]
                                if (peak := record.get("peak_rss_gb")) is not None), default=None),
            "panels": {p: {"taskset": self.tasks(p).name, "fingerprint": self.tasks(p).fingerprint}
                       for p in self.panel_names()},
            "panel_check": self.panel_check,
            "arms_run": list(self.run_labels),  # this call's arms; the others in "arms" had finished before it
            "arms_left_out": list(self.left_out),  # the study's arms neither run by this call nor finished
            "preregistered": _plan_record(self.config.preregistered),
            "backend": {"requested": self.config.backend, "resolved": self.backend, "why": self.backend_reason},
            "versions": _versions(),
            "config": self.config.to_dict(),
        }

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
    """``data`` as JSON at ``path``, replaced whole (a temporary file renamed over it), so a reader or a cut run
    never sees half a file."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=1, default=str))
    partial.replace(path)
