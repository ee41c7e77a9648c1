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

import ctypes
import gc
import json
import shutil
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

DONE = "done.json"
OUTCOMES = "outcomes.json"  # every (arm, seed, panel, task) outcome: small, meant to be committed beside a table
RESERVED_SPLITS = frozenset({"test"})  # held out from every recipe's tuning (envs/textworld/generation.py)


# ---------------------------------------------------------------------- configuration
def adds_seeds(before: Sequence[Any], current: Sequence[Any]) -> bool:
    """Whether ``current`` is a study's seeds ``before`` (in order) and more after them: the finished seeds'
    stages stay valid, and the first seed, whose evaluations seed-independent arms reuse, stays first."""
    return len(current) > len(before) > 0 and list(current[:len(before)]) == list(before)


@dataclass
class EvaluationOptions:
    """How every arm is evaluated: the held-out panel, extra panels, and the learning curve."""

    split: str = "eval"
    num_tasks: int = 100
    first_task: int = 0  # the panel is tasks first_task .. first_task + num_tasks - 1 of the split (fresh games)
    temperature: float = 0.0  # 0: greedy, so the only randomness left in the table is the task sample
    panels: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> WorldOptions overrides
    curve_tasks: int = 20  # the first N held-out tasks, played at each learning-curve point
    curve_points: int = 3  # held-out points per RL run, both ends included (0: no held-out curve)
    batch: int = 16  # episodes played side by side (one forward pass per decoding step for all of them)
    samples_per_task: int = 1  # n > 1: each held-out task is played n times (needs temperature > 0) for pass@k
    pass_at_k: list[int] = field(default_factory=list)  # pass@k in the results table, each k <= n (default: 1, n)
    overlap: str = "refuse"  # held-out tasks equal to training tasks: "refuse" the study, or "report" their count


@dataclass
class StudyConfig:
    """What :mod:`turngym.recipes.compare_algorithms` and :mod:`turngym.recipes.sft_rl_budget` read from YAML.

    ``world`` holds :class:`~turngym.trainers.config.WorldOptions` fields shared by every stage; ``sft``
    holds :class:`~turngym.trainers.sft.TurnGymSFTConfig` fields and ``rl`` holds
    :class:`~turngym.trainers.config.TurnGymConfig` fields (both TRL configs: any of their fields works).
    """

    name: str
    world: dict[str, Any]
    rl: dict[str, Any] = field(default_factory=dict)
    sft: dict[str, Any] | None = None
    algorithms: dict[str, dict[str, Any]] = field(default_factory=dict)  # compare: label -> rl overrides
    episodes: int = 128  # compare: RL episodes per algorithm and seed
    budget: int = 400  # sft_rl_budget: episodes; a demo costs demo_cost episodes
    demo_cost: int = 10
    demos: list[int] = field(default_factory=list)  # sft_rl_budget: the demo counts swept
    seeds: list[int] = field(default_factory=lambda: [0])
    evaluation: EvaluationOptions = field(default_factory=EvaluationOptions)
    results_dir: str = "results"
    keep_models: bool = True  # False: delete each trained policy once it is evaluated
    preregistered: str | None = None  # the committed plan of a study that evaluates on a reserved split

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StudyConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown study option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        data = dict(data)
        evaluation = dict(data.pop("evaluation", None) or {})
        bad = sorted(set(evaluation) - {f.name for f in fields(EvaluationOptions)})
        if bad:
            raise ValueError(f"unknown evaluation option(s) {', '.join(bad)}")
        if "name" not in data or "world" not in data:
            raise ValueError("a study config needs at least 'name' (results/<name>/) and 'world' (the world options)")
        data["algorithms"] = {label: _yaml_keys(label, overrides or {})
                              for label, overrides in (data.get("algorithms") or {}).items()}
        config = cls(**data, evaluation=EvaluationOptions(**evaluation))
        config.check()
        return config

    def check(self) -> None:
        from turngym.trainers.config import WorldOptions

        world_fields = {f.name for f in fields(WorldOptions)}
        bad = sorted(set(self.world) - world_fields)
        if bad:
            raise ValueError(f"world: unknown option(s) {', '.join(bad)}; "
                             f"world options are {', '.join(sorted(world_fields))}")
        if not self.seeds:
            raise ValueError("seeds must list at least one seed")
        if any(not isinstance(s, int) for s in self.seeds) or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct integers, got {self.seeds}")
        if not self.name or any(c in self.name for c in "/\\") or self.name.startswith("."):
            raise ValueError(f"name must be a plain folder name, got {self.name!r}")
        evaluation = self.evaluation
        if evaluation.first_task < 0 or evaluation.num_tasks < 1:
            raise ValueError(f"evaluation: first_task must be at least 0 and num_tasks at least 1, got "
                             f"{evaluation.first_task} and {evaluation.num_tasks}")
        if evaluation.samples_per_task < 1:
            raise ValueError(f"evaluation.samples_per_task must be at least 1, got {evaluation.samples_per_task}")
        too_big = [k for k in evaluation.pass_at_k if not 1 <= k <= evaluation.samples_per_task]
        if too_big:
            raise ValueError(f"evaluation.pass_at_k {too_big}: each k must be between 1 and samples_per_task "
                             f"({evaluation.samples_per_task}); raise evaluation.samples_per_task")
        splits = {evaluation.split, *(p.get("split", evaluation.split) for p in evaluation.panels.values())}
        if RESERVED_SPLITS & splits and not self.preregistered:
            raise ValueError(
                f"the {', '.join(sorted(RESERVED_SPLITS & splits))} split is reserved: no recipe is tuned on it. A "
                "study that evaluates on it names its pre-registered plan, committed before the run "
                "(preregistered: docs/plans/<plan>.md: hypothesis, recipe, seeds, panel, analysis)")
        if self.preregistered and not Path(self.preregistered).is_file():
            raise ValueError(f"preregistered: no plan at {self.preregistered}")
        if evaluation.overlap not in ("refuse", "report"):
            raise ValueError(f"evaluation.overlap must be 'refuse' or 'report', got {evaluation.overlap!r}")
        if evaluation.samples_per_task > 1 and not evaluation.temperature:
            raise ValueError(f"evaluation.samples_per_task {evaluation.samples_per_task} at temperature 0 (greedy) "
                             "plays the same episode every time; set evaluation.temperature (e.g. 0.7) for pass@k")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_config(path: str | Path, **overrides: Any) -> StudyConfig:
    """A study config from YAML; ``overrides`` (not None) replace top-level keys."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no study config at {path}")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a study config is a YAML mapping, got {type(data).__name__}")  # noqa: TRY004 - a config error, reported like the others
    data.update({k: v for k, v in overrides.items() if v is not None})
    return StudyConfig.from_dict(data)


def _yaml_keys(label: str, overrides: Mapping[Any, Any]) -> dict[str, Any]:
    """An algorithm entry's overrides with string keys. YAML reads a bare ``null:`` key as None, so the
    documented ``{algorithm: turn_rloo, null: true}`` arrives as ``{None: True}``; it means ``null``."""
    if not isinstance(overrides, Mapping):
        raise ValueError(  # noqa: TRY004 - a config error, reported like the others
            f"algorithms.{label}: expected a mapping of rl overrides, got {type(overrides).__name__}")
    keyed = {"null" if key is None else key: value for key, value in overrides.items()}
    bad = [key for key in keyed if not isinstance(key, str)]
    if bad:
        raise ValueError(f"algorithms.{label}: option names must be strings, got {bad}")
    return keyed


# ---------------------------------------------------------------------- arms
@dataclass(frozen=True)
class Arm:
    """One policy of a study: ``demos`` SFT demos (0: none), then ``episodes`` RL episodes of ``algorithm``.

    ``null``: a null control, trained exactly like its algorithm but without its signal. ``null_kind``
    "shuffle" (the default, the fair null) permutes each step's advantages within each group and turn
    index (``shuffle_advantages``, ``shuffle_scope: group``): every group keeps its sum, tied groups stay
    at 0, so the null takes the real arm's steps with the signal's direction removed; what an RL arm gains
    over it is what its reward signal taught. "lr0" runs the same steps at learning rate 0: the policy
    is the start policy passed through the whole pipeline (rollouts, saving, merging), so it measures
    what RL steps cost by themselves.
    """

    label: str
    demos: int = 0
    algorithm: str | None = None  # a key of StudyConfig.algorithms, or the rl config's own algorithm
    episodes: int = 0
    null: bool = False
    null_kind: str = "shuffle"  # "shuffle" (advantages permuted within groups) or "lr0" (learning rate 0)

    @property
    def trains_rl(self) -> bool:
        return self.episodes > 0


# ---------------------------------------------------------------------- statistics
def moving_average(values: Sequence[float], window: int) -> list[float]:
    """Trailing mean over the last ``window`` values (fewer at the start)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


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


def peak_rss_gb() -> float | None:
    """This process's peak resident memory so far, in GB (Linux: VmHWM; elsewhere ru_maxrss; None if neither).

    Every stage records it when it ends, so a study run over several sessions keeps each leg's peak even when the
    leg is killed (``/usr/bin/time -v`` reports only on a normal exit). A stage's own peak is at most its value."""
    try:  # VmHWM rather than ru_maxrss: after fork and exec, ru_maxrss still counts the parent's peak
        with open("/proc/self/status") as status:
            kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
        return round(kib * 1024 / 1e9, 2)
    except (OSError, StopIteration):
        try:
            import resource  # not on Windows
        except ImportError:
            return None
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # bytes on macOS, KiB elsewhere
        return round((peak if sys.platform == "darwin" else peak * 1024) / 1e9, 2)


def release_freed_memory() -> bool:
    """Collects garbage, then hands the pages that a finished stage freed back to the OS (glibc's
    ``malloc_trim(0)``); False where the C library has no such call (macOS, musl), after collecting.

    One process runs stage after stage. glibc keeps freed chunks of its heap resident, so a study's resident
    memory only rose (VmHWM 8.4 to 14.6 GB over one leg of the confirmatory study; its ``[heap]`` held 9.1 GB
    during an evaluation that needs about 1.6 GB in a fresh process). Python's gc cannot return those pages;
    malloc_trim releases free pages anywhere in the heap, not only at its top."""
    gc.collect()
    try:  # the process's own symbols: glibc's where it is the C library
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return False
    trim(0)
    return True


@dataclass(frozen=True)
class PlannedStage:
    """One stage of a study: its kind (``sft``, ``rl`` or ``eval``) and the file that marks it finished."""

    kind: str
    marker: Path

    @property
    def finished(self) -> bool:
        return self.marker.exists()

    def seconds(self) -> float | None:
        """How long the finished stage took (its last leg, if it was resumed); None if unfinished or untimed."""
        seconds = json.loads(self.marker.read_text()).get("seconds") if self.finished else None
        return None if seconds is None else float(seconds)


def time_left(finished: Mapping[str, Sequence[float]], kinds_left: Sequence[str]) -> float | None:
    """Seconds a study still needs at the pace of its finished stages, per kind of stage k:

        T_left = sum over stages s left of mean(seconds of the finished stages of kind(s))

    None while some kind left has no finished stage to measure (the first RL stage of a study, say)."""
    if any(not finished.get(kind) for kind in kinds_left):
        return None
    return sum(sum(finished[kind]) / len(finished[kind]) for kind in kinds_left)


def study_progress(plan: Sequence[PlannedStage]) -> str:
    """'stage 7 of 20; about 5.9 h left ...': where a long study stands, from its stages' markers on disk."""
    finished: dict[str, list[float]] = {}
    kinds_left = []
    for stage in plan:
        if not stage.finished:
            kinds_left.append(stage.kind)
        elif (seconds := stage.seconds()) is not None:
            finished.setdefault(stage.kind, []).append(seconds)
    done = len(plan) - len(kinds_left)
    line = f"study: stage {min(done + 1, len(plan))} of {len(plan)}"
    left = time_left(finished, kinds_left)
    if left is None:
        unmeasured = sorted({kind for kind in kinds_left if kind not in finished})
        return f"{line}; time left: estimated once a stage of each kind ({', '.join(unmeasured)}) has run"
    timed = sum(len(seconds) for seconds in finished.values())
    return f"{line}; about {duration(left)} left at the pace of the {timed} finished"


def duration(seconds: float) -> str:
    """62 -> '1 min', 7200 -> '2.0 h': the unit a person reads a long wait in."""
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{max(1, round(seconds / 60))} min"


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


def success_grid(rows: Iterable[dict[str, Any]], panel: str) -> dict[Any, dict[Any, float]]:
    """{seed: {task: success}} of one policy on ``panel``; with several samples per task
    (``samples_per_task``), a task's success is its mean over the samples."""
    grid: dict[Any, dict[Any, float]] = {}
    for (seed, task), won in _passes_by_task(rows, panel).items():
        grid.setdefault(seed, {})[task] = sum(won) / len(won)
    return grid


def _passes_by_task(rows: Iterable[dict[str, Any]], panel: str) -> dict[tuple[Any, Any], list[bool]]:
    """(seed, task) -> the outcome of each sample played on ``panel``."""
    passes: dict[tuple[Any, Any], list[bool]] = {}
    for r in rows:
        if r["panel"] == panel:
            for o in r["outcomes"]:
                passes.setdefault((r["seed"], o["task"]), []).append(bool(o["won"]))
    return passes


def pairwise_differences(evals: Mapping[str, list[dict[str, Any]]], labels: Sequence[str],
                         panel: str = "held_out") -> list[dict[str, Any]]:
    """Every pair (a, b) of ``labels``, a before b: a's success minus b's, paired by (seed, task)
    (:func:`~turngym.agents.intervals.paired_comparison`: the seeds x tasks interval, the t over seeds,
    the difference per seed). The ordering of the algorithms is read off these, not off the separate
    success rates."""
    from turngym.agents.intervals import paired_comparison

    out = []
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            out.append({"a": a, "b": b, **paired_comparison(success_grid(evals[a], panel),
                                                            success_grid(evals[b], panel))})
    return out


def panel_summary(rows: Iterable[dict[str, Any]], reference_rows: Iterable[dict[str, Any]],
                  panel: str) -> dict[str, Any]:
    """Pooled over seeds: success with its interval (over seeds and tasks when there are several seeds,
    else Wilson), per-seed rates, the paired difference to the reference arm on the same (seed, task)
    pairs (:func:`~turngym.agents.intervals.paired_comparison`), the breakdown by difficulty (Wilson,
    tasks treated as independent), and pass@k (when the evaluation played several samples per task)."""
    from turngym.agents.intervals import paired_comparison, pass_at_k_summary, success_interval, wilson_interval

    rows = [r for r in rows if r["panel"] == panel]
    outcomes = [(r["seed"], o) for r in rows for o in r["outcomes"]]
    n = len(outcomes)
    wins = sum(o["won"] for _, o in outcomes)
    turns = sum(o["turns"] for _, o in outcomes)
    mine = success_grid(rows, panel)
    success = success_interval(mine) if mine else {"ci95": [0.0, 1.0], "method": "no episodes"}
    by_difficulty: dict[str, list[bool]] = {}
    for _, o in outcomes:
        by_difficulty.setdefault(str(o["difficulty"]), []).append(o["won"])
    ks = sorted({p["k"] for r in rows for p in r["report"].get("pass_at_k", [])})
    passes = _passes_by_task(rows, panel)  # pass@k pools seeds: each (seed, task) is one unit of the bootstrap
    return {
        "pass_at_k": [asdict(pass_at_k_summary(passes, k)) for k in ks],
        "episodes": n,
        "success": wins / n if n else 0.0,
        "success_ci95": success["ci95"],
        "success_ci95_method": success["method"],
        "success_per_seed": {r["seed"]: r["report"]["overall"]["success_rate"] for r in rows},
        "return": sum(o["return"] for _, o in outcomes) / n if n else 0.0,
        "turns": turns / n if n else 0.0,
        "invalid_action_rate": sum(o["invalid"] for _, o in outcomes) / turns if turns else 0.0,
        "vs_reference": paired_comparison(mine, success_grid(reference_rows, panel)),
        "by_difficulty": {k: {"episodes": len(v), "success": sum(v) / len(v),
                              "success_ci95": wilson_interval(sum(v), len(v))}
                          for k, v in sorted(by_difficulty.items())},
        "taskset": rows[0]["report"]["taskset"] if rows else None,
        "protocol": rows[0]["report"]["action_protocol"] if rows else None,
    }


# ---------------------------------------------------------------------- outcomes: the numbers behind a table
def outcome_record(name: str, evals: Mapping[str, list[dict[str, Any]]], arms: Sequence[Arm],
                   fingerprints: Mapping[str, str]) -> dict[str, Any]:
    """Every outcome of a study, small enough to commit: {arm: {seed: {panel: {task: success}}}}, with each
    arm's kind (demos, RL episodes, null) and the panels' fingerprints. :func:`recompute` reads it back."""
    kinds = {arm.label: arm for arm in arms}
    record: dict[str, Any] = {"name": name, "panels": dict(fingerprints), "arms": {}}
    for label, rows in evals.items():
        arm = kinds[label]
        grids = {panel: success_grid(rows, panel) for panel in fingerprints}
        seeds = sorted({seed for grid in grids.values() for seed in grid}, key=str)
        record["arms"][label] = {
            "demos": arm.demos, "episodes": arm.episodes, "null": arm.null,
            "outcomes": {str(seed): {panel: grids[panel].get(seed, {}) for panel in grids} for seed in seeds},
        }
    return record


def recompute(record: Mapping[str, Any], reference: str | None = None, panel: str = "held_out") -> dict[str, Any]:
    """Every arm's success and paired difference to ``reference`` (default: the SFT-only arm, else the first)
    from an :func:`outcome_record`, with the intervals of :mod:`turngym.agents.intervals`."""
    from turngym.agents.intervals import paired_comparison, success_interval

    arms = record["arms"]
    if reference is None:
        reference = next((label for label, a in arms.items() if a["demos"] and not a["episodes"]), next(iter(arms)))
    if reference not in arms:
        raise ValueError(f"no arm {reference!r} in the outcomes; they have {', '.join(arms)}")

    def grid(label: str) -> dict[str, dict[str, float]]:
        return {seed: panels[panel] for seed, panels in arms[label]["outcomes"].items() if panels.get(panel)}

    rows = {}
    for label in arms:
        mine = grid(label)
        cells = [v for tasks in mine.values() for v in tasks.values()]
        rows[label] = {"success": sum(cells) / len(cells) if cells else 0.0, **_prefixed(success_interval(mine)),
                       "vs_reference": paired_comparison(mine, grid(reference)), "null": arms[label]["null"]}
    return {"reference": reference, "panel": panel, "arms": rows}


def _prefixed(success: Mapping[str, Any]) -> dict[str, Any]:
    return {"success_ci95": success["ci95"], "success_ci95_method": success["method"]}


def recomputed_markdown(result: Mapping[str, Any]) -> str:
    """:func:`recompute`'s numbers as a table (``turngym stats``)."""
    reference = result["reference"]
    lines = [f"| policy | success (95 % CI) | vs {reference} (95 % CI, seeds x tasks) |",
             "|---|---|---|"]
    for label, row in result["arms"].items():
        vs = "(reference)" if label == reference else difference_cell(row)
        lines.append(f"| {label}{' (null control)' if row['null'] else ''} | {success_cell(row)} | {vs} |")
    lines += seed_table(((label, row["vs_reference"]) for label, row in result["arms"].items()
                         if label != reference), reference)
    return "\n".join([*lines, "", INTERVAL_NOTE]) + "\n"


# ---------------------------------------------------------------------- rendering
def peak_memory(summary: Mapping[str, Any]) -> str:
    """The table footer's memory: the highest resident memory any run of the study had reached when a stage ended."""
    peak = summary.get("peak_rss_gb")
    return "peak resident memory not recorded" if peak is None else f"peak resident memory {peak:.1f} GB"


def percent(x: float) -> str:
    return f"{100 * x:.1f}"


def success_cell(s: Mapping[str, Any]) -> str:
    low, high = s["success_ci95"]
    return f"{percent(s['success'])} % ({percent(low)}-{percent(high)})"


def difference_cell(s: Mapping[str, Any]) -> str:
    """``+1.0 (-4.2 to +6.2)`` for a panel summary's ``vs_reference`` or a :func:`pairwise_differences` row."""
    d = s.get("vs_reference", s)
    low, high = d["ci95"]
    mark = " **+**" if low > 0 else (" **-**" if high < 0 else "")
    return f"{100 * d['mean']:+.1f} ({100 * low:+.1f} to {100 * high:+.1f}){mark}"


def seeds_cell(d: Mapping[str, Any]) -> str:
    """A paired difference seed by seed: the t interval over seed means and each seed's difference, or with
    one seed the games gained and lost and the exact McNemar p."""
    per_seed = d.get("per_seed") or {}
    if len(per_seed) == 1:
        (p,) = d["mcnemar_p"].values()
        return f"{d['gained']} gained, {d['lost']} lost; McNemar p = {p:.3g}"
    low, high = d.get("seed_t_ci95") or (float("nan"), float("nan"))
    seeds = " / ".join(f"{100 * v:+.1f}" for v in per_seed.values())  # 200 games: half points (+4.5), not +4
    return f"{100 * low:+.1f} to {100 * high:+.1f}; per seed {seeds}"


def seed_table(rows: Iterable[tuple[str, Mapping[str, Any]]], reference: str) -> list[str]:
    """Markdown lines: each paired difference to ``reference`` seed by seed (:func:`seeds_cell`)."""
    rows = list(rows)
    if not rows:
        return []
    return ["", f"Paired differences to {reference}, seed by seed:", "",
            f"| policy | vs {reference} (95 % CI, seeds x tasks) | t over seeds (95 % CI); per seed |",
            "|---|---|---|",
            *(f"| {label} | {difference_cell(d)} | {seeds_cell(d)} |" for label, d in rows)]


INTERVAL_NOTE = (
    "Intervals: a paired difference's 95 % interval comes from a seeds x tasks random-effects model (run-to-run "
    "and task-sampling variance, Satterthwaite t); with one seed it is the t interval over tasks, which leaves "
    "run-to-run variance out. Success intervals are the same model over several seeds, Wilson (tasks independent) "
    "for one.")


def print_outputs(summary: Mapping[str, Any], out: Path, plot: str) -> None:
    """What both recipes print when a study is done: the table, where the files are, the time."""
    print("\n" + (out / "results.md").read_text())
    print(f"table: {out / 'results.md'}\nplot:  {out / plot}\nsummary: {out / 'summary.json'}")
    print(f"measured time: {summary['wall_seconds'] / 60:.1f} min")


def add_study_arguments(parser: Any, configs: str) -> None:
    """The command-line options both recipes share; ``configs`` names the folder of example configs."""
    parser.add_argument("--config", required=True, help=f"study YAML (see {configs})")
    parser.add_argument("--name", help="results/<name>/ (default: the config's name)")
    parser.add_argument("--seeds", type=int, nargs="+", help="override the config's seeds")
    parser.add_argument("--results-dir", help="parent folder of results/<name>/ (default: results)")
    parser.add_argument("--restart", action="store_true", help="delete results/<name>/ and start over")


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1, default=str))
