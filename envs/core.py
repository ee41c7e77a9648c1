"""The text-environment contract every turngym world follows.

A world subclasses :class:`TextEnv` and implements two methods:

* ``_start(task)``: begin an episode on ``task`` and return a :class:`WorldState`;
* ``_execute(command)``: run one validated command and return the new :class:`WorldState`.

Everything else is shared and lives here, so every world behaves the same way:

* action validation: empty, huge, multi-line, binary or control-character actions become an
  *invalid action* with feedback; they never reach the world and never raise;
* the three action protocols (``free_form``, ``admissible_in_prompt``, ``choose_index``);
* turn and episode rewards in ``sparse`` and ``dense`` modes (see :func:`dense_turn_reward`);
* the turn limit, with ``terminated`` (won or lost) kept apart from ``truncated`` (turn limit,
  engine failure);
* the ``info`` dict of the contract (see :data:`INFO_KEYS`).
"""

from __future__ import annotations

import enum
import re
import string
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym
from gymnasium import spaces

from turngym.envs.tasks import Task, TaskSet

# Keys present in every ``info`` dict returned by ``reset`` and ``step``.
INFO_KEYS = (
    "turn",
    "turn_reward",
    "episode_reward",
    "won",
    "lost",
    "invalid_action",
    "invalid_reason",
    "reward_components",
    "admissible_commands",
    "task",
    "max_turns",
    "optimal_length",
    "action_protocol",
    "reward_mode",
    "executed_command",
    "truncation_reason",
)

DEFAULT_MAX_TURNS = 50
TRUNCATION_MARKER = "\n[... {cut} characters cut ...]\n"


class RewardMode(str, enum.Enum):
    """``sparse``: the outcome only, on the last turn. ``dense``: per-turn progress."""

    SPARSE = "sparse"
    DENSE = "dense"


class ActionProtocol(str, enum.Enum):
    """How the agent names its action; every result records which one produced it."""

    FREE_FORM = "free_form"  # the agent writes a command; it is not shown the admissible list
    ADMISSIBLE_IN_PROMPT = "admissible_in_prompt"  # the list is shown; the agent writes a command
    CHOOSE_INDEX = "choose_index"  # the list is numbered; the agent answers with a number
    TOOLS = "tools"  # the agent calls one of the world's tools (JSON: {"name", "arguments"}); see TextEnv.tools


def protocol_action(command: str, info: Mapping[str, Any]) -> str:
    """``command`` expressed in the episode's action protocol (``info`` is the latest step's or reset's): its
    1-based number among the admissible commands for ``choose_index``, a call of the ``command`` tool for
    ``tools`` (unless it is a call already), the command itself otherwise."""
    protocol = info.get("action_protocol")
    if protocol == ActionProtocol.TOOLS.value:
        from turngym.envs.tools import ToolCall, ToolCallError

        try:  # a walkthrough under the tools protocol is calls already (TextEnv._command_call)
            return ToolCall.from_action(command).to_action()
        except ToolCallError:
            return ToolCall("command", {"command": command}).to_action()
    if protocol != ActionProtocol.CHOOSE_INDEX.value:
        return command
    admissible = [normalise_command(c) for c in info.get("admissible_commands") or []]
    wanted = normalise_command(command)
    return str(admissible.index(wanted) + 1) if wanted in admissible else command


class AnyText(spaces.Text):
    """A Text space that admits any unicode string up to ``max_length``.

    gymnasium's ``Text`` only admits characters from a finite charset, but observations carry
    arbitrary game text and actions arbitrary model output. Sampling still draws from ``charset``.
    """

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length


@dataclass
class WorldState:
    """What a world reports after it starts an episode or executes a command.

    Attributes:
        text: the world's answer to the command (or the opening text).
        progress: a potential in (-inf, 1] measuring how close the episode is to a win; it is
            used by dense rewards only and is taken as 1 whenever ``won`` is true. ``None``
            means unchanged (0 at the start of an episode).
        won, lost: the episode ended with a win or a loss (both mean ``terminated``).
        admissible_commands: the commands that make sense now, or ``None`` if the world has none.
        invalid: whether the executed command was invalid; ``None`` lets the base class decide
            (not in ``admissible_commands``).
        components: raw reward signals of the world (score delta, ...), reported in
            ``info["reward_components"]`` next to the ones the base class computes.
        extra: further ``info`` entries, e.g. the walkthrough at reset.
        failure: set when the engine hung or crashed; the episode is then truncated.
        optimal_length: length of the best known solution (meaningful at start).
        outcome: the episode's final score, for a world whose outcome is not a plain win or loss
            (a test pass ratio, say). Read when the episode ends; ``None`` means 1.0 if ``won``
            else 0.0. Sparse mode pays it on the last turn; dense mode pays
            ``outcome - progress_{T-1}``, so dense rewards still sum to it.
    """

    text: str
    progress: float | None = None
    won: bool = False
    lost: bool = False
    admissible_commands: list[str] | None = None
    invalid: bool | None = None
    components: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    failure: str | None = None
    optimal_length: int | None = None
    outcome: float | None = None


def sparse_turn_reward(won: bool) -> float:
    """r_t = 1 if the episode is won at turn t, else 0 (so the return is the outcome)."""
    return 1.0 if won else 0.0


def dense_turn_reward(previous_progress: float, progress: float, won: bool) -> float:
    """Potential-based progress reward: r_t = phi(s_t) - phi(s_{t-1}), with phi(s_T) = 1 on a win.

    With phi(s_0) = 0 the rewards telescope, sum_t r_t = phi(s_T) - phi(s_0), which is exactly 1 on
    a won episode: dense rewards sum to the sparse outcome. Moving away from the goal is negative.
    """
    return (1.0 if won else progress) - previous_progress


def normalise_command(command: str) -> str:
    """Lower case with single spaces: how commands are compared to the admissible list."""
    return " ".join(command.lower().split())


def truncate_text(text: str, limit: int) -> str:
    """Keep the head and tail of ``text`` within ``limit`` characters, with a visible marker."""
    if len(text) <= limit:
        return text
    marker = TRUNCATION_MARKER.format(cut=len(text))  # the longest the marker can be
    if limit < len(marker) + 2:
        return text[:limit]
    kept = limit - len(marker)
    head, tail = kept * 2 // 3, kept - kept * 2 // 3
    marker = TRUNCATION_MARKER.format(cut=len(text) - head - tail)
    return text[:head] + marker + text[len(text) - tail :]


def _has_control_characters(text: str) -> bool:
    return any(unicodedata.category(ch).startswith("C") for ch in text)


class TextEnv(gym.Env[str, str]):
    """Base class of every turngym world: a ``gymnasium.Env[str, str]`` with the turngym contract.

    Args:
        reward_mode: ``"sparse"`` or ``"dense"`` (see :func:`dense_turn_reward`).
        action_protocol: ``"free_form"``, ``"admissible_in_prompt"`` or ``"choose_index"``.
        max_turns: turn limit; ``None`` takes the world's default (2x the optimal length when
            the world knows it, else :data:`DEFAULT_MAX_TURNS`).
        invalid_action_penalty: subtracted from the turn reward of an invalid action.
        max_action_chars: longer actions are invalid (they never reach the world).
        max_observation_chars: longer world texts are cut in the middle, with a visible marker.
        tasks: the tasks ``reset`` draws from when no task is passed in ``options``.
        render_mode: ``"ansi"`` (``render()`` returns the last turn) or ``"human"`` (prints it).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"]}
    world_name: ClassVar[str] = "text"
    # One line telling a confused agent what an action looks like in this world.
    action_hint: ClassVar[str] = "Reply with one short command."
    # How an LLM agent should read the action from its reply here: None takes the agent's default
    # ("prefix": the text after "Action:"); "raw" hands the whole reply over (a world that parses it).
    agent_action_format: ClassVar[str | None] = None
    # The most one step() can take, where a world knows it (a sandboxed command, say); EnvPool's
    # step deadline follows it. None: a quick world, the pool's default deadline applies.
    max_step_seconds: float | None = None

    def __init__(
        self,
        *,
        reward_mode: str | RewardMode = RewardMode.SPARSE,
        action_protocol: str | ActionProtocol = ActionProtocol.FREE_FORM,
        max_turns: int | None = None,
        invalid_action_penalty: float = 0.0,
        max_action_chars: int = 1024,
        max_observation_chars: int = 8192,
        tasks: TaskSet | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.reward_mode = _parse_enum(RewardMode, reward_mode, "reward_mode")
        self.action_protocol = _parse_enum(ActionProtocol, action_protocol, "action_protocol")
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.max_turns_option = max_turns
        self.invalid_action_penalty = float(invalid_action_penalty)
        self.max_action_chars = int(max_action_chars)
        self.max_observation_chars = int(max_observation_chars)
        self.tasks = tasks
        self.render_mode = render_mode
        self.action_space = AnyText(max_length=self.max_action_chars, min_length=0, charset=string.printable)
        self.observation_space = AnyText(max_length=10**7, min_length=0, charset=string.printable)
        self._task: Task | None = None
        self._state: WorldState | None = None
        self._turn = 0
        self._max_turns = DEFAULT_MAX_TURNS
        self._optimal_length: int | None = None
        self._return = 0.0
        self._done = True
        self._last_render = ""

    # ----------------------------------------------------------------- world hooks
    def _start(self, task: Task | None) -> WorldState:
        """Begin an episode on ``task`` (``None`` when the env has no task set)."""
        raise NotImplementedError

    def _execute(self, command: str) -> WorldState:
        """Execute one validated command and return the new state."""
        raise NotImplementedError

    def _validate_command(self, command: str) -> str | None:
        """Return why ``command`` may not reach the world, or ``None``. Override to restrict."""
        return None

    def tools(self) -> list[dict[str, Any]]:
        """The world's tools under the ``tools`` protocol, in the OpenAI function format
        (:func:`~turngym.envs.tools.function_tool`). Default: one ``command`` tool whose argument is what a
        free-form action would be. A world that offers others overrides this and :meth:`_tool_command`."""
        from turngym.envs.tools import function_tool

        return [function_tool("command", self.action_hint, {
            "command": {"type": "string", "description": "the command, as you would type it"}})]

    def _command_call(self, command: str) -> Any:
        """The call (a :class:`~turngym.envs.tools.ToolCall`) that stands for ``command``, :meth:`_tool_command`'s
        inverse: how the walkthrough reaches the oracle under the ``tools`` protocol. Default: the ``command``
        tool."""
        from turngym.envs.tools import ToolCall

        return ToolCall("command", {"command": command})

    def _admissible_calls(self, commands: Sequence[str]) -> list[str]:
        """The admissible ``commands`` as calls of this world's tools (:meth:`_command_call`, as actions), under the
        ``tools`` protocol: what a baseline picks among (``info["admissible_calls"]``). A command the world cannot
        express as a call is left out."""
        calls = []
        for command in commands:
            try:
                calls.append(self._command_call(command).to_action())
            except (ValueError, TypeError, KeyError):
                continue
        return calls

    def _tool_command(self, call: Any) -> str:
        """The command a valid call (a :class:`~turngym.envs.tools.ToolCall`, checked against :meth:`tools`)
        stands for; it then goes the way a free-form command goes. Default: the ``command`` tool's argument."""
        return str(call.arguments["command"])

    def _close_world(self) -> None:
        """Release the world's resources (engines, processes, files)."""

    def _finish(self, state: WorldState, truncation: str | None) -> WorldState:
        """Called once when an episode ends (won, lost, truncated or failed), before its last
        reward is computed. A world that grades at the end (the SWE world runs the tests) sets
        ``state.outcome`` here and may add ``components``, ``extra`` and text. ``truncation`` is
        the truncation reason, or ``None`` when the episode terminated."""
        return state

    # ----------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode. ``options={"task": Task | task id | dict}`` picks the task."""
        super().reset(seed=seed)
        self._task = self._resolve_task((options or {}).get("task"))
        state = self._start(self._task)
        if state.failure:
            raise RuntimeError(f"{type(self).__name__} could not start task {self._task_info()['id']}: {state.failure}")
        self._require_admissible_for_protocol(state)
        state.progress = 0.0 if state.progress is None else state.progress
        self._state = state
        self._turn = 0
        self._return = 0.0
        self._done = False
        self._optimal_length = state.optimal_length
        self._max_turns = self.max_turns_option or self.default_max_turns(state.optimal_length)
        info = self._info(state, turn_reward=0.0, components={}, invalid_reason=None, command=None, truncation=None)
        info.update(state.extra)
        if self.action_protocol is ActionProtocol.TOOLS:
            info["tools"] = self.tools()  # for the agent to render (a chat template's tools=)
            if isinstance(info.get("walkthrough"), list):  # the expert's commands as calls of this world's tools
                info["walkthrough"] = [self._command_call(c).to_action() for c in info["walkthrough"]]
        observation = self._observation(state.text, state.admissible_commands)
        self._remember(None, observation)
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._state is None or self._done:
            raise RuntimeError(
                f"{type(self).__name__}.step() called on a finished or unstarted episode: call reset() first"
            )
        if not isinstance(action, str):  # a caller's bug, not a move: checked before the turn is counted
            raise TypeError(f"actions are str, got {type(action).__name__}: decode model output before stepping")
        self._turn += 1
        previous = self._state
        command, invalid_reason = self._interpret(action)
        if invalid_reason is None:
            state = self._execute(command)
            state.progress = previous.progress if state.progress is None else state.progress
            if state.invalid is None and state.admissible_commands is not None and previous.admissible_commands:
                admissible = {normalise_command(c) for c in previous.admissible_commands}
                state.invalid = normalise_command(command) not in admissible
                invalid_reason = "not an admissible command" if state.invalid else None
            elif state.invalid:  # the world's own judgement
                invalid_reason = "the world refused or did not understand it"
        else:
            # Rejected before reaching the world: the world's state is unchanged.
            state = WorldState(
                text=f"Invalid action: {invalid_reason}. {self._hint()}",
                progress=previous.progress,
                admissible_commands=previous.admissible_commands,
                components=dict.fromkeys(previous.components, 0.0),
            )
            command = None

        terminated = bool(state.won or state.lost) and not state.failure
        truncation = None
        if state.failure:
            truncation = state.failure
        elif not terminated and self._turn >= self._max_turns:
            truncation = "max_turns"
        truncated = truncation is not None
        if terminated or truncated:
            state = self._finish(state, truncation)
        text = state.text if state.text.strip() else "[the world gave no response]"

        if state.outcome is not None:  # the world scored the ending itself
            outcome = float(state.outcome)
            progress_reward = outcome - previous.progress
            turn_reward = outcome if self.reward_mode is RewardMode.SPARSE else progress_reward
        else:
            outcome = sparse_turn_reward(state.won)
            progress_reward = dense_turn_reward(previous.progress, state.progress, state.won)
            if state.failure:
                turn_reward = 0.0
            else:
                turn_reward = outcome if self.reward_mode is RewardMode.SPARSE else progress_reward
        components = {"outcome": outcome, "progress": progress_reward, **state.components}
        if invalid_reason is not None and self.invalid_action_penalty:
            components["invalid_penalty"] = -self.invalid_action_penalty
            turn_reward -= self.invalid_action_penalty
        self._return += turn_reward
        self._done = terminated or truncated
        self._state = state if not state.failure else previous

        info = self._info(state, turn_reward, components, invalid_reason, command, truncation)
        info.update(state.extra)
        observation = self._observation(text, state.admissible_commands)
        self._remember(action, observation)
        return observation, turn_reward, terminated, truncated, info

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._last_render
        if self.render_mode == "human":
            print(self._last_render)
        return None

    def close(self) -> None:
        self._close_world()
        super().close()

    # ----------------------------------------------------------------- helpers
    def default_max_turns(self, optimal_length: int | None) -> int:
        """2x the optimal length when known (the reference study's budget), else a fixed cap."""
        return 2 * optimal_length if optimal_length else DEFAULT_MAX_TURNS

    @property
    def task(self) -> Task | None:
        return self._task

    @property
    def max_turns(self) -> int:
        return self._max_turns

    def _resolve_task(self, task: Task | str | Mapping[str, Any] | None) -> Task | None:
        if isinstance(task, Task):
            return task
        if isinstance(task, Mapping):
            return Task.from_dict(task)
        if isinstance(task, str):
            if self.tasks is None:
                raise ValueError(f"task {task!r} given by id, but {type(self).__name__} has no task set "
                                 "to look it up in")
            return self.tasks.by_id(task)
        if task is not None:
            raise TypeError(f"options['task'] must be a Task, a task id or a dict, got {type(task).__name__}")
        return self.tasks.sample(self.np_random) if self.tasks is not None else None

    def _require_admissible_for_protocol(self, state: WorldState) -> None:
        shown = (ActionProtocol.ADMISSIBLE_IN_PROMPT, ActionProtocol.CHOOSE_INDEX)
        if self.action_protocol in shown and state.admissible_commands is None:
            raise ValueError(
                f"action_protocol={self.action_protocol.value!r} shows the admissible commands, but "
                f"{type(self).__name__} does not provide them; use action_protocol='free_form'"
            )

    def _interpret(self, action: str) -> tuple[str, str | None]:
        """Turn raw agent output into a world command, or a reason why it is invalid."""
        text = action.strip()
        if not text:
            return "", "the action is empty"
        if len(text) > self.max_action_chars:
            return "", f"the action is {len(text)} characters long; the limit is {self.max_action_chars}"
        if self.action_protocol is ActionProtocol.TOOLS:  # the call's command, then the free-form checks
            text, reason = self._called_command(text)
            if reason is not None:
                return "", reason
        reason = self._character_problem(text)
        if reason is not None:
            return "", reason
        if self.action_protocol is ActionProtocol.CHOOSE_INDEX:
            return self._choose(text)
        reason = self._validate_command(text)
        return (text, reason) if reason is None else ("", reason)

    def _character_problem(self, command: str) -> str | None:
        """Why ``command``'s characters may not reach the world (None when they may): a one-line command has no
        line breaks, control characters or undecodable bytes. A world of multi-line commands overrides it."""
        if _has_control_characters(command):
            return "the action contains line breaks, control characters or undecodable bytes"
        return None

    def _called_command(self, text: str) -> tuple[str, str | None]:
        """The command a tool call (JSON) stands for, or why there is none: unreadable, an unknown tool,
        arguments that break the tool's schema, an empty command."""
        from turngym.envs.tools import ToolCall, ToolCallError, check_call

        try:
            call = ToolCall.from_action(text)
        except ToolCallError as error:
            return "", str(error)
        reason = check_call(call, self.tools())
        if reason is not None:
            return "", reason
        command = self._tool_command(call).strip()
        return (command, None) if command else ("", f"the call of {call.name} names an empty command")

    def _choose(self, text: str) -> tuple[str, str | None]:
        commands = (self._state.admissible_commands or []) if self._state else []
        # "3", "[3]", "3." and "3. take apple" (models often echo the option) all choose 3
        match = re.match(r"[\[(]?(\d{1,6})[\]).:]{0,2}(?:\s|$)", text)
        if match is None:
            return "", f"expected the number of one of the {len(commands)} listed actions"
        index = int(match.group(1))
        if not 1 <= index <= len(commands):
            return "", f"{index} is not between 1 and {len(commands)}"
        return commands[index - 1], None

    def _hint(self) -> str:
        if self.action_protocol is ActionProtocol.CHOOSE_INDEX:
            return "Reply with the number of one of the listed actions."
        if self.action_protocol is ActionProtocol.TOOLS:
            names = ", ".join(tool["function"]["name"] for tool in self.tools())
            return f"Call one tool ({names}) with its arguments as a JSON object."
        return self.action_hint

    def _observation(self, text: str, admissible: list[str] | None) -> str:
        text = truncate_text(text, self.max_observation_chars)
        if self.action_protocol is ActionProtocol.ADMISSIBLE_IN_PROMPT and admissible:
            text += "\n\nAdmissible commands:\n" + "\n".join(f"- {c}" for c in admissible)
        elif self.action_protocol is ActionProtocol.CHOOSE_INDEX and admissible:
            text += "\n\nChoose one action by its number:\n" + "\n".join(
                f"{i}. {c}" for i, c in enumerate(admissible, start=1)
            )
        return text

    def _task_info(self) -> dict[str, str | None]:
        if self._task is None:
            return {"id": None, "split": None, "difficulty": None}
        return self._task.info()

    def _info(
        self,
        state: WorldState,
        turn_reward: float,
        components: dict[str, float],
        invalid_reason: str | None,
        command: str | None,
        truncation: str | None,
    ) -> dict[str, Any]:
        return {
            "turn": self._turn,
            "turn_reward": turn_reward,
            "episode_reward": self._return if self._done else None,
            "won": bool(state.won),
            "lost": bool(state.lost),
            "invalid_action": invalid_reason is not None,
            "invalid_reason": invalid_reason,
            "reward_components": components,
            "admissible_commands": list(state.admissible_commands) if state.admissible_commands is not None else None,
            **({"admissible_calls": self._admissible_calls(state.admissible_commands)}
               if self.action_protocol is ActionProtocol.TOOLS and state.admissible_commands is not None else {}),
            "task": self._task_info(),
            "max_turns": self._max_turns,
            "optimal_length": self._optimal_length,
            "action_protocol": self.action_protocol.value,
            "reward_mode": self.reward_mode.value,
            "executed_command": command,
            "truncation_reason": truncation,
        }

    def _remember(self, action: str | None, observation: str) -> None:
        if self.render_mode is None:
            return
        head = f"[turn {self._turn}/{self._max_turns}]"
        self._last_render = f"{head} > {action}\n{observation}" if action is not None else f"{head}\n{observation}"
        if self.render_mode == "human":
            self.render()


def _parse_enum(kind: type[enum.Enum], value: Any, name: str):
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in kind)  # type: ignore[attr-defined]
        raise ValueError(f"{name} must be one of {choices}, got {value!r}") from None
