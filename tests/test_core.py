"""The TextEnv contract, exercised on tiny custom worlds (no TextWorld)."""

from __future__ import annotations

import itertools
import re
import warnings
from pathlib import Path

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

from tests.conftest import readme_world_code
from turngym import envs
from turngym.envs.core import normalise_command, truncate_text
from turngym.envs.tasks import Task, TaskSet


# --------------------------------------------------------------------------- worlds under test
class GuessNumber(envs.TextEnv):
    """The README's worked example: guess a number between 1 and 20."""

    action_hint = "Reply with a whole number between 1 and 20."

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.executed: list[str] = []  # every command that reached the world, across episodes

    def _start(self, task):
        # A task may pin the secret (used by tests that need exact values); else draw it.
        self.secret = int(task.payload["secret"]) if task is not None else int(self.np_random.integers(1, 21))
        self.progress = 0.0
        return envs.WorldState(text="I am thinking of a number between 1 and 20. Guess it.", optimal_length=5)

    def _execute(self, command):
        self.executed.append(command)
        try:
            guess = int(command)
        except ValueError:
            return envs.WorldState(text=f"{command!r} is not a number.", invalid=True, progress=self.progress)
        if guess == self.secret:
            return envs.WorldState(text="Correct, you win!", won=True, progress=1.0)
        self.progress = 1 - abs(guess - self.secret) / 20
        return envs.WorldState(text="Too low." if guess < self.secret else "Too high.", progress=self.progress)


COMMANDS = ["look", "go north", "go south"]


class Corridor(envs.TextEnv):
    """A world with admissible commands: 'go north' twice wins."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.executed: list[str] = []

    def _start(self, task):
        self.position = 0
        return envs.WorldState(text="You stand at the south end of a corridor.", admissible_commands=list(COMMANDS))

    def _execute(self, command):
        self.executed.append(command)
        command = normalise_command(command)
        if command == "go north":
            self.position += 1
        elif command == "go south":
            self.position = max(self.position - 1, 0)
        return envs.WorldState(
            text=f"You are {self.position} steps up the corridor.",
            progress=self.position / 2,
            won=self.position >= 2,
            admissible_commands=list(COMMANDS),
        )


envs.register("testorg/GuessNumber-v0", entry_point=GuessNumber)


def secret_tasks(*secrets: int) -> TaskSet:
    tasks = tuple(
        Task(world="guess", id=f"guess/{s}", split="eval", difficulty="easy", payload={"secret": s}) for s in secrets
    )
    return TaskSet(name="guess", version="1", tasks=tasks)


def play_binary_search(env, info):
    """Play GuessNumber by binary search; return the list of (obs, reward, terminated, truncated, info)."""
    low, high = 1, 20
    steps = []
    while True:
        guess = (low + high) // 2
        result = env.step(str(guess))
        steps.append(result)
        obs, _, terminated, truncated, _ = result
        if terminated or truncated:
            return steps
        if "Too low" in obs:
            low = guess + 1
        else:
            assert "Too high" in obs
            high = guess - 1


def assert_info_keys(info):
    missing = [k for k in envs.INFO_KEYS if k not in info]
    assert not missing, f"info lacks {missing}"


# --------------------------------------------------------------------------- the worked example
def test_worked_example_registers_makes_and_wins():
    env = gymnasium.make("testorg/GuessNumber-v0")
    assert "testorg/GuessNumber-v0" in envs.text_world_ids("testorg")
    assert isinstance(env.unwrapped, GuessNumber)
    obs, info = env.reset(seed=3)
    assert "Guess it" in obs
    assert_info_keys(info)
    assert info["turn"] == 0
    assert info["episode_reward"] is None
    assert info["optimal_length"] == 5
    assert info["max_turns"] == 10
    assert info["admissible_commands"] is None
    assert info["action_protocol"] == "free_form" and info["reward_mode"] == "sparse"
    assert info["task"] == {"id": None, "split": None, "difficulty": None}

    steps = play_binary_search(env, info)
    assert 1 <= len(steps) <= 5
    for turn, (_, reward, _, _, step_info) in enumerate(steps, start=1):
        assert_info_keys(step_info)
        assert step_info["turn"] == turn
        assert step_info["invalid_action"] is False
    obs, reward, terminated, truncated, info = steps[-1]
    assert "Correct" in obs
    assert terminated is True and truncated is False
    assert info["won"] is True and info["lost"] is False
    assert reward == 1.0 and info["episode_reward"] == 1.0
    assert info["executed_command"] == str(env.unwrapped.secret)
    env.close()


README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs_verbatim_and_wins():
    """The README says this module plays its exact example: run the block as written, then play on."""
    namespace: dict = {"__name__": "__main__"}  # the block runs its demo lines as a script
    exec(compile(readme_world_code(), str(README), "exec"), namespace)  # noqa: S102 - our own README
    env = namespace["env"]
    assert isinstance(env.unwrapped, namespace["GuessNumber"])
    assert "myorg/GuessNumber-v0" in envs.text_world_ids("myorg")
    info = namespace["info"]
    assert_info_keys(info)
    assert info["turn"] == 1 and info["reward_mode"] == "dense"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)
    for seed in range(5):
        _, info = env.reset(seed=seed)
        secret = env.unwrapped.secret
        low, high, rewards = 1, 20, []
        while True:
            guess = (low + high) // 2
            obs, reward, terminated, truncated, info = env.step(str(guess))
            assert_info_keys(info)
            rewards.append(reward)
            if terminated or truncated:
                break
            if "higher" in obs:
                low = guess + 1
            else:
                assert "lower" in obs
                high = guess - 1
        assert terminated and not truncated and info["won"], seed
        assert info["executed_command"] == str(secret)
        assert len(rewards) <= 5
        assert sum(rewards) == pytest.approx(1.0)
        assert info["episode_reward"] == pytest.approx(1.0)
    env.close()


def test_envs_make_builds_the_registered_world_with_overrides():
    env = envs.make("testorg/GuessNumber-v0", reward_mode="dense", max_turns=3)
    assert env.unwrapped.reward_mode is envs.RewardMode.DENSE
    _, info = env.reset(seed=0)
    assert info["max_turns"] == 3
    env.close()


def test_worked_example_passes_gymnasium_env_checker():
    env = gymnasium.make("testorg/GuessNumber-v0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a checker warning is a contract violation too
        check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_reset_seed_reproduces_the_episode():
    a, b = GuessNumber(), GuessNumber()
    a.reset(seed=11)
    b.reset(seed=11)
    assert a.secret == b.secret
    trajectory_a = [(o, r, te, tr) for o, r, te, tr, _ in play_binary_search(a, None)]
    trajectory_b = [(o, r, te, tr) for o, r, te, tr, _ in play_binary_search(b, None)]
    assert trajectory_a == trajectory_b
    secrets = set()
    for seed in range(10):
        a.reset(seed=seed)
        secrets.add(a.secret)
    assert len(secrets) > 1, "different seeds should draw different secrets"


# --------------------------------------------------------------------------- rewards
def test_sparse_rewards_are_zero_until_the_winning_turn():
    env = GuessNumber(tasks=secret_tasks(7))
    _, info = env.reset(options={"task": "guess/7"})
    assert info["task"] == {"id": "guess/7", "split": "eval", "difficulty": "easy"}
    for guess in ("10", "abc", "3"):
        _, reward, terminated, truncated, info = env.step(guess)
        assert reward == 0.0 and info["turn_reward"] == 0.0
        assert info["episode_reward"] is None
        assert not terminated and not truncated
    _, reward, terminated, truncated, info = env.step("7")
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["episode_reward"] == 1.0
    assert info["reward_components"]["outcome"] == 1.0


def test_sparse_episode_reward_is_zero_on_a_lost_budget():
    env = GuessNumber(tasks=secret_tasks(7), max_turns=2)
    env.reset(options={"task": "guess/7"})
    _, _, _, _, info = env.step("1")
    assert info["episode_reward"] is None
    _, reward, terminated, truncated, info = env.step("2")
    assert truncated and not terminated
    assert reward == 0.0 and info["episode_reward"] == 0.0


def test_dense_rewards_are_progress_deltas_and_sum_to_one():
    env = GuessNumber(tasks=secret_tasks(7), reward_mode="dense")
    env.reset(options={"task": "guess/7"})
    rewards = []
    # phi: 0 -> 1 - 3/20 = 0.85 -> (world-invalid, unchanged) 0.85 -> 1 - 5/20 = 0.75 -> win: 1
    expected = [0.85, 0.0, -0.10, 0.25]
    for guess, want in zip(["10", "abc", "2", "7"], expected, strict=True):
        _, reward, terminated, _, info = env.step(guess)
        assert reward == pytest.approx(want), guess
        assert info["turn_reward"] == reward
        assert info["reward_components"]["progress"] == pytest.approx(want)
        rewards.append(reward)
    assert terminated
    assert sum(rewards) == pytest.approx(1.0)
    assert info["episode_reward"] == pytest.approx(1.0)
    assert info["reward_components"]["outcome"] == 1.0


def test_dense_reward_forces_the_potential_to_one_on_a_win():
    class LowPotentialWin(GuessNumber):
        def _execute(self, command):
            state = super()._execute(command)
            if state.won:
                state.progress = 0.3  # the base class must ignore this on a win
            return state

    env = LowPotentialWin(tasks=secret_tasks(7), reward_mode="dense")
    env.reset(options={"task": "guess/7"})
    _, r1, *_ = env.step("17")  # phi = 0.5
    _, r2, terminated, _, info = env.step("7")
    assert r1 == pytest.approx(0.5)
    assert r2 == pytest.approx(0.5)
    assert terminated and info["episode_reward"] == pytest.approx(1.0)


def test_reward_functions_exact_values():
    assert envs.sparse_turn_reward(True) == 1.0
    assert envs.sparse_turn_reward(False) == 0.0
    assert envs.dense_turn_reward(0.25, 0.75, False) == pytest.approx(0.5)
    assert envs.dense_turn_reward(0.75, 0.25, False) == pytest.approx(-0.5)
    assert envs.dense_turn_reward(0.4, 0.1, True) == pytest.approx(0.6)
    assert envs.dense_turn_reward(0.0, 0.0, False) == 0.0
    # telescoping: any path of potentials ending in a win sums to 1 - phi_0
    potentials = [0.0, 0.3, -0.2, 0.6, 0.1]
    total = sum(envs.dense_turn_reward(a, b, False) for a, b in itertools.pairwise(potentials))
    total += envs.dense_turn_reward(potentials[-1], 0.0, True)
    assert total == pytest.approx(1.0)


# --------------------------------------------------------------------------- termination
def test_default_max_turns_is_twice_the_optimal_length():
    env = GuessNumber()
    _, info = env.reset(seed=0)
    assert info["max_turns"] == env.max_turns == 10
    assert env.default_max_turns(None) == envs.core.DEFAULT_MAX_TURNS
    corridor = Corridor()  # no optimal length known
    _, info = corridor.reset(seed=0)
    assert info["max_turns"] == envs.core.DEFAULT_MAX_TURNS
    assert info["optimal_length"] is None


def test_hitting_max_turns_truncates_and_does_not_terminate():
    env = GuessNumber(tasks=secret_tasks(7))
    env.reset(options={"task": "guess/7"})
    for turn in range(1, 10):
        _, _, terminated, truncated, info = env.step("1")
        assert not terminated and not truncated and info["truncation_reason"] is None, turn
    _, _, terminated, truncated, info = env.step("1")
    assert info["turn"] == 10
    assert truncated is True and terminated is False
    assert info["truncation_reason"] == "max_turns"
    assert info["won"] is False


def test_a_win_terminates_even_on_the_last_allowed_turn():
    env = GuessNumber(tasks=secret_tasks(7), max_turns=2)
    env.reset(options={"task": "guess/7"})
    env.step("1")
    _, reward, terminated, truncated, info = env.step("7")
    assert terminated is True and truncated is False
    assert info["truncation_reason"] is None
    assert reward == 1.0


def test_max_turns_must_be_positive():
    with pytest.raises(ValueError, match="max_turns"):
        GuessNumber(max_turns=0)


def test_stepping_a_finished_or_unstarted_episode_raises():
    env = GuessNumber(tasks=secret_tasks(7))
    with pytest.raises(RuntimeError, match="reset"):
        env.step("1")
    env.reset(options={"task": "guess/7"})
    env.step("7")
    with pytest.raises(RuntimeError, match="reset"):
        env.step("7")
    env.reset(options={"task": "guess/7"})  # reset makes it playable again
    _, reward, terminated, _, _ = env.step("7")
    assert terminated and reward == 1.0


@pytest.mark.parametrize("action", [None, 5, b"5", ["5"]])
def test_non_str_action_raises_type_error(action):
    env = gymnasium.make("testorg/GuessNumber-v0")
    env.reset(seed=0)
    with pytest.raises(TypeError, match="str"):
        env.step(action)
    _, _, _, _, info = env.step("10")
    assert info["turn"] == 1  # the refused call did not use up a turn
    env.close()


# --------------------------------------------------------------------------- invalid actions
BAD_ACTIONS = {
    "empty": "",
    "whitespace": " \t  ",
    "huge": "7" * 10_000,
    "nul": "go\x00north",
    "escape": "a\x1b[2J",
    "multi-line": "7\n8",
    "lone surrogate": "\udcff",
    "bell": "go\x07north",
    "zero-width": "7\u200b",
}


@pytest.mark.parametrize("action", list(BAD_ACTIONS.values()), ids=list(BAD_ACTIONS))
def test_malformed_actions_are_invalid_with_feedback_and_never_reach_the_world(action):
    env = GuessNumber(tasks=secret_tasks(7), reward_mode="dense")
    env.reset(options={"task": "guess/7"})
    env.step("10")  # phi = 0.85
    executed_before = list(env.executed)
    obs, reward, terminated, truncated, info = env.step(action)
    assert env.executed == executed_before, "a rejected action reached the world"
    assert info["invalid_action"] is True
    assert info["invalid_reason"]
    assert obs.startswith("Invalid action:")
    assert "number between 1 and 20" in obs  # the world's action hint
    assert info["executed_command"] is None
    assert info["turn"] == 2
    assert reward == 0.0  # state unchanged: no progress either way
    assert not terminated and not truncated
    # the episode goes on normally
    _, reward, terminated, _, info = env.step("7")
    assert terminated and info["turn"] == 3
    assert reward == pytest.approx(0.15)


def test_action_is_stripped_before_it_reaches_the_world():
    env = GuessNumber(tasks=secret_tasks(7))
    env.reset(options={"task": "guess/7"})
    _, reward, terminated, _, info = env.step("  7 \t")
    assert env.executed == ["7"]
    assert info["executed_command"] == "7"
    assert terminated and reward == 1.0


def test_action_length_limit_is_configurable():
    env = GuessNumber(tasks=secret_tasks(7), max_action_chars=4)
    env.reset(options={"task": "guess/7"})
    _, _, _, _, info = env.step("00007")
    assert info["invalid_action"] is True and "limit is 4" in info["invalid_reason"]
    assert env.executed == []
    _, _, terminated, _, info = env.step("0007")
    assert terminated and info["invalid_action"] is False


def test_invalid_action_penalty_is_subtracted_and_reported():
    env = GuessNumber(tasks=secret_tasks(7), invalid_action_penalty=0.25)
    env.reset(options={"task": "guess/7"})
    _, reward, _, _, info = env.step("")  # rejected by the base class
    assert reward == pytest.approx(-0.25)
    assert info["reward_components"]["invalid_penalty"] == pytest.approx(-0.25)
    _, reward, _, _, info = env.step("abc")  # executed, but the world says invalid
    assert info["invalid_action"] is True
    assert env.executed == ["abc"]
    assert reward == pytest.approx(-0.25)
    assert info["reward_components"]["invalid_penalty"] == pytest.approx(-0.25)
    _, reward, _, _, info = env.step("3")  # valid: no penalty
    assert reward == 0.0 and "invalid_penalty" not in info["reward_components"]
    _, reward, terminated, _, info = env.step("7")
    assert terminated and reward == 1.0
    assert info["episode_reward"] == pytest.approx(1.0 - 0.5)


def test_world_invalid_command_is_reported_as_invalid():
    env = GuessNumber(tasks=secret_tasks(7))
    env.reset(options={"task": "guess/7"})
    obs, _, _, _, info = env.step("seven")
    assert info["invalid_action"] is True
    assert info["invalid_reason"]
    assert "not a number" in obs
    assert info["executed_command"] == "seven"


def test_commands_outside_the_admissible_list_are_invalid_in_free_form():
    env = Corridor()
    env.reset(seed=0)
    _, _, _, _, info = env.step("dance")
    assert info["invalid_action"] is True
    assert env.executed == ["dance"]
    _, _, _, _, info = env.step("GO   North")  # compared case- and space-insensitively
    assert info["invalid_action"] is False


# --------------------------------------------------------------------------- action protocols
def test_free_form_does_not_show_the_admissible_list():
    env = Corridor()
    obs, info = env.reset(seed=0)
    assert "go north" not in obs
    assert info["admissible_commands"] == COMMANDS


def test_admissible_in_prompt_appends_the_list():
    env = Corridor(action_protocol="admissible_in_prompt")
    obs, info = env.reset(seed=0)
    assert info["action_protocol"] == "admissible_in_prompt"
    assert obs.startswith("You stand at the south end of a corridor.")
    assert obs.endswith("Admissible commands:\n- look\n- go north\n- go south")
    obs, _, _, _, info = env.step("go north")
    assert obs.startswith("You are 1 steps up the corridor.")
    assert "- go south" in obs
    assert info["invalid_action"] is False


def test_choose_index_numbers_the_list_and_picks_by_number():
    env = Corridor(action_protocol="choose_index", reward_mode="dense")
    obs, info = env.reset(seed=0)
    assert info["action_protocol"] == "choose_index"
    assert "Choose one action by its number:\n1. look\n2. go north\n3. go south" in obs
    obs, reward, terminated, _, info = env.step("2")
    assert env.executed == ["go north"]
    assert info["executed_command"] == "go north"
    assert info["invalid_action"] is False
    assert reward == pytest.approx(0.5)
    assert "1. look" in obs
    env.step("1. look")  # models often echo the option after its number
    assert env.executed == ["go north", "look"]
    _, reward, terminated, _, info = env.step(" [2]. ")  # light decoration around the number
    assert env.executed == ["go north", "look", "go north"]
    assert terminated and info["won"] and reward == pytest.approx(0.5)


@pytest.mark.parametrize("answer", ["0", "99", "abc", "go north", "-1", "1.5"])
def test_choose_index_rejects_bad_numbers_with_feedback(answer):
    env = Corridor(action_protocol="choose_index")
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(answer)
    assert info["invalid_action"] is True
    assert info["invalid_reason"]
    assert obs.startswith("Invalid action:")
    assert "Reply with the number of one of the listed actions." in obs
    assert "2. go north" in obs  # the list is shown again
    assert env.executed == []
    assert reward == 0.0 and not terminated and not truncated
    assert info["turn"] == 1


def test_choose_index_reports_the_range():
    env = Corridor(action_protocol="choose_index")
    env.reset(seed=0)
    _, _, _, _, info = env.step("99")
    assert "between 1 and 3" in info["invalid_reason"]


@pytest.mark.parametrize("protocol", ["choose_index", "admissible_in_prompt"])
def test_list_protocols_need_admissible_commands(protocol):
    env = GuessNumber(action_protocol=protocol)
    with pytest.raises(ValueError, match="free_form") as error:
        env.reset(seed=0)
    assert protocol in str(error.value)
    assert "admissible" in str(error.value)


@pytest.mark.parametrize(
    ("kwargs", "choices"),
    [
        ({"reward_mode": "dens"}, ["'sparse'", "'dense'"]),
        ({"action_protocol": "index"}, ["'free_form'", "'admissible_in_prompt'", "'choose_index'"]),
    ],
)
def test_bad_enum_values_name_the_choices(kwargs, choices):
    with pytest.raises(ValueError) as error:
        GuessNumber(**kwargs)
    message = str(error.value)
    assert next(iter(kwargs)) in message
    assert repr(next(iter(kwargs.values()))) in message
    for choice in choices:
        assert choice in message


def test_enum_values_and_members_are_accepted():
    env = GuessNumber(reward_mode=envs.RewardMode.DENSE, action_protocol="free_form")
    assert env.reward_mode is envs.RewardMode.DENSE
    assert env.action_protocol is envs.ActionProtocol.FREE_FORM


# --------------------------------------------------------------------------- tasks through reset
def test_reset_accepts_task_objects_ids_and_dicts():
    tasks = secret_tasks(3, 9)
    env = GuessNumber(tasks=tasks)
    env.reset(options={"task": tasks[1]})
    assert env.secret == 9 and env.task == tasks[1]
    env.reset(options={"task": "guess/3"})
    assert env.secret == 3
    env.reset(options={"task": tasks[1].to_dict()})
    assert env.secret == 9
    with pytest.raises(KeyError):
        env.reset(options={"task": "guess/4"})
    with pytest.raises(TypeError):
        env.reset(options={"task": 3})
    with pytest.raises(ValueError, match="no task set"):
        GuessNumber().reset(options={"task": "guess/3"})


def test_reset_samples_tasks_from_the_task_set_reproducibly():
    tasks = secret_tasks(*range(1, 21))
    env = GuessNumber(tasks=tasks)
    drawn = []
    for seed in range(8):
        _, info = env.reset(seed=seed)
        drawn.append(info["task"]["id"])
    assert all(task_id in {t.id for t in tasks} for task_id in drawn)
    assert len(set(drawn)) > 1
    again = [GuessNumber(tasks=tasks).reset(seed=seed)[1]["task"]["id"] for seed in range(8)]
    assert again == drawn


# --------------------------------------------------------------------------- observation size
def test_long_world_text_is_cut_with_a_marker():
    class Verbose(GuessNumber):
        def _start(self, task):
            state = super()._start(task)
            state.text = "A" * 5000 + "Z" * 5000
            return state

    env = Verbose(max_observation_chars=500)
    obs, _ = env.reset(seed=0)
    assert len(obs) <= 500
    assert obs.startswith("A") and obs.endswith("Z")
    assert "characters cut" in obs


@pytest.mark.parametrize("limit", [60, 100, 1000, 4096])
def test_truncate_text_keeps_within_the_limit_and_shows_the_marker(limit):
    text = "".join(chr(ord("a") + i % 26) for i in range(10_000))
    cut = truncate_text(text, limit)
    assert len(cut) <= limit
    assert re.search(r"\[\.\.\. \d+ characters cut \.\.\.\]", cut)
    head, tail = re.split(r"\n\[\.\.\. \d+ characters cut \.\.\.\]\n", cut)
    assert head and text.startswith(head)
    assert tail and text.endswith(tail)


def test_truncate_text_leaves_short_text_alone():
    assert truncate_text("hello", 5) == "hello"
    assert truncate_text("", 10) == ""
    assert truncate_text("x" * 100, 100) == "x" * 100


def test_truncate_text_marker_counts_the_characters_actually_removed():
    text = "a" * 500 + "b" * 500
    cut = truncate_text(text, 100)
    claimed = int(re.search(r"\[\.\.\. (\d+) characters cut", cut).group(1))
    outside_marker = re.sub(r"\n\[\.\.\. \d+ characters cut \.\.\.\]\n", "", cut)
    assert claimed == len(text) - len(outside_marker)


@pytest.mark.parametrize("limit", [1, 10, 29])
def test_truncate_text_respects_limits_smaller_than_the_marker(limit):
    result = truncate_text("a" * 1000, limit)
    assert len(result) <= limit, f"{len(result)} characters for a limit of {limit}"


# --------------------------------------------------------------------------- rendering
def test_ansi_render_shows_the_last_turn():
    env = GuessNumber(tasks=secret_tasks(7), render_mode="ansi")
    env.reset(options={"task": "guess/7"})
    assert "[turn 0/10]" in env.render()
    env.step("3")
    frame = env.render()
    assert "[turn 1/10] > 3" in frame and "Too low." in frame
    assert GuessNumber().render() is None
    with pytest.raises(ValueError, match="render_mode"):
        GuessNumber(render_mode="rgb_array")


# --------------------------------------------------------------------------- registry
def test_making_an_unknown_id_raises_name_not_found():
    with pytest.raises(gymnasium.error.NameNotFound) as error:
        envs.make("testorg/NoSuchWorld-v0")
    assert "testorg/GuessNumber-v0" in str(error.value)  # the message lists the known worlds


def test_registering_a_non_text_env_raises_type_error():
    class NotAText(gymnasium.Env):
        pass

    with pytest.raises(TypeError, match="TextEnv"):
        envs.register("testorg/NotAText-v0", entry_point=NotAText)
    assert "testorg/NotAText-v0" not in gymnasium.registry
    assert "testorg/NotAText-v0" not in envs.text_world_ids()


def test_registering_without_a_namespace_raises_value_error():
    with pytest.raises(ValueError, match="namespace"):
        envs.register("GuessNumber-v9", entry_point=GuessNumber)
    assert "GuessNumber-v9" not in gymnasium.registry


def test_text_world_ids_filters_by_namespace():
    assert "turngym/TextWorld-v0" in envs.text_world_ids("turngym")
    assert "testorg/GuessNumber-v0" not in envs.text_world_ids("turngym")
    assert "testorg/GuessNumber-v0" in envs.text_world_ids()


# --------------------------------------------------------------------------- graded endings (WorldState.outcome)
class Graded(envs.TextEnv):
    """Ends on 'submit' or at the turn limit; _finish grades it with a score that is not 0 or 1."""

    def __init__(self, score: float = 0.4, **kwargs):
        super().__init__(**kwargs)
        self.score, self.finished = score, []

    def _start(self, task):
        return envs.WorldState(text="Edit, then submit.", optimal_length=2)

    def _execute(self, command):
        if command == "edit":
            return envs.WorldState(text="edited", progress=0.25)
        return envs.WorldState(text="submitted", lost=command == "submit")

    def _finish(self, state, truncation):
        self.finished.append(truncation)
        state.outcome = self.score
        state.extra = {**state.extra, "graded": True}
        state.text += f" [graded {self.score}]"
        return state


@pytest.mark.parametrize("mode, expected", [("sparse", [0.0, 0.4]), ("dense", [0.25, 0.15])])
def test_a_graded_outcome_is_paid_on_the_last_turn_and_dense_rewards_sum_to_it(mode, expected):
    env = Graded(reward_mode=mode)
    env.reset(seed=0)
    env.step("edit")
    obs, reward, terminated, truncated, info = env.step("submit")
    assert terminated and not truncated and env.finished == [None]
    assert [0.25 if mode == "dense" else 0.0, reward] == pytest.approx(expected)
    assert info["episode_reward"] == pytest.approx(0.4) and info["reward_components"]["outcome"] == pytest.approx(0.4)
    assert info["graded"] and obs.endswith("[graded 0.4]")


def test_finish_also_grades_a_truncated_episode():
    env = Graded(max_turns=2)
    env.reset(seed=0)
    env.step("edit")
    _, reward, terminated, truncated, info = env.step("")  # an invalid last action still ends and is graded
    assert truncated and not terminated and info["truncation_reason"] == "max_turns"
    assert env.finished == ["max_turns"] and reward == pytest.approx(0.4) and info["invalid_action"]


def test_without_an_outcome_the_ending_pays_the_plain_win():
    env = GuessNumber(tasks=secret_tasks(7))
    env.reset(options={"task": "guess/7"})
    _, reward, _, _, info = env.step("7")
    assert reward == 1.0 and info["reward_components"]["outcome"] == 1.0


# --------------------------------------------------------------------------- check_text_env
def test_check_text_env_passes_the_worked_example_and_signals():
    ran = envs.check_text_env(GuessNumber())
    assert "reset is reproducible" in ran and "huge action is invalid" in ran
    assert "the walkthrough wins" not in ran  # GuessNumber has no walkthrough
    signals = envs.make("turngym/Signals-v0", reward_mode="dense")
    assert "dense rewards sum to the outcome" in envs.check_text_env(signals)


class CrashesOnNewlines(GuessNumber):
    def _interpret(self, action):
        if "\n" in action:
            raise ValueError("cannot parse")
        return super()._interpret(action)


class Irreproducible(GuessNumber):
    calls = 0

    def _start(self, task):
        Irreproducible.calls += 1
        state = super()._start(task)
        state.text = f"Round {Irreproducible.calls}. {state.text}"
        return state


class LiesAboutItsReturn(GuessNumber):
    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if info["episode_reward"] is not None:
            info["episode_reward"] += 1.0
        return obs, reward, terminated, truncated, info


class WalkthroughLoses(Corridor):
    def _start(self, task):
        state = super()._start(task)
        state.extra = {"walkthrough": ["go south", "go south"]}
        return state


@pytest.mark.parametrize("world, complaint", [
    (CrashesOnNewlines, "multi-line action is invalid, not an error: step raised ValueError"),
    (Irreproducible, "reset is reproducible"),
    (LiesAboutItsReturn, "episode_reward on the last step is the sum of turn rewards"),
    (WalkthroughLoses, "the walkthrough wins"),
])
def test_check_text_env_names_each_broken_promise(world, complaint):
    with pytest.raises(envs.TextEnvContractError, match=re.escape(complaint)):
        envs.check_text_env(world(), check_gymnasium=False)


def test_check_text_env_refuses_a_non_text_env():
    with pytest.raises(TypeError, match="not a turngym TextEnv"):
        envs.check_text_env(gymnasium.make("CartPole-v1"))
