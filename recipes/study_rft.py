"""A study's RFT arm (rejection-sampling fine-tuning, expert iteration): its budget, configuration and stage.

``Study`` inherits these; they use its folders, config and stage markers (``_done``, ``_mark_done``, ``_stage``).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

from turngym.recipes.study_config import Arm
from turngym.recipes.study_memory import peak_rss_gb, release_freed_memory

RFT = "rft"  # an algorithm entry's ``algorithm`` that makes it a rejection-sampling fine-tuning arm
DONE = "done.json"


class RFTStages:
    """The RFT arm's stages (``Study``'s folders, config, stage markers and clock)."""

    def rft_entry(self, arm: Arm) -> dict[str, Any] | None:
        """An RFT arm's entry without its ``algorithm`` (its TurnGymSFTConfig overrides); None for any other arm.
        An entry is RFT when its ``algorithm`` is ``rft``, or when it has none and its label is ``rft``."""
        if not arm.trains_rl or arm.algorithm is None:
            return None
        entry = self.config.algorithms.get(arm.algorithm, {})
        if entry.get("algorithm", arm.algorithm) != RFT:
            return None
        return {k: v for k, v in entry.items() if k != "algorithm"}

    def rft_budget(self, arm: Arm) -> tuple[int, int]:
        """An RFT arm's ``(rounds, episodes sampled a round)``: its budget, ``episodes``, counted in sampled episodes
        as RL's is. Refused in one line unless the budget splits into whole rounds of whole tasks."""
        from turngym.trainers.sft import TurnGymSFTConfig

        entry = self.rft_entry(arm) or {}
        defaults = {f.name: f.default for f in fields(TurnGymSFTConfig)}
        rounds = int(entry.get("rounds", defaults["rounds"]))
        samples = int(entry.get("demo_samples_per_task", defaults["demo_samples_per_task"]))
        if rounds < 1 or samples < 1 or arm.episodes % (rounds * samples):
            raise ValueError(
                f"{arm.label}: RFT's budget of {arm.episodes} episodes is not {rounds} rounds (rounds) of whole games "
                f"x {samples} samples (demo_samples_per_task); make episodes a multiple of rounds x "
                f"demo_samples_per_task = {rounds * samples}")
        for key in ("num_demos", "demo_seed", "model_name_or_path", "output_dir", "demo_backend"):
            if key in entry:
                raise ValueError(f"{arm.label}: an RFT arm's {key} is set by the study (num_demos: episodes / "
                                 "rounds; demo_seed: the seed; the start: the seed's SFT checkpoint; demo_backend: "
                                 "the study's backend); remove it")
        if entry.get("demo_source", "policy") != "policy":
            raise ValueError(f"{arm.label}: an RFT arm samples its demos from the policy; remove demo_source "
                             f"{entry['demo_source']!r} (or set it to policy)")
        return rounds, arm.episodes // rounds

    def rft_config(self, arm: Arm, start: str, seed: int, folder: Path, round_index: int | None = None) -> Any:
        """The :class:`~turngym.trainers.sft.TurnGymSFTConfig` of one RFT arm: the study's world and ``sft`` fields,
        the entry's overrides, ``episodes / rounds`` policy episodes a round on the train games after the SFT
        demos (``skip_train_tasks``, as RL plays them), from ``start``, saved to ``folder/policy``.

        With ``round_index`` k: that round alone, as ``turngym sft --demos policy`` runs it inside its loop (its
        games: the k-th share after ``skip_train_tasks``; its reset and sampling seed: ``demo_seed + k``), from
        ``start`` (the policy the rounds before it trained) into ``folder/round<k+1>`` (the last: ``folder/policy``).
        :meth:`rft_stage` runs the rounds one at a time, so an interrupted stage resumes at its unfinished round."""
        from turngym.trainers.sft import TurnGymSFTConfig

        entry = self.rft_entry(arm)
        if entry is None:
            raise ValueError(f"{arm.label} is not an RFT arm (algorithm: {RFT})")
        rounds, per_round = self.rft_budget(arm)
        fields_ = {**self.config.world, **(self.config.sft or {}), "demo_source": "policy", **entry}
        fields_.setdefault("skip_train_tasks", arm.demos)  # the SFT demos' games are not sampled
        fields_.update(model_name_or_path=start, num_demos=per_round, demo_seed=seed, seed=seed,
                       output_dir=str(folder / "policy"), eval_split=None, save_strategy="no", report_to="none",
                       disable_tqdm=not self.progress, demo_backend=self.backend)
        if round_index is not None:
            games = per_round // int(fields_.get("demo_samples_per_task", 1))
            fields_.update(rounds=1, skip_train_tasks=fields_["skip_train_tasks"] + round_index * games,
                           demo_seed=seed + round_index)
            if round_index < rounds - 1:
                fields_["output_dir"] = str(folder / f"round{round_index + 1}")
        return TurnGymSFTConfig(**fields_)

    def rft_sampler(self, policy: str) -> Any:
        """RFT's sampler on vLLM: the study's one engine (:meth:`eval_engine`), synced to each round's policy; on
        HF, None (the policy samples itself)."""
        if self.backend != "vllm":
            return None
        return lambda model, seed: self.eval_engine(policy, model, seed)

    def rft_stage(self, arm: Arm, start: Path | str, seed: int) -> Path:
        """Rejection-sampling fine-tuning from ``start`` (:func:`~turngym.trainers.sft.run_sft` with policy demos)
        for the arm's budget of sampled episodes; returns the policy folder. Each round runs as its own
        :func:`~turngym.trainers.sft.run_sft` from the last round's policy and leaves a ``round<k>/done.json``, so a
        rerun resumes after the last finished round. ``done.json`` records each round's stats (games, episodes
        played and kept, tokens, why the rest were dropped, seconds)."""
        from turngym.trainers.sft import DEMO_STATS_FILE, run_sft

        folder = self.out / f"seed{seed}" / arm.label
        if self._done(folder):
            return folder / "policy"
        config = self.rft_config(arm, str(start), seed, folder)
        self._stage(f"{arm.label}: RFT (expert iteration) for {arm.episodes} episodes ({config.rounds} rounds of "
                    f"{config.num_demos}, {config.demo_samples_per_task} a game) from {start} (seed {seed})")
        started = time.perf_counter()
        policy, per_round = str(start), []
        for k in range(config.rounds):
            done = self._done(folder / f"round{k + 1}")
            if done is None:
                if self.clock is not None:
                    self.clock.progress(k, config.rounds, f"round {k + 1}/{config.rounds}")
                round_started = time.perf_counter()
                round_config = self.rft_config(arm, policy, seed, folder, round_index=k)
                run_sft(round_config, sampler=self.rft_sampler(policy))
                release_freed_memory()
                (stats,) = json.loads((Path(round_config.output_dir) / DEMO_STATS_FILE).read_text())["rounds"]
                done = {**stats, "seconds": time.perf_counter() - round_started, "start": policy,
                        "peak_rss_gb": peak_rss_gb()}
                if k < config.rounds - 1:
                    self._mark_done(folder / f"round{k + 1}", done)
            if 0 < k < config.rounds - 1:  # round k+1 is finished: round k's policy is not needed again
                _remove_model(folder / f"round{k}")
            per_round.append(done)
            policy = str(folder / (f"round{k + 1}" if k < config.rounds - 1 else "policy"))
        self._mark_done(folder, {"seconds": time.perf_counter() - started, "algorithm": RFT,
                                 "episodes": arm.episodes, "rounds": config.rounds,
                                 "episodes_per_round": config.num_demos,
                                 "samples_per_task": config.demo_samples_per_task,
                                 "temperature": config.demo_temperature,
                                 "kept": sum(r["kept"] for r in per_round), "per_round": per_round,
                                 "start": str(start), "backend": self.backend})
        for k in range(1, config.rounds):
            shutil.rmtree(folder / f"round{k}", ignore_errors=True)  # the rounds' stats are in done.json
        release_freed_memory()
        return folder / "policy"



def _remove_model(folder: Path) -> None:
    """A finished RFT round's model files, once the next round has trained on from them; its done.json stays."""
    for path in folder.iterdir() if folder.is_dir() else ():
        if path.is_dir():
            shutil.rmtree(path)
        elif path.name != DONE:
            path.unlink()
