"""The GPU recipes (recipes/configs/gpu/) and the GPU image (docker/gpu/), checked on CPU.

Each recipe is parsed with ``trl.TrlParser`` exactly as ``turngym train/sft --config`` parses it,
checked against the reference study's settings and the 8-GPU batch its header promises, then
built into its trainer with a tiny stand-in policy and the command-line overrides a CPU needs
(``--use_vllm false --use_cpu true --bf16 false``, a 4-task panel). No training step runs. The
image cannot be built here (no registry), so its Dockerfile is checked for the versions it pins.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from turngym.trainers.config import TurnGymConfig
from turngym.trainers.sft import TurnGymSFTConfig

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "recipes" / "configs" / "gpu"
ACCELERATE = ROOT / "recipes" / "configs" / "accelerate"
DOCKERFILE = ROOT / "docker" / "gpu" / "Dockerfile"
GPUS = 8  # every recipe's batch is stated for one node of 8 GPUs


@dataclass(frozen=True)
class Recipe:
    env_id: str
    algorithm: str  # "sft" for the warm start
    launcher: str  # the accelerate config its header launches with ("" for a single process)
    episodes_per_step: int | None  # on 8 GPUs
    world: str | None = None  # TextWorld config


TEXTWORLD, ALFWORLD, SWE = "turngym/TextWorld-v0", "turngym/ALFWorld-v0", "turngym/SWE-v0"
RECIPES = {
    **{f"textworld-{world}-{algo.replace('_', '-')}": Recipe(TEXTWORLD, algo, "multi-gpu", 256, world)
       for world in ("w2-o3-q4", "w4-o6-q8") for algo in ("ppo", "grpo", "turn_rloo")},
    "alfworld-sft": Recipe(ALFWORLD, "sft", "", None),
    "alfworld-ppo": Recipe(ALFWORLD, "ppo", "multi-gpu", 256),
    "swe-qwen3-8b-grpo": Recipe(SWE, "grpo", "deepspeed-zero3", 64),
}
RL = sorted(name for name, recipe in RECIPES.items() if recipe.algorithm != "sft")


def path_of(name: str) -> Path:
    return GPU / f"{name}.yaml"


def parse(path: Path, *overrides: str):
    """The config as ``turngym train/sft --config PATH [overrides]`` builds it."""
    from trl import TrlParser

    kind = TurnGymSFTConfig if path.stem.endswith("-sft") else TurnGymConfig
    (config,) = TrlParser([kind]).parse_args_and_config(["--config", str(path), *overrides])
    return config


def header_commands(path: Path) -> list[list[str]]:
    """The shell commands in a config's header comment (``#   cmd``, ``\\`` continues a line)."""
    commands, current = [], ""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line[1:]
        if not (text.startswith("   ") or current):
            continue
        current += " " + text.strip()
        if current.endswith("\\"):
            current = current[:-1]
            continue
        words = shlex.split(current.replace("&", ""))
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # CUDA_VISIBLE_DEVICES=0 cmd ...
            words.pop(0)
        commands.append(words)
        current = ""
    return commands


@pytest.fixture(scope="module")
def policy(tiny_policy) -> Path:
    return tiny_policy


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---------------------------------------------------------------------- the set of recipes
def test_every_gpu_recipe_has_its_expectations_here():
    assert sorted(p.stem for p in GPU.glob("*.yaml")) == sorted(RECIPES)


# ---------------------------------------------------------------------- parsed as written
@pytest.mark.parametrize("name", RL)
def test_rl_recipe_carries_the_study_settings_as_written(name):
    """Before any CPU override: the study's hyperparameters, bf16, vLLM colocated, 256 episodes a step."""
    recipe, raw = RECIPES[name], yaml.safe_load(path_of(name).read_text())
    config = parse(path_of(name))
    assert config.env_id == recipe.env_id and config.algorithm == recipe.algorithm
    assert raw["bf16"] is True and raw["gradient_checkpointing"] is True  # the CPU post-init turns bf16 off here
    assert config.use_vllm is True and config.vllm_mode == "colocate"
    assert config.vllm_enable_sleep_mode is False  # turngym drives vllm.LLM itself; a sleeping KV cache breaks it
    assert config.vllm_tensor_parallel_size == 1
    assert config.vllm_max_model_length >= config.max_completion_length
    # The reference study: gamma 1, clip 0.2, KL 0.001-0.01, actor lr 1e-6, 0.7 / 0.4, groups of 4.
    assert config.gamma == 1.0 and config.epsilon == 0.2 and 0.001 <= config.beta <= 0.01
    assert config.learning_rate == 1e-6
    assert config.temperature == 0.7 and config.eval_temperature == 0.4
    assert config.num_generations == 4 and config.action_protocol == "free_form"
    if recipe.algorithm == "ppo":
        assert config.lam == 0.95 and config.critic_learning_rate == 1e-5
    # One generation round per optimizer step, of the stated size on 8 GPUs.
    assert config.steps_per_generation == config.gradient_accumulation_steps
    episodes = config.per_device_train_batch_size * config.gradient_accumulation_steps * GPUS
    assert episodes == recipe.episodes_per_step and episodes % config.num_generations == 0
    stated = re.search(r"(\d+) episodes? per device x (\d+) accumulation steps x (\d+) GPUs = (\d+) episodes",
                       path_of(name).read_text())
    assert stated and [int(n) for n in stated.groups()] == [config.per_device_train_batch_size,
                                                           config.gradient_accumulation_steps, GPUS, episodes]
    if recipe.env_id == TEXTWORLD:
        assert config.env_kwargs == {"config": recipe.world}
        assert config.max_turns is None  # the world's default: 2x the walkthrough
        assert config.eval_split == "eval" and config.num_eval_tasks == 100 and config.num_train_tasks is None
        assert config.reward_mode == "sparse"
    if recipe.env_id == SWE:
        assert config.env_kwargs["reward"] == "ratio" and config.action_format == "raw"
        assert config.max_turns >= 40 and config.max_new_tokens_per_turn >= 1024  # thinking replies
        assert config.model_name_or_path == "Qwen/Qwen3-8B"
        assert config.ds3_gather_for_generation is False  # vLLM generates: no gathering of the sharded policy
        assert config.eval_strategy == "no"  # held-out eval generates on one process: not under ZeRO-3


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_header_launch_commands_name_this_file_and_real_launch_configs(name):
    recipe, path = RECIPES[name], path_of(name)
    commands = header_commands(path)
    own = [c for c in commands if "--config" in c and c[c.index("--config") + 1] == str(path.relative_to(ROOT))]
    assert own, f"{path.name}: no header command runs this file"
    launches = [c for c in own if c[0] == "accelerate"]
    if recipe.launcher:
        assert launches, f"{path.name}: no accelerate launch command"
        for command in launches:
            launch_config = ROOT / command[command.index("--config_file") + 1]
            assert launch_config.is_file() and launch_config.stem == recipe.launcher
            assert command[command.index("-m") + 1: command.index("-m") + 3] == ["turngym.recipes.cli", "train"]
            assert yaml.safe_load(launch_config.read_text())["num_processes"] == GPUS
    else:
        assert [c for c in own if c[:2] == ["turngym", recipe.algorithm]]
    if recipe.algorithm == "ppo":  # the critic is synchronised by DDP only
        assert all("deepspeed" not in " ".join(c) for c in launches)


def test_the_alfworld_ppo_recipe_continues_from_the_sft_run_in_the_same_chat_format():
    sft, ppo = parse(path_of("alfworld-sft")), parse(path_of("alfworld-ppo"))
    assert ppo.model_name_or_path == sft.output_dir
    for name in ("env_id", "env_kwargs", "max_turns", "reward_mode", "action_protocol", "system_prompt",
                 "action_format", "response_prefix", "max_new_tokens_per_turn"):
        assert getattr(ppo, name) == getattr(sft, name), name
    commands = [" ".join(c) for c in header_commands(path_of("alfworld-ppo"))]
    sft_at = next(i for i, c in enumerate(commands)
                  if c.startswith("turngym sft --config recipes/configs/gpu/alfworld-sft.yaml"))
    assert any("recipes/configs/gpu/alfworld-ppo.yaml" in c for c in commands[sft_at + 1:])  # SFT first, then PPO


# ---------------------------------------------------------------------- built on CPU
CPU = ("--use_cpu", "true", "--bf16", "false", "--report_to", "none")  # and, for RL, --use_vllm false


def small_panel(config: TurnGymConfig, split: str, n: int):
    """The world's own first ``n`` tasks of ``split``. TextWorld and ALFWorld games are generated
    when first played, not when listed, so building a trainer on these generates nothing."""
    if config.env_id == TEXTWORLD:
        from turngym.envs.textworld import textworld_tasks

        return textworld_tasks(config.env_kwargs["config"], split, n=n)
    if config.env_id == ALFWORLD:
        from turngym.envs.alfworld import alfworld_tasks

        return alfworld_tasks(split, n=n)
    from turngym.envs.panels import task_panel

    return task_panel(config.env_id, split, n, config.world_kwargs(), progress=False)


@pytest.mark.parametrize("name", RL)
def test_rl_recipe_builds_its_trainer_on_cpu(name, policy, tmp_path):
    from turngym.trainers.trainer import TurnGymTrainer

    recipe, written = RECIPES[name], parse(path_of(name))
    config = parse(path_of(name), "--model_name_or_path", str(policy), "--output_dir", str(tmp_path), *CPU,
                   "--use_vllm", "false", "--num_train_tasks", "4", "--num_eval_tasks", "4")
    assert config.use_cpu and not config.bf16 and not config.use_vllm
    tasks = small_panel(config, config.train_split, config.num_train_tasks)
    eval_tasks = small_panel(config, config.eval_split, config.num_eval_tasks) if config.eval_split else None
    trainer = TurnGymTrainer(args=config, tasks=tasks, eval_tasks=eval_tasks)  # the policy from model_name_or_path
    try:
        assert trainer.args.algorithm == recipe.algorithm and trainer.args.env_id == recipe.env_id
        assert trainer.critic.enabled == (recipe.algorithm == "ppo")
        if trainer.critic.enabled:
            assert trainer.critic_optimizer.param_groups[0]["lr"] == written.critic_learning_rate
            assert trainer.args.kl_penalty == "reward"
        assert trainer.num_generations == 4 and not trainer.use_vllm
        assert trainer.beta == written.beta > 0 and trainer.ref_model is not None  # the KL term has its reference
        assert trainer.model.config.num_hidden_layers == 2  # the stand-in, loaded from model_name_or_path
        assert len(trainer.train_dataset) == 4 and set(trainer.train_dataset["prompt"]) <= set(trainer.runner.tasks)
        world = {TEXTWORLD: "textworld", ALFWORLD: "alfworld", SWE: "swe"}[recipe.env_id]
        assert {task.world for task in trainer.runner.tasks.values()} == {world}
        assert {task.split for task in trainer.runner.tasks.values()} == {"train"}
        if recipe.env_id == TEXTWORLD:
            assert {task.payload["config"] for task in trainer.runner.tasks.values()} == {recipe.world}
            assert [t.payload["seed"] for t in trainer.eval_tasks] == [1, 2, 3, 4]  # the held-out seeds
        assert (trainer.eval_tasks is not None) == (written.eval_split is not None)
        # The rollout uses the recipe's caps and sampling, and plays the world it names.
        agent = trainer.runner._agent_config(trainer.model, seed=0)
        assert agent.max_new_tokens == written.max_new_tokens_per_turn
        assert agent.max_completion_tokens == written.max_completion_length
        assert agent.temperature == 0.7 and agent.action_format == written.action_format
        options = trainer.args.world_kwargs()
        assert options["reward_mode"] == written.reward_mode and options["action_protocol"] == "free_form"
        assert {k: options[k] for k in written.env_kwargs} == written.env_kwargs
        assert options.get("max_turns") == written.max_turns
    finally:
        trainer.runner.close()


def test_alfworld_sft_recipe_builds_its_trainer_on_cpu(policy, tmp_path):
    from transformers import AutoTokenizer

    from turngym.trainers.episodes import Episode
    from turngym.trainers.sft import build_trainer, demo_dataset

    raw, written = yaml.safe_load(path_of("alfworld-sft").read_text()), parse(path_of("alfworld-sft"))
    assert raw["bf16"] is True and written.env_id == ALFWORLD and written.num_demos == 60
    assert written.max_length >= 8192 and written.action_protocol == "free_form"
    config = parse(path_of("alfworld-sft"), "--model_name_or_path", str(policy), "--output_dir", str(tmp_path), *CPU,
                   "--num_demos", "1")
    assert config.use_cpu and not config.bf16
    tokenizer = AutoTokenizer.from_pretrained(policy)
    # One two-turn demo in the recipe's chat format: the prompt ends with the response prefix, each
    # reply is the command and the end-of-turn token (in the loss), the observation is not.
    agent = config.agent_config()
    system_prompt = agent.system_prompt.format(format_instruction="")
    prompt = tokenizer.apply_chat_template([{"role": "system", "content": system_prompt},
                                            {"role": "user", "content": "You are in the middle of a room."}],
                                           add_generation_prompt=True, tokenize=True, return_dict=False)
    prompt = list(prompt) + tokenizer.encode(config.response_prefix, add_special_tokens=False)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    reply = [*tokenizer.encode(" go to fridge 1", add_special_tokens=False), end]
    observation = tokenizer.encode("\n<|im_start|>user\nYou arrive at fridge 1.<|im_end|>\n"
                                   "<|im_start|>assistant\nAction:", add_special_tokens=False)
    completion = reply + observation + reply
    mask = [1] * len(reply) + [0] * len(observation) + [1] * len(reply)
    turns = [0] * (len(reply) + len(observation)) + [1] * len(reply)
    demo = Episode.from_ids(group=0, task={"id": "alfworld/train/demo/0"}, prompt_ids=prompt, completion_ids=completion,
                   env_mask=mask, turn_index=turns, turn_ends=[len(reply) - 1, len(completion) - 1],
                   logprobs=[0.0] * len(completion), turn_rewards=[0.0, 1.0], won=True, terminated=True,
                   truncated=False)
    demo.validate()
    trainer = build_trainer(config, tokenizer, demo_dataset([demo]))
    assert trainer.model.config.num_hidden_layers == 2
    assert trainer.args.max_length == written.max_length and trainer.args.learning_rate == written.learning_rate
    assert trainer.args.num_train_epochs == written.num_train_epochs
    row = trainer.data_collator([trainer.train_dataset[0]])
    labels = row["labels"][0].tolist()
    assert sum(label != -100 for label in labels) == sum(mask)  # the replies only: prompt and observation out


# ---------------------------------------------------------------------- the GPU image
def dockerfile_args() -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S+)", DOCKERFILE.read_text(), flags=re.MULTILINE))


# vLLM pins one torch build (its wheel's metadata: ``torch==...``); the torch wheels on PyPI are
# built for one CUDA major. Bump these together, from `pip install --dry-run --report` of the new vLLM.
VLLM_PINS = {"0.31.0": {"torch": "2.13.0", "cuda_major": "13", "transformers": ">=5.10.4,<5.18.0"}}


def test_gpu_image_pins_a_coherent_torch_vllm_transformers_trl_set():
    from importlib.metadata import requires

    from packaging.requirements import Requirement
    from packaging.version import Version

    args = dockerfile_args()
    vllm, torch_version, cuda = args["VLLM_VERSION"], args["TORCH_VERSION"], args["CUDA_IMAGE"]
    assert vllm in VLLM_PINS, f"vLLM {vllm}: record its torch pin in VLLM_PINS (and check the CUDA base)"
    pins = VLLM_PINS[vllm]
    assert torch_version == pins["torch"]
    assert re.match(rf"nvidia/cuda:{pins['cuda_major']}\.\d+\.\d+-cudnn-devel-ubuntu22\.04$", cuda), cuda
    assert Version(args["TRANSFORMERS_VERSION"]) in Requirement(f"transformers{pins['transformers']}").specifier
    # TRL's own vllm extra says which vLLM releases its GRPOTrainer supports.
    trl_vllm = next(Requirement(r) for r in requires("trl") if r.startswith("vllm") and 'extra == "vllm"' in r)
    assert Version(vllm) in trl_vllm.specifier, f"TRL supports vllm{trl_vllm.specifier}"
    # And the project's own ranges accept every pin.
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = [Requirement(r) for r in project["dependencies"] + extras["train"] + extras["gpu"]]
    pinned = {"torch": torch_version, "transformers": args["TRANSFORMERS_VERSION"], "trl": args["TRL_VERSION"],
              "vllm": vllm, "deepspeed": args["DEEPSPEED_VERSION"]}
    for requirement in wanted:
        if requirement.name in pinned:
            assert Version(pinned.pop(requirement.name)) in requirement.specifier, requirement
    assert not pinned, f"pinned but not required by pyproject.toml: {pinned}"
    # The documentation states the same versions.
    readme = (ROOT / "docker" / "README.md").read_text()
    for text in (f"torch {torch_version}", f"vLLM {vllm}", f"CUDA {pins['cuda_major']}",
                 f"transformers {args['TRANSFORMERS_VERSION']}"):
        assert text in readme, text


def test_gpu_image_installs_the_project_its_world_build_deps_and_the_sandbox():
    text = DOCKERFILE.read_text()
    steps = re.sub(r"\\\n", " ", text)
    assert re.search(r"^COPY pyproject\.toml README\.md ", steps, flags=re.MULTILINE)
    for package in ("envs", "agents", "trainers", "recipes"):
        assert re.search(rf"^COPY .*\b{package}/? ", steps, flags=re.MULTILINE), package
    assert re.search(r'pip install .*-e "\.\[gpu,test\]"', steps)
    apt = " ".join(re.findall(r"apt-get install [^&]*", steps))
    for package in ("build-essential", "cmake", "g++", "bubblewrap", "git", "python${PYTHON_VERSION}-dev"):
        assert package in apt.split(), package
    assert 'ENTRYPOINT ["turngym"]' in text
    hf_home = re.search(r"HF_HOME=(\S+)", text).group(1)
    assert re.search(rf'^VOLUME \[.*"{re.escape(hf_home)}"', text, flags=re.MULTILINE)
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^docker-gpu-image:.*\n\tdocker build -f docker/gpu/Dockerfile ", makefile, flags=re.MULTILINE)
    test_target = re.search(r"^test:(.*)$", makefile, flags=re.MULTILINE).group(1)
    assert "docker-gpu-image" not in test_target
