"""TextWorld game generation through textworld's own generator, offline, cached by (config, seed).

Config names (the ``difficulty`` of a task):

=================================  ==============================================================
``wX-oY-qZ``                       ``tw-make custom --world-size X --nb-objects Y --quest-length Z``
``simple-{dense|balanced|sparse}`` ``tw-make tw-simple --rewards R --goal detailed``
  (optional ``-brief``/``-none``)  ``--goal brief|none``
``cooking-rR-tT-gG[-open][-cook]`` ``tw-make tw-cooking --recipe R --take T --go G [--open] ...``
  ``[-cut][-drop][-train|-valid|-test]``
``coin-L`` / ``treasure-L``         ``tw-make tw-coin_collector|tw-treasure_hunter --level L``
=================================  ==============================================================

The options are set exactly as ``tw-make`` sets them, so a seed gives the same game as the
reference study's ``tw-make ... --seed S``. Games are written atomically (a temporary folder,
then a rename), so parallel workers can generate the same game without corrupting the cache.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turngym.envs.tasks import Task, TaskSet, cache_root, canonical_json, sha256_text

logger = logging.getLogger(__name__)

# Reference study (Wang & Ammanabrolu, 2025): train seeds 30001-35000, held-out seeds 1-100. The eval split
# extends those to 1-500 (its first 100 games are the reference study's); `test` is a reserved panel no recipe
# is tuned on (a study evaluating on it must name a pre-registered plan: recipes/study.py).
TRAIN_SEEDS = range(30001, 35001)
EVAL_SEEDS = range(1, 501)
TEST_SEEDS = range(10001, 10501)
SPLIT_SEEDS = {"train": TRAIN_SEEDS, "eval": EVAL_SEEDS, "test": TEST_SEEDS}
GENERATOR_VERSION = "5"  # bump when this module changes what a (config, seed) produces
REFERENCE_CONFIGS = ("w2-o3-q4", "w8-o3-q4", "w2-o12-q4", "w8-o12-q4", "w4-o6-q8")

_CUSTOM = re.compile(r"^w(\d+)-o(\d+)-q(\d+)$")
_SIMPLE = re.compile(r"^simple-(dense|balanced|sparse)(?:-(detailed|brief|none))?$")
_COOKING = re.compile(r"^cooking-r(\d+)-t(\d+)-g(\d+)((?:-(?:open|cook|cut|drop))*)(?:-(train|valid|test))?$")
_LEVELLED = re.compile(r"^(coin|treasure)-(\d+)$")


def textworld_version() -> str:
    import textworld

    return textworld.__version__


@dataclass(frozen=True)
class GameConfig:
    """A parsed config name: which generator to call and with which settings."""

    name: str
    challenge: str | None  # None: the ``custom`` generator; else a textworld challenge name
    settings: tuple[tuple[str, Any], ...]

    @classmethod
    def parse(cls, name: str) -> GameConfig:
        if m := _CUSTOM.match(name):
            size, objects, length = (int(g) for g in m.groups())
            if size < 1 or length < 1:
                raise ValueError(f"config {name!r}: world size and quest length must be at least 1")
            return cls(name, None, (("world_size", size), ("nb_objects", objects), ("quest_length", length)))
        if m := _SIMPLE.match(name):
            return cls(name, "tw-simple", (("rewards", m.group(1)), ("goal", m.group(2) or "detailed")))
        if m := _COOKING.match(name):
            recipe, take, go, flags, split = m.groups()
            if int(go) not in (1, 6, 9, 12):
                raise ValueError(f"config {name!r}: tw-cooking's --go must be 1, 6, 9 or 12")
            argv = ["--recipe", recipe, "--take", take, "--go", go]
            argv += [f"--{flag}" for flag in flags.split("-") if flag]
            argv += ["--split", split] if split else []
            return cls(name, "tw-cooking", (("argv", tuple(argv)),))
        if m := _LEVELLED.match(name):
            challenge = {"coin": "tw-coin_collector", "treasure": "tw-treasure_hunter"}[m.group(1)]
            return cls(name, challenge, (("argv", ("--level", m.group(2))),))
        raise ValueError(
            f"unknown TextWorld config {name!r}. Use wX-oY-qZ (e.g. w2-o3-q4), simple-dense|balanced|sparse, "
            "cooking-r1-t1-g1[-open][-cook][-cut][-drop], coin-L or treasure-L"
        )

    def challenge_settings(self) -> dict[str, Any]:
        """The settings dict ``tw-make`` would pass to the challenge's ``make``."""
        import textworld.challenges

        _, _, add_arguments = textworld.challenges.CHALLENGES[self.challenge]
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        settings = dict(self.settings)
        argv = list(settings.get("argv", ()))
        if self.challenge == "tw-simple":
            argv = ["--rewards", settings["rewards"], "--goal", settings["goal"]]
        return vars(parser.parse_args(argv))


@dataclass(frozen=True)
class GameFiles:
    """A generated game on disk."""

    directory: Path
    game_file: Path  # the .z8 story file textworld.start loads
    walkthrough: tuple[str, ...]
    objective: str
    max_score: float
    content_hash: str  # the game's identity (game_content_hash): equal for the same game from two seeds
    template: str = ""  # the walkthrough with entity names replaced by their types (quest_template)

    @classmethod
    def load(cls, directory: Path) -> GameFiles:
        meta = json.loads((directory / "meta.json").read_text())
        return cls(
            directory=directory,
            game_file=directory / "game.z8",
            walkthrough=tuple(meta["walkthrough"]),
            objective=meta["objective"],
            max_score=float(meta["max_score"]),
            content_hash=meta["content_hash"],
            template=meta.get("template", ""),
        )


def game_directory(config: str, seed: int, root: Path | None = None) -> Path:
    root = root or cache_root()
    return root / f"textworld-{textworld_version()}-g{GENERATOR_VERSION}" / config / str(seed)


def generate_game(config: str, seed: int, root: Path | None = None) -> GameFiles:
    """Return the game for (config, seed), generating and caching it on first use.

    Generation runs in a fresh interpreter: textworld keeps global state between games made in
    one process, so a long-lived process would make a different game for the same seed.
    """
    directory = game_directory(config, seed, root)
    if not (directory / "meta.json").exists():
        GameConfig.parse(config)  # a bad name fails here, with a clear message
        command = [sys.executable, "-m", "turngym.envs.textworld.generation", config, str(seed), str(root or "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            message = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit code {done.returncode}"
            raise ValueError(f"generating TextWorld {config} seed {seed} failed: {message}")
    return GameFiles.load(directory)


def game_content_hash(game_json: dict) -> str:
    """sha256 of what makes a game, in canonical JSON: the world's facts, the entities (ids, types, names)
    and the quests' winning actions and commands.

    Left out: everything the seed draws without changing the game, so two seeds that build the same game
    hash the same (the duplicate guard between splits can then fire): the ``uuid`` (it embeds seed-derived
    characters), the grammar's text (objective, quest and entity descriptions), and machine-specific parts
    (``KB.text_grammars_path``, textworld's install path). Facts are sorted: textworld may list them in
    another order.
    """
    def fact(f: dict) -> str:
        return canonical_json(f)

    entities = sorted(canonical_json({k: info.get(k) for k in ("id", "type", "name", "noun", "adj", "room_type")})
                      for _, info in game_json.get("infos", []))
    quests = [{"commands": q.get("commands"), "reward": q.get("reward"),
               "win_events": [{"commands": e.get("commands"), "actions": e.get("actions")}
                              for e in q.get("win_events", [])]}
              for q in game_json.get("quests", [])]
    identity = {"world": sorted(map(fact, game_json.get("world", []))), "entities": entities, "quests": quests,
                "theme": (game_json.get("grammar") or {}).get("theme")}
    return sha256_text(canonical_json(identity))


def quest_template(walkthrough: Sequence[str], game_json: dict) -> str:
    """The walkthrough with every entity name replaced by ``<type>`` (``take latchkey from basket`` ->
    ``take <k> from <c>``), commands joined by `` | ``: games that share it ask for the same plan over other
    objects. A study reports how many held-out games share a template with a training game."""
    names = {info["name"]: info["type"] for _, info in game_json.get("infos", []) if info.get("name")}
    pattern = re.compile("|".join(rf"\b{re.escape(n)}\b" for n in sorted(names, key=len, reverse=True))) if names \
        else None
    return " | ".join(pattern.sub(lambda m: f"<{names[m.group(0)]}>", c) if pattern else c for c in walkthrough)


def _generate_here(config: str, seed: int, root: Path | None = None) -> None:
    directory = game_directory(config, seed, root)
    if (directory / "meta.json").exists():
        return
    parsed = GameConfig.parse(config)
    directory.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{seed}-", dir=directory.parent))
    try:
        game = _make_game(parsed, seed, scratch / "game.z8")
        for leftover in scratch.glob("*.ni"):
            leftover.unlink()
        game_json = json.loads((scratch / "game.json").read_text())
        content_hash = game_content_hash(game_json)
        meta = {
            "config": config,
            "seed": seed,
            "walkthrough": list(game.metadata.get("walkthrough") or game.walkthrough or []),
            "objective": game.objective,
            "max_score": game.max_score,
            "content_hash": content_hash,
            "textworld": textworld_version(),
        }
        meta["template"] = quest_template(meta["walkthrough"], game_json)
        if not meta["walkthrough"]:
            raise RuntimeError(f"textworld produced no walkthrough for {config} seed {seed}")
        (scratch / "meta.json").write_text(json.dumps(meta, indent=1))
        try:
            os.rename(scratch, directory)
        except OSError:  # another process finished the same game first: keep theirs
            shutil.rmtree(scratch, ignore_errors=True)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def _make_game(config: GameConfig, seed: int, path: Path):
    """Mirror of ``tw-make``'s main block for one game."""
    import textworld
    import textworld.challenges
    from textworld.generator import QuestGenerationError

    options = textworld.GameOptions()
    options.seeds = seed
    options.path = str(path)
    options.file_ext = ".z8"
    options.force_recompile = True
    if config.challenge is None:
        settings = dict(config.settings)
        options.nb_rooms = settings["world_size"]
        options.nb_objects = settings["nb_objects"]
        options.nb_parallel_quests = 1
        options.chaining.min_breadth = 1
        options.chaining.max_breadth = 5
        options.chaining.min_depth = 1
        options.chaining.min_length = options.chaining.max_length = settings["quest_length"]
        options.chaining.max_depth = settings["quest_length"]
        try:
            _, game = textworld.make(options)
        except QuestGenerationError as error:
            raise ValueError(
                f"textworld cannot generate a quest for config {config.name!r} (seed {seed}): "
                "try a larger world, more objects or a shorter quest"
            ) from error
        return game
    _, make_challenge, _ = textworld.challenges.CHALLENGES[config.challenge]
    game = make_challenge(settings=config.challenge_settings(), options=options)
    textworld.generator.compile_game(game, options)
    return game


def _generate_one(args: tuple[str, int, str | None]) -> tuple[str, int, str]:
    config, seed, root = args
    files = generate_game(config, seed, Path(root) if root else None)
    return config, seed, files.content_hash


def generate_games(
    pairs: Sequence[tuple[str, int]],
    *,
    workers: int | None = None,
    root: Path | None = None,
    progress: bool = True,
) -> dict[tuple[str, int], str]:
    """Generate many games in parallel (skipping cached ones); returns their content hashes."""
    from tqdm.auto import tqdm

    cached = {pair for pair in pairs if (game_directory(*pair, root) / "meta.json").exists()}
    missing = list(dict.fromkeys(pair for pair in pairs if pair not in cached))
    hashes = {pair: GameFiles.load(game_directory(*pair, root)).content_hash for pair in cached}
    if not missing:
        return hashes
    workers = max(1, min(workers or os.cpu_count() or 1, len(missing)))
    jobs = [(c, s, str(root) if root else None) for c, s in missing]
    configs = ", ".join(sorted({config for config, _ in missing}))
    where = game_directory(*missing[0], root).parent.parent
    # What is being prepared, and that it is paid once: the games are cached (a later run starts at once).
    bar = tqdm(total=len(jobs), desc=f"generating {len(missing)} TextWorld {configs} games ({len(cached)} cached; "
               f"a one-time cost, kept in {where})", unit="game", disable=not progress)
    if workers == 1:
        results: Iterable[tuple[str, int, str]] = map(_generate_one, jobs)
        for config, seed, digest in results:
            hashes[(config, seed)] = digest
            bar.update()
    else:
        # Threads suffice: each game is generated in its own fresh process (see generate_game).
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for config, seed, digest in pool.map(_generate_one, jobs):
                hashes[(config, seed)] = digest
                bar.update()
    bar.close()
    return hashes


def textworld_tasks(config: str = "w2-o3-q4", split: str = "train", n: int | None = None) -> TaskSet:
    """The task panel for ``config``: train seeds 30001-35000 (the reference study's), eval seeds 1-500 (the
    first 100 are the reference study's held-out games), and the reserved ``test`` split, seeds 10001-10500.

    ``split`` may also be ``"all"`` (train and eval together; never test). ``n`` keeps the first n seeds of
    each split. Task ids read ``textworld/<config>/<seed>``.
    """
    GameConfig.parse(config)  # fail early on a bad name
    splits = ("train", "eval") if split == "all" else (split,)
    tasks = []
    for name in splits:
        if name not in SPLIT_SEEDS:
            raise ValueError(f"TextWorld splits are 'train', 'eval', 'test' (reserved) or 'all', got {split!r}")
        seeds = list(SPLIT_SEEDS[name])[: n if n is not None else None]
        tasks += [
            Task(
                world="textworld",
                id=f"textworld/{config}/{seed}",
                split=name,
                difficulty=config,
                payload={"config": config, "seed": seed},
            )
            for seed in seeds
        ]
    version = f"textworld-{textworld_version()}/gen-{GENERATOR_VERSION}"
    return TaskSet(name=f"textworld/{config}/{split}", version=version, tasks=tuple(tasks))


def materialise(tasks: TaskSet, *, workers: int | None = None, progress: bool = True) -> TaskSet:
    """Generate every game of ``tasks`` and return the set with content hashes filled in.

    The returned set's splits are checked disjoint by content as well as by seed.
    """
    pairs = [(t.payload["config"], int(t.payload["seed"])) for t in tasks]
    hashes = generate_games(pairs, workers=workers, progress=progress)
    by_id = {t.id: hashes[(t.payload["config"], int(t.payload["seed"]))] for t in tasks}
    return tasks.with_content_hashes(by_id)


def task_files(task: Task) -> GameFiles:
    return generate_game(task.payload["config"], int(task.payload["seed"]))


__all__ = [
    "REFERENCE_CONFIGS",
    "GameConfig",
    "GameFiles",
    "cache_root",
    "generate_game",
    "generate_games",
    "materialise",
    "task_files",
    "textworld_tasks",
]


if __name__ == "__main__":
    import signal

    # A server's generation timeout sends SIGTERM first: leave through the cleanup of the scratch folder.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    _generate_here(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]) if sys.argv[3] else None)
