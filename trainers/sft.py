"""SFT warm start: TRL's SFTTrainer on expert episodes, in the exact token layout RL trains on.

The reference study warms a policy up with a few dozen expert episodes before RL (60 demos in its
budget study), because a small base model rarely wins and leaves RL no signal. turngym's warm start:

1. **Demos.** The oracle plays the first ``num_demos`` tasks of the train split. Each world's
   oracle follows its walkthrough, the expert solution the world exposes at reset:

   - TextWorld: the game's walkthrough, from TextWorld's own generator;
   - ALFWorld: the PDDL planner's plan;
   - SWE: the gold patch applied in one shell command, then the submit command (needs
     ``action_format: raw``, since the commands are fenced multi-line blocks); under the ``tools``
     protocol, a ``view`` and an ``edit`` call per hunk of the gold patch, then ``submit``
     (:mod:`turngym.envs.swe.walkthrough`);
   - Signals: the rule itself;
   - your own world: whatever it puts in ``info["walkthrough"]`` at reset.

   Or the policy's own wins (``demo_source: policy``, ``turngym sft --demos policy``): rejection-sampling
   fine-tuning, also called expert iteration. Each of ``rounds`` rounds samples ``num_demos`` episodes on fresh
   train tasks with the current policy (``demo_samples_per_task`` a task, at ``demo_temperature``), keeps the
   won ones on the exact token ids the policy sampled (:func:`won_episodes`: never decoded and re-tokenised),
   and fine-tunes the policy on them; the next round samples with the fine-tuned policy. It needs no
   walkthrough, only a reward that says who won, and is the baseline RL is judged against.

2. **Rendering.** Each command is written as the reply the agent's parser reads back (``Action:
   go north`` for the ``prefix`` format) and played through a real :class:`~turngym.agents.llm.LLMAgent`,
   configured from the same :class:`~turngym.trainers.config.WorldOptions` as the RL run, whose backend
   replays those replies. So a demo *is* an RL rollout record: the same prompt ids, the same
   environment deltas, the same end-of-turn token, the same context cap. Only episodes the oracle
   wins, and whose every reply parsed back to the oracle's command, are kept.

3. **Loss mask.** Each demo becomes one pre-tokenised row, ``input_ids`` = prompt + completion and
   ``assistant_masks`` = 0 on the prompt, then the record's ``env_mask``: 1 on the assistant's reply
   tokens and their end-of-turn token, 0 on environment deltas and on any end-of-turn token the
   model did not sample. SFTTrainer (TRL 1.16) folds an ``assistant_masks`` column into ``labels``
   during dataset preparation (``labels = input_ids`` where the mask is 1, ``-100`` elsewhere), and
   its collator pads labels with ``-100``. TRL's own ``assistant_only_loss`` is not used: it
   re-renders a conversational dataset with the chat template, which is exactly the
   re-tokenisation turngym avoids.

4. **Training** is plain ``SFTTrainer``; the model and tokenizer are saved to ``output_dir``, so
   ``turngym train --model_name_or_path <output_dir>`` continues with RL in the same chat format.

    turngym sft --config recipes/configs/textworld-sft.yaml
    turngym sft --config recipes/configs/textworld-sft.yaml --demos policy --rounds 4 \
        --model_name_or_path runs/textworld-sft --num_demos 256 --demo_samples_per_task 4 --skip_train_tasks 60
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any, Literal, get_args

from trl import SFTConfig

from turngym.agents.actions import ActionFormat
from turngym.agents.base import Agent, EndEpisode
from turngym.agents.llm import LLMAgent, LLMAgentConfig
from turngym.agents.records import TokenRecord
from turngym.agents.rollout import Trajectory
from turngym.agents.tool_calls import format_tool_call
from turngym.envs.tools import ToolCall
from turngym.trainers.config import WorldOptions, check_choices, fix_device
from turngym.trainers.config_cli import ConfigParser
from turngym.trainers.episodes import Episode
from turngym.trainers.rollout import evaluate_policy, policy_pool

logger = logging.getLogger(__name__)

DemoSource = Literal["oracle", "policy"]
DEMO_SOURCES = get_args(DemoSource)
DemoBackend = Literal["hf", "vllm"]
# Policy demo episodes played side by side: HF runs one forward pass for all of them a step; vLLM's scheduler batches
# what is in flight (on 2 CPU cores the two sample a round at the same speed: bench/study_backends.py --stages rft).
DEMO_BATCH = {"hf": 16, "vllm": 64}
DEMO_STATS_FILE = "sft_demos.json"
EVAL_REPORT_FILE = "sft_eval.json"


class NoDemosError(ValueError):
    """No usable demo: the oracle (or, for policy demos, the policy) won none, or the oracle's commands could not be
    written as replies."""


@dataclass
class TurnGymSFTConfig(WorldOptions, SFTConfig):
    """SFT on expert episodes: TRL's ``SFTConfig`` plus the world and the agent's chat format.

    The world options are the RL config's, so a warm start and the RL run after it share one chat
    format. ``max_length`` (TRL's sequence cap) is also the demo agent's context cap: a demo that
    would not fit ends as truncated and is dropped, instead of being cut by TRL mid-episode.
    ``num_train_tasks`` is not used: demos are the first ``num_demos`` tasks of ``train_split``.
    """

    num_demos: int = field(default=60, metadata={"help": "oracle: the first N tasks of train_split; policy: the "
                                                        "episodes sampled in each round"})
    demo_source: DemoSource = field(
        default="oracle", metadata={"aliases": ["--demos"],
                                    "help": "oracle: each world's walkthrough (TextWorld: the game's; ALFWorld: the "
                                            "planner's plan; SWE: gold patch + submit; Signals: the rule); policy: "
                                            "the policy's own won episodes (rejection-sampling fine-tuning; also "
                                            "written --demos policy)"})
    demo_seed: int = field(default=0, metadata={"help": "reset seed of the demo episodes"})
    rounds: int = field(default=1, metadata={"help": "policy demos: sample, keep the wins, fine-tune, this many "
                                                     "times, each round on the next train tasks"})
    demo_samples_per_task: int = field(default=1, metadata={"help": "policy demos: episodes sampled per task "
                                                                    "(num_demos / this many tasks a round)"})
    demo_temperature: float = field(default=0.7, metadata={"help": "policy demos: sampling temperature"})
    skip_train_tasks: int = field(default=0, metadata={"help": "policy demos: start after the train split's first "
                                                               "N tasks (e.g. the oracle demos of the warm start)"})
    demo_backend: DemoBackend = field(
        default="hf", metadata={"help": "policy demos: the engine that samples them: hf (the policy itself, batched) "
                                        "or vllm (a colocated vLLM engine, CPU build or CUDA, synced to the policy "
                                        "each round)"})

    def __post_init__(self) -> None:
        self.validate()
        self.resolve()
        super().__post_init__()

    def validate(self) -> None:
        """Checks of the fields on their own (choices, ranges); imports nothing."""
        self._validate_world()
        check_choices(self)
        if self.num_demos < 1:
            raise ValueError(f"num_demos must be at least 1, got {self.num_demos}")
        if self.rounds < 1 or self.demo_samples_per_task < 1 or self.skip_train_tasks < 0:
            raise ValueError(f"rounds and demo_samples_per_task must be at least 1 and skip_train_tasks at least 0, "
                             f"got {self.rounds}, {self.demo_samples_per_task} and {self.skip_train_tasks}")
        if self.demo_source == "oracle":
            if (self.rounds, self.demo_samples_per_task, self.skip_train_tasks, self.demo_backend) != (1, 1, 0, "hf"):
                raise ValueError("rounds, demo_samples_per_task, skip_train_tasks and demo_backend shape policy demos "
                                 "(sample, keep the wins, fine-tune); with the oracle's demos leave them at 1, 1, 0 "
                                 "and hf, or set demo_source: policy (--demos policy)")
            return
        if self.num_demos % self.demo_samples_per_task:
            raise ValueError(f"num_demos ({self.num_demos}, the episodes sampled a round) must be a multiple of "
                             f"demo_samples_per_task ({self.demo_samples_per_task})")
        if self.demo_samples_per_task > 1 and self.demo_temperature <= 0:
            raise ValueError(f"demo_samples_per_task {self.demo_samples_per_task} at demo_temperature "
                             f"{self.demo_temperature} plays the same episode every time; set demo_temperature "
                             "(e.g. 0.7)")

    def resolve(self) -> TurnGymSFTConfig:
        """The CPU device fix, ``imports`` and the world's registry lookups (idempotent; returns ``self``)."""
        fix_device(self)
        self._resolve_world()
        return self


# ---------------------------------------------------------------------- replies
def demo_reply(command: str, config: LLMAgentConfig) -> str:
    """The reply text that ``config``'s parser reads back as exactly ``command``.

    It is what follows the generation prompt (and ``response_prefix``): ``"Action: go north"`` for
    the ``prefix`` format, ``" go north"`` when ``response_prefix="Action:"`` already wrote the prefix.
    """
    parser = config.parser()
    for reply in _candidate_replies(command, config):
        if parser.parse(config.response_prefix + reply) == command:
            return reply
    raise NoDemosError(
        f"action_format={config.action_format!r} with response_prefix={config.response_prefix!r} cannot express the "
        f"expert command {command[:80]!r} as a reply (the parser would read something else back); multi-line or "
        "quoted commands need action_format='raw' (and an empty response_prefix)"
    )


def _candidate_replies(command: str, config: LLMAgentConfig) -> list[str]:
    fmt = ActionFormat(config.action_format)
    prefix = config.response_prefix
    if fmt is ActionFormat.PREFIX:
        if not prefix.strip():
            return [f"{config.parser().prefix} {command}"]
        return [command, f" {command}"] if prefix[-1].isspace() else [f" {command}", command]
    if fmt is ActionFormat.TAGS:
        return [f"<{config.action_tag}>{command}</{config.action_tag}>"]
    if fmt is ActionFormat.LAST_LINE:
        return [command, f"\n{command}"]
    return [command]


class OracleThroughLLM(Agent):
    """An :class:`LLMAgent` whose replies are the oracle's commands: a demo is an RL rollout record.

    Each turn the oracle chooses a command; it is written as a reply (:func:`demo_reply`; under the ``tools``
    protocol, the call in the model's own syntax, :func:`~turngym.agents.tool_calls.format_tool_call`), encoded
    and closed with the chat template's end-of-turn token (not ``stop_ids[0]``, which may be EOS),
    and replayed by a :class:`~turngym.agents.backends.ScriptedBackend`. The LLM agent then does exactly
    what it does in RL: records the ids, parses the action, appends environment deltas. An episode
    whose parsed action differs from the oracle's command (a reply cut at ``max_new_tokens``) is
    listed in ``unfaithful``.
    """

    batched = True

    def __init__(self, tokenizer: Any, config: LLMAgentConfig, oracle: Agent | None = None) -> None:
        from turngym.agents.backends import ScriptedBackend
        from turngym.agents.baselines import OracleAgent

        self.oracle = oracle or OracleAgent()
        self.name = f"{getattr(self.oracle, 'name', 'oracle')}-through-llm"
        self._replies: dict[int, list[int]] = {}  # episode -> this turn's reply ids
        backend = ScriptedBackend(self._reply, encode=lambda text: tokenizer.encode(text, add_special_tokens=False))
        self.llm = LLMAgent(backend, tokenizer, config, name=self.name)
        self.unfaithful: set[int] = set()

    def _reply(self, request: Any) -> list[int]:
        return self._replies.pop(request.key)

    def begin(self, episode: int, observation: str, info: dict[str, Any]) -> None:
        self.oracle.begin(episode, observation, info)
        self.llm.begin(episode, observation, info)

    def act(self, episodes: Sequence[int]) -> list[str | EndEpisode]:
        commands = self.oracle.act(episodes)
        chat = self.llm.chat
        for episode, command in zip(episodes, commands, strict=True):
            syntax = self.llm.tool_syntax_of(episode)  # under the tools protocol the command is a call (JSON)
            reply = (format_tool_call(ToolCall.from_action(str(command)), syntax) if syntax
                     else demo_reply(str(command), self.llm.config))
            self._replies[episode] = chat.encode(reply) + [chat.end_of_turn_id]
        actions = self.llm.act(episodes)
        for episode, command, action in zip(episodes, commands, actions, strict=True):
            self._replies.pop(episode, None)  # not asked: the episode ended on its context cap
            if not isinstance(action, EndEpisode) and action != command:
                self.unfaithful.add(episode)
        return actions

    def observe(self, episode: int, action: str, observation: str, reward: float, info: dict[str, Any]) -> None:
        self.oracle.observe(episode, action, observation, reward, info)
        self.llm.observe(episode, action, observation, reward, info)

    def end(self, episode: int) -> TokenRecord:
        self.oracle.end(episode)
        return self.llm.end(episode)


# ---------------------------------------------------------------------- demos
@dataclass
class DemoStats:
    """What demo collection played and kept, and why the rest was dropped."""

    env_id: str
    split: str
    taskset: str
    taskset_fingerprint: str
    played: int
    kept: int
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> episodes
    assistant_tokens: int = 0
    total_tokens: int = 0


def _drop_reason(trajectory: Trajectory, faithful: bool) -> str | None:
    if not faithful:
        return "reply_cut_by_max_new_tokens_per_turn"
    if trajectory.won:
        return None
    if trajectory.truncated:
        return f"truncated_{trajectory.truncation_reason}"
    return "lost"


def collect_demos(options: TurnGymSFTConfig, tokenizer: Any, *,
                  progress: bool = True) -> tuple[list[Trajectory], DemoStats]:
    """Play the oracle through the LLM agent on the train panel; keep the won, faithful episodes
    (each with its token record in ``trajectory.record``)."""
    from turngym.agents.rollout import run_episodes
    from turngym.envs.panels import task_panel

    world = options.world_kwargs()
    tasks = task_panel(options.env_id, options.train_split, options.num_demos, world, progress=progress)
    context = options.max_length or LLMAgentConfig.max_context_tokens
    config = options.agent_config(temperature=0.0, max_context_tokens=context, seed=options.demo_seed)
    agent = OracleThroughLLM(tokenizer, config)
    pool = policy_pool(options, 1, tasks)
    try:
        trajectories = run_episodes(agent, pool, list(tasks), seed=options.demo_seed,
                                    progress="oracle demos" if progress else False)
    finally:
        pool.close()
    # run_episodes numbers episodes 0..n-1 in task order: the oracle's word on episode i is trajectory i's.
    reasons = [_drop_reason(t, i not in agent.unfaithful) for i, t in enumerate(trajectories)]
    demos = [t for t, reason in zip(trajectories, reasons, strict=True) if reason is None]
    reasons = Counter(reason for reason in reasons if reason is not None)
    records = [Episode.from_trajectory(t) for t in demos]
    stats = DemoStats(options.env_id, options.train_split, tasks.name, tasks.fingerprint, len(trajectories), len(demos),
                      dict(reasons), sum(r.num_model_tokens for r in records),
                      sum(len(r.prompt_ids) + len(r.completion_ids) for r in records))
    _check_demos(stats)
    return demos, stats


def _check_demos(stats: DemoStats) -> None:
    dropped = ", ".join(f"{n} {reason}" for reason, n in sorted(stats.dropped.items())) or "none"
    if stats.kept == 0:
        raise NoDemosError(
            f"no expert demos for {stats.env_id} ({stats.taskset}): the oracle won 0 of {stats.played} episodes "
            f"(dropped: {dropped}). Fixes: raise max_turns if episodes hit the turn limit, max_length if they hit "
            "the context cap, max_new_tokens_per_turn if replies were cut; a world without a walkthrough has no "
            "oracle demos"
        )
    if stats.dropped:
        logger.warning("kept %d of %d oracle episodes as demos (dropped: %s)", stats.kept, stats.played, dropped)
    logger.info("%d demos, %d tokens, %d of them assistant tokens (in the loss)", stats.kept, stats.total_tokens,
                stats.assistant_tokens)


# ---------------------------------------------------------------------- the policy's own wins
def won_episodes(trajectories: Sequence[Trajectory]) -> tuple[list[Episode], dict[str, int]]:
    """The won episodes of the policy's own rollouts, as SFT material, and how many of the rest were dropped, by why.

    Each kept :class:`~turngym.trainers.episodes.Episode` holds the agent's token record: the ids the policy sampled
    and the environment's deltas exactly as the rollout appended them, so :func:`sft_example` trains on those ids
    (``assistant_masks`` is the record's ``env_mask``), never on decoded and re-tokenised text. A lost or truncated
    episode is dropped.
    """
    kept, dropped = [], Counter()
    for trajectory in trajectories:
        reason = _drop_reason(trajectory, faithful=True)
        if reason is None:
            kept.append(Episode.from_trajectory(trajectory))
        else:
            dropped[reason] += 1
    return kept, dict(dropped)


def policy_backend(model: Any, tokenizer: Any) -> Any:
    """The backend policy demos are sampled with by default: ``model`` itself, batched
    (:class:`~turngym.agents.backends.HFBackend`)."""
    from turngym.agents.backends import HFBackend

    return HFBackend(model, pad_id=tokenizer.pad_token_id or 0)


PolicySampler = Callable[[Any, int], Any]  # (the policy now, the round's sampling seed) -> a backend holding it


def vllm_policy_sampler(model_path: str) -> PolicySampler:
    """A sampler for ``demo_backend: vllm``: one colocated engine, built from ``model_path`` at the first round and
    synced to the fine-tuned policy at each later one, its random stream reseeded with the round's seed
    (:meth:`~turngym.agents.backends.VLLMBackend.holding`)."""
    engine = None

    def sampler(model: Any, seed: int) -> Any:
        from turngym.agents.backends import VLLMBackend
        from turngym.agents.models import resolve_model

        nonlocal engine
        engine = VLLMBackend.holding(model, resolve_model(model_path), engine, seed=seed)
        return engine

    return sampler


def policy_demo_tasks(options: TurnGymSFTConfig, round_index: int = 0, *, progress: bool = True) -> Any:
    """Round ``round_index``'s train tasks: ``num_demos / demo_samples_per_task`` of them, after ``skip_train_tasks``
    and the earlier rounds' (every round samples on tasks it has not trained on)."""
    from turngym.envs.panels import task_panel

    per_round = options.num_demos // options.demo_samples_per_task
    first = options.skip_train_tasks + round_index * per_round
    tasks = task_panel(options.env_id, options.train_split, first + per_round, options.world_kwargs(),
                       progress=progress)
    if len(tasks) < first + per_round:
        raise ValueError(f"policy demos, round {round_index + 1}: the {options.train_split} split of {options.env_id} "
                         f"has {len(tasks)} tasks, not the {first + per_round} that skip_train_tasks "
                         f"{options.skip_train_tasks} and {round_index + 1} rounds of {per_round} need")
    return tasks.take(per_round, start=first)


def collect_policy_demos(options: TurnGymSFTConfig, model: Any, tokenizer: Any, round_index: int = 0, *,
                         backend: Any = None, progress: bool = True) -> tuple[list[Episode], DemoStats]:
    """Sample ``num_demos`` episodes of round ``round_index``'s tasks (:func:`policy_demo_tasks`) with the policy at
    ``demo_temperature``, in the RL run's chat format and capped at ``max_length`` tokens like oracle demos; keep the
    wins (:func:`won_episodes`). ``backend`` replaces the model's own (:func:`policy_backend`), e.g. in tests."""
    from turngym.agents.evaluate import evaluate

    tasks = policy_demo_tasks(options, round_index, progress=progress)
    seed = options.demo_seed + round_index
    context = options.max_length or LLMAgentConfig.max_context_tokens
    config = options.agent_config(temperature=options.demo_temperature, max_context_tokens=context, seed=seed)
    agent = LLMAgent(backend or policy_backend(model, tokenizer), tokenizer, config, name="policy-demos")
    was_training = getattr(model, "training", None)
    try:
        report = evaluate(agent, options.env_id, tasks, env_kwargs=options.world_kwargs(), seed=seed,
                          num_workers=options.num_env_workers or 0, batch=DEMO_BATCH[options.demo_backend],
                          progress=f"policy demos, round {round_index + 1}" if progress else False,
                          samples_per_task=options.demo_samples_per_task, pool_options=options.pool_options(),
                          **options.schedule_kwargs())
    finally:
        if was_training is not None:
            model.train(was_training)
    demos, dropped = won_episodes(report.trajectories)
    stats = DemoStats(options.env_id, options.train_split, tasks.name, tasks.fingerprint, len(report.trajectories),
                      len(demos), dropped, sum(e.num_model_tokens for e in demos),
                      sum(len(e.prompt_ids) + len(e.completion_ids) for e in demos))
    if not demos:
        dropped_text = ", ".join(f"{n} {reason}" for reason, n in sorted(dropped.items())) or "none"
        raise NoDemosError(
            f"no policy demos for {options.env_id} ({tasks.name}), round {round_index + 1} of {options.rounds}: the "
            f"policy won 0 of {stats.played} episodes at temperature {options.demo_temperature} (dropped: "
            f"{dropped_text}). Fixes: start from a policy that sometimes wins (an oracle warm start, `turngym sft` "
            "without --demos policy, then --model_name_or_path its output), sample more (num_demos, "
            "demo_samples_per_task), or raise max_turns")
    logger.info("policy demos, round %d of %d: kept %d won of %d episodes (%d tokens, %d of them the policy's)",
                round_index + 1, options.rounds, stats.kept, stats.played, stats.total_tokens, stats.assistant_tokens)
    return demos, stats


def sft_example(episode: Episode) -> dict[str, list[int]]:
    """One training row: ``input_ids`` and ``assistant_masks`` (1: in the loss; see the module docstring)."""
    return {
        "input_ids": list(episode.prompt_ids) + list(episode.completion_ids),
        "assistant_masks": [0] * len(episode.prompt_ids) + list(episode.env_mask),
    }


def demo_dataset(demos: Sequence[Trajectory | Episode]) -> Any:
    """A ``datasets.Dataset`` of :func:`sft_example` rows, ready for ``SFTTrainer``."""
    from datasets import Dataset

    episodes = [d if isinstance(d, Episode) else Episode.from_trajectory(d) for d in demos]
    return Dataset.from_list([sft_example(e) for e in episodes])


# ---------------------------------------------------------------------- training
def build_trainer(config: TurnGymSFTConfig, tokenizer: Any, dataset: Any, model: Any = None) -> Any:
    """An ``SFTTrainer`` on ``dataset``, training ``model``; without one TRL loads the model from the resolved path
    (honouring ``model_init_kwargs``), so the default SmolLM2 works offline."""
    from trl import SFTTrainer

    from turngym.agents.models import resolve_model

    return SFTTrainer(model=model if model is not None else resolve_model(config.model_name_or_path), args=config,
                      train_dataset=dataset, processing_class=tokenizer)


def train_on_policy_demos(config: TurnGymSFTConfig, tokenizer: Any, *, progress: bool = True,
                          sampler: PolicySampler | None = None) -> tuple[Any, list[DemoStats]]:
    """Rejection-sampling fine-tuning (expert iteration): ``rounds`` times, sample with the current policy, keep its
    wins, fine-tune it on them (a fresh optimizer and schedule each round). Returns the last round's trainer and
    every round's demo stats. ``sampler`` gives the backend that samples each round (default: ``demo_backend``'s;
    a study passes its own engine, so one process holds one)."""
    from turngym.agents.models import load_policy

    if sampler is None and config.demo_backend == "vllm":
        sampler = vllm_policy_sampler(config.model_name_or_path)
    model, _ = load_policy(config.model_name_or_path)
    trainer, rounds = None, []
    for round_index in range(config.rounds):
        backend = sampler(model, config.demo_seed + round_index) if sampler is not None else None
        demos, stats = collect_policy_demos(config, model, tokenizer, round_index, backend=backend,
                                            progress=progress)
        rounds.append(stats)
        trainer = build_trainer(config, tokenizer, demo_dataset(demos), model=model)
        trainer.train()
        model = trainer.model
    return trainer, rounds


def run_sft(config: TurnGymSFTConfig, *, sampler: PolicySampler | None = None) -> Path:
    """Collect demos, train, save the model and tokenizer to ``config.output_dir``; return that folder. ``sampler``:
    policy demos' backend for each round (:func:`train_on_policy_demos`).

    With ``eval_split`` set, the trained policy then plays ``num_eval_tasks`` held-out tasks greedily
    and the report is written next to it (``sft_eval.json``).
    """
    from transformers import AutoTokenizer

    from turngym.agents.evaluate import markdown_table
    from turngym.agents.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(config.model_name_or_path))
    if config.demo_source == "policy":
        trainer, rounds = train_on_policy_demos(config, tokenizer, progress=not config.disable_tqdm,
                                                sampler=sampler)
        record: dict[str, Any] = {
            "demo_source": "policy", "backend": config.demo_backend,
            "temperature": config.demo_temperature,
            "samples_per_task": config.demo_samples_per_task, "rounds": [asdict(stats) for stats in rounds]}
    else:
        demos, stats = collect_demos(config, tokenizer)
        trainer = build_trainer(config, tokenizer, demo_dataset(demos))
        trainer.train()
        record = asdict(stats)
    output = Path(config.output_dir)
    trainer.save_model(str(output))
    tokenizer.save_pretrained(str(output))
    (output / DEMO_STATS_FILE).write_text(json.dumps(record, indent=1))
    if config.eval_split:
        from turngym.envs.panels import task_panel

        tasks = task_panel(config.env_id, config.eval_split, config.num_eval_tasks, config.world_kwargs())
        report = evaluate_policy(trainer.model, tokenizer, config, tasks,
                                 name=f"sft:{Path(config.model_name_or_path).name}")
        (output / EVAL_REPORT_FILE).write_text(json.dumps(report.to_dict(), indent=1))
        logger.info("after SFT, greedy on %s:\n%s", config.eval_split, markdown_table([report]))
    logger.info("SFT model and tokenizer saved to %s", output)
    return output


WARM_START_DIR = "sft-warm-start"
# The warm start's SFT settings: textworld-sft.yaml's learning rate, epochs and schedule (0 % to 65 % on held-out
# TextWorld games), without its gradient accumulation (a warm start has a few demos); `turngym sft` sets any.
WARM_START_SETTINGS = {"num_train_epochs": 5, "learning_rate": 1e-4, "per_device_train_batch_size": 4,
                       "lr_scheduler_type": "cosine", "warmup_steps": 0.1, "gradient_checkpointing": False,
                       "logging_steps": 5, "save_strategy": "no", "report_to": "none"}


def starting_policy(args: Any, model_name_or_path: str | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` RL starts from: ``model_name_or_path`` (default ``args.model_name_or_path``), after
    an SFT warm start on ``args.sft_demos`` demos when that is set (:func:`warm_start`)."""
    from turngym.agents.models import load_policy

    name = model_name_or_path or args.model_name_or_path
    return load_policy(warm_start(args, name) if args.sft_demos else name)


def warm_start(args: Any, model_name_or_path: str | None = None) -> str:
    """``turngym train --sft_demos N``: SFT on the oracle's first N train tasks, in the RL run's own chat format,
    before RL; returns the folder of the warm-started policy (``output_dir/sft-warm-start``), which RL then
    starts from. A folder finished earlier is reused (a resumed run does not train it again).

    ``args`` is the RL run's :class:`~turngym.trainers.config.TurnGymConfig`: its world options are the demos'
    (world, task panel, protocol, reply format), its precision and seed the SFT run's; the SFT settings are
    :data:`WARM_START_SETTINGS`. For other settings run ``turngym sft`` and point ``model_name_or_path`` at it.
    """
    if args.worlds:
        raise ValueError("sft_demos warms up one world's policy; with several worlds run `turngym sft` per world "
                         "and start from its output (model_name_or_path)")
    output = Path(args.output_dir) / WARM_START_DIR
    if (output / DEMO_STATS_FILE).exists():
        logger.info("SFT warm start: reusing %s", output)
        return str(output)
    world = {f.name: getattr(args, f.name) for f in dataclass_fields(WorldOptions)}
    world["model_name_or_path"] = model_name_or_path or args.model_name_or_path
    config = TurnGymSFTConfig(**world, **WARM_START_SETTINGS, num_demos=args.sft_demos, output_dir=str(output),
                              max_length=args.max_completion_length + 1024, bf16=args.bf16, use_cpu=args.use_cpu,
                              seed=args.seed, disable_tqdm=args.disable_tqdm)
    logger.info("SFT warm start on %d oracle demos of %s, before RL", args.sft_demos, args.env_id)
    return str(run_sft(config))


def parse_config(argv: Sequence[str] | None = None, *, prog: str = "turngym sft") -> TurnGymSFTConfig:
    """``--config file.yaml`` plus ``--field value`` overrides, through ``trl.TrlParser``; a bad value (one not
    among a field's choices) is a ValueError."""

    class Parser(ConfigParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            raise ValueError(f"{prog}: {message}")

    parser = Parser(TurnGymSFTConfig, prog=prog,
                    description="SFT warm start on expert episodes, in the chat format the RL rollout uses.")
    (config,) = parser.parse_args_and_config(list(argv) if argv is not None else None)
    return config
