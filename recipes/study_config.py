"""A study's configuration and its arms: what :mod:`turngym.recipes.compare_algorithms` and
:mod:`turngym.recipes.sft_rl_budget` read from YAML (:class:`StudyConfig`, checked on load) and the policies they
train (:class:`Arm`). :mod:`turngym.recipes.study` runs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

RESERVED_SPLITS = frozenset({"test"})  # held out from every recipe's tuning (envs/textworld/generation.py)
BACKENDS = ("auto", "hf", "vllm")  # a study's generation backend (StudyConfig.backend)


def vllm_imports() -> tuple[bool, str]:
    """Whether ``import vllm`` works in this interpreter, and why not (its error's first line) when it does not.
    vLLM's CPU build lives in its own environment (``make install-vllm``: ``.venv-vllm``)."""
    import importlib
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return False, "vLLM is not installed in this interpreter"
    try:
        module = importlib.import_module("vllm")
    except Exception as error:  # noqa: BLE001 - any failure to import means: not usable here
        first = (str(error).splitlines() or [""])[0]
        return False, f"import vllm fails here ({type(error).__name__}: {first})"
    return True, f"vLLM {getattr(module, '__version__', '?')} imports in this interpreter"


def resolve_backend(requested: str) -> tuple[str, str]:
    """A study's generation backend, ``hf`` or ``vllm``, and why: ``auto`` is vLLM when ``import vllm`` works in this
    interpreter (:func:`vllm_imports`), else HF; ``vllm`` where it does not import is refused in one line."""
    if requested not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {requested!r}")
    if requested == "hf":
        return "hf", "backend: hf"
    usable, why = vllm_imports()
    if requested == "vllm" and not usable:
        raise ValueError(f"backend vllm: {why}; run the study with .venv-vllm/bin/turngym (make install-vllm) or "
                         "with --backend hf")
    return ("vllm" if usable else "hf"), (f"backend: {requested}" if requested == "vllm" else f"backend auto: {why}")


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
    panels: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> WorldOptions overrides, and its own
    # num_tasks where the panel's split is smaller (from the same first_task)
    curve_tasks: int = 20  # the first N held-out tasks, played at each learning-curve point
    curve_points: int = 3  # held-out points per RL run, both ends included (0: no held-out curve)
    batch: int = 16  # episodes played side by side (one forward pass per decoding step for all of them)
    samples_per_task: int = 1  # n > 1: each held-out task is played n times (needs temperature > 0) for pass@k
    pass_at_k: list[int] = field(default_factory=list)  # pass@k in the results table, each k <= n (default: 1, n)
    overlap: str = "refuse"  # held-out tasks equal to training tasks: "refuse" the study, or "report" their count

    def panel_size(self, panel: str) -> int:
        """How many tasks ``panel`` plays: its own ``num_tasks``, else the held-out panel's."""
        return self.panels.get(panel, {}).get("num_tasks", self.num_tasks)


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
    # Generation (RL rollouts, RFT sampling and held-out evaluations): hf, vllm (a colocated engine; its CPU build on
    # CPU), or auto (vllm when `import vllm` works here, else hf). A study's results/<name>/config.json records the
    # backend it resolved to, and a run that resolves to the other one is refused (outcomes differ within the
    # numerical gap).
    backend: str = "auto"

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
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
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
        for name in evaluation.panels:
            size = evaluation.panel_size(name)
            if type(size) is not int or size < 1:
                raise ValueError(f"evaluation.panels.{name}.num_tasks must be a positive integer, got {size!r}")
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


def add_study_arguments(parser: Any, configs: str) -> None:
    """The command-line options both recipes share; ``configs`` names the folder of example configs."""
    parser.add_argument("--config", required=True, help=f"study YAML (see {configs})")
    parser.add_argument("--name", help="results/<name>/ (default: the config's name)")
    parser.add_argument("--seeds", type=int, nargs="+", help="override the config's seeds")
    parser.add_argument("--results-dir", help="parent folder of results/<name>/ (default: results)")
    parser.add_argument("--restart", action="store_true", help="delete results/<name>/ and start over")
    parser.add_argument("--backend", choices=BACKENDS,
                        help="generation for RL rollouts and evaluations (default: the config's backend, auto): "
                             "vllm when `import vllm` works here (.venv-vllm), else hf; a study stays on the backend "
                             "it started on")
