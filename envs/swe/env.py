"""``turngym/SWE-v0``: fix a bug in a real repository with shell commands, judged by its tests.

Each turn the agent runs one shell command, written in a fenced block (mini-swe-agent style; see
:mod:`turngym.envs.swe.actions`), or submits. The observation is the command's exit code and output,
truncated with a visible marker past ``max_observation_chars``. A reply without a command is an
invalid action with a one-line hint. The episode ends on submit (*terminated*: ``won`` when the
instance is resolved, ``lost`` otherwise), at the turn limit or at the wall-clock limit
(*truncated*, ``truncation_reason`` ``"max_turns"`` or ``"wall_clock"``), or when a command is
killed by the kernel's OOM killer at the sandbox's memory limit (``"oom_killed"``). Every episode is graded
when it ends, however it ends, as SWE-agent auto-submits.

Rewards (:mod:`turngym.envs.swe.grading` holds the estimators):

* ``reward="ratio"`` (default): the test pass ratio, r = clip(F2P passing / |F2P| - λ · P2P
  regressed / |P2P|, 0, 1) with λ = ``regression_penalty``;
* ``reward="resolved"``: 1 if every FAIL_TO_PASS and PASS_TO_PASS test passes, else 0;
* ``reward_mode="sparse"``: the reward on the last turn, 0 before;
* ``reward_mode="dense"``: after every turn whose command changed the source files (a git tree
  hash of the working tree, test files excluded, tells), the tests run in a throwaway copy and the
  turn reward is the change of the reward, φ_t - φ_{t-1} with φ_0 = 0. The rewards telescope to the
  final reward. Cost: one test run per modifying turn (on the shipped tasks about 0.1-0.2 s with
  bwrap; on a SWE-Gym repository, its test time, often tens of seconds).

``info["resolved"]``, ``info["pass_ratio"]``, ``info["tests"]`` (status per test),
``info["grading_tampered"]`` (the runner caught the code under test forging its verdict: reward 0),
``info["patch"]`` (the agent's diff as graded, SWE-bench's model_patch, whole) and
``info["patch_truncated"]`` come with the last step. A patch over ``MAX_PATCH_BYTES`` (200,000 bytes)
is not graded: the reward is 0, ``grading_error`` says why, ``patch_truncated`` is True and
``info["patch"]`` holds its head and a marker with its whole size.

``info["walkthrough"]`` at reset is the oracle's play: under ``free_form``, the gold patch through ``git apply``,
then submit; under ``tools``, ``view`` and ``edit`` calls that rebuild it hunk by hunk, then ``submit``
(:mod:`turngym.envs.swe.walkthrough`; ``git apply`` where the tools cannot rebuild it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from turngym.envs.core import ActionProtocol, RewardMode, TextEnv, WorldState, truncate_text
from turngym.envs.swe.actions import FORMAT_HINT, SUBMIT, bad_characters, parse_action, swe_tools, tool_command
from turngym.envs.swe.grading import GradeReport
from turngym.envs.swe.instances import SWEInstance, local_repo_dir, oracle_actions
from turngym.envs.swe.sandbox import (
    PhaseTimeouts,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxSpec,
    make_sandbox,
    resolve_backend,
)
from turngym.envs.swe.sandbox.base import WORKDIR, ExecResult, escape_controls
from turngym.envs.swe.taskset import swe_tasks
from turngym.envs.swe.walkthrough import (
    WalkthroughError,
    parse_read_files,
    patch_files,
    read_files_command,
    tool_walkthrough,
)
from turngym.envs.swe.workspace import MAX_PATCH_BYTES, Workspace
from turngym.envs.tasks import Task, TaskSet

logger = logging.getLogger(__name__)

DEFAULT_MAX_TURNS = 40  # the reference study: raising SWE-Gym tool calls from 10 to 40 lifted success 3 % -> 22 %
MAX_PATCH_CHARS = MAX_PATCH_BYTES  # a graded patch is reported whole (escaped); a bigger one is not graded
WALL_CLOCK = "\x00wall_clock"  # internal: the deadline passed before the action (never a real command)

PROMPT = """You are fixing an issue in the repository {repo}, checked out at {workdir}.

<issue>
{problem}
</issue>

How to work:
{how}"""

FREE_FORM_HOW = """- Reply with exactly one shell command per turn, in a fenced block, for example:
```bash
grep -rn "def main" {workdir}
```
- Each command runs in a fresh bash shell in {workdir}: `cd` and variables do not carry over, and
  processes do not outlive the command. There is no network. A command may run {exec_limit:g} s.
- You have {max_turns} turns and {wall_limit:g} s in all. Python is `python3`.
- Edit files with shell tools (sed -i, cat <<'EOF' > file, python3 -c ...). The tests that judge
  your fix are hidden; the repository's test files are restored before grading.
- When the issue is fixed, reply with:
```bash
submit
```"""

TOOLS_HOW = """- Call one tool per turn: `bash` runs one shell command, `view` shows a file with line numbers,
  `edit` replaces one exact occurrence of a text in a file, `submit` ends the episode for grading.
- Each command runs in a fresh bash shell in {workdir}: `cd` and variables do not carry over, and
  processes do not outlive the command. There is no network. A command may run {exec_limit:g} s.
- You have {max_turns} turns and {wall_limit:g} s in all. Python is `python3`.
- The tests that judge your fix are hidden; the repository's test files are restored before grading.
- When the issue is fixed, call `submit`."""


def _dataclass_from(kind, value):
    if value is None:
        return kind()
    if isinstance(value, kind):
        return value
    if isinstance(value, Mapping):
        return kind(**value)
    raise TypeError(f"expected {kind.__name__} or a dict of its fields, got {type(value).__name__}")


class SWEEnv(TextEnv):
    """SWE tasks in a sandbox.

    Args:
        split: ``"train"`` or ``"eval"`` of the shipped task set (used when ``tasks`` is not given).
        num_tasks: keep the first ``num_tasks`` tasks of the split.
        tasks: an explicit task set of the ``swe`` world (see :func:`turngym.envs.swe.swe_taskset`).
        sandbox: ``"auto"`` (docker when a daemon answers and the image is built, else bwrap),
            ``"bwrap"`` or ``"docker"``.
        limits: :class:`SandboxLimits` (or a dict of its fields).
        timeouts: :class:`PhaseTimeouts` (or a dict): create, exec, test and teardown.
        wall_clock_limit: seconds from reset after which the episode is truncated.
        reward: ``"ratio"`` (test pass ratio) or ``"resolved"`` (binary).
        regression_penalty: λ, the weight of PASS_TO_PASS regressions in the pass ratio.
        workspace_root: where bwrap workspaces live (default ``$TURNGYM_SANDBOX_ROOT`` or /tmp).
        **kwargs: :class:`~turngym.envs.core.TextEnv` options (reward_mode, max_turns,
            max_observation_chars, max_action_chars, invalid_action_penalty...).
    """

    world_name = "swe"
    action_hint = FORMAT_HINT
    agent_action_format = "raw"  # the world reads the fenced command from the whole reply (actions.py)

    def __init__(
        self,
        split: str = "train",
        num_tasks: int | None = None,
        tasks: TaskSet | None = None,
        sandbox: str = "auto",
        limits: SandboxLimits | Mapping[str, Any] | None = None,
        timeouts: PhaseTimeouts | Mapping[str, Any] | None = None,
        wall_clock_limit: float = 900.0,
        reward: str = "ratio",
        regression_penalty: float = 1.0,
        workspace_root: str | Path | None = None,
        **kwargs: Any,
    ) -> None:
        if reward not in ("ratio", "resolved"):
            raise ValueError(f"reward must be 'ratio' or 'resolved', got {reward!r}")
        if regression_penalty < 0:
            raise ValueError(f"regression_penalty must be >= 0, got {regression_penalty}")
        if kwargs.get("action_protocol", "free_form") not in ("free_form", "tools"):
            raise ValueError("the SWE world has no admissible commands: use action_protocol='free_form' (fenced "
                             "commands) or 'tools' (bash, edit, view, submit)")
        kwargs.setdefault("max_action_chars", 32_768)
        kwargs.setdefault("max_observation_chars", 10_000)
        if tasks is None:
            tasks = swe_tasks(split, n=num_tasks)
        super().__init__(tasks=tasks, **kwargs)
        self.limits = _dataclass_from(SandboxLimits, limits)
        self.timeouts = _dataclass_from(PhaseTimeouts, timeouts)
        self.wall_clock_limit = float(wall_clock_limit)
        self._walkthroughs: dict[tuple[str, str], list[str] | None] = {}  # _tool_walkthrough's, per task
        self.reward_kind = reward
        self.regression_penalty = float(regression_penalty)
        self.workspace_root = Path(workspace_root) if workspace_root is not None else None
        self.sandbox_backend = resolve_backend(sandbox)
        self._sandbox: Sandbox | None = None
        self._workspace: Workspace | None = None
        self._instance: SWEInstance | None = None
        self._deadline = 0.0
        self._phi = 0.0
        self._final: GradeReport | None = None
        self._patch = ""

    # ----------------------------------------------------------------- world hooks
    def default_max_turns(self, optimal_length: int | None) -> int:
        return DEFAULT_MAX_TURNS

    def _grading_seconds(self) -> float:
        """The most one grading can take: the tree fingerprint, starting and preparing the fresh
        grading sandbox (each within the create timeout), set-up and test run (each within the
        test timeout), and the clean-up."""
        t = self.timeouts
        return t.exec + 2 * t.create + 2 * t.test + t.teardown

    @property
    def max_step_seconds(self) -> float:
        """The most one ``step`` can take (a command, a dense grading, the final grading, teardown).
        Give an :class:`~turngym.envs.vector.EnvPool` a ``step_timeout`` above it."""
        return self.timeouts.exec + 2 * self._grading_seconds() + self.timeouts.teardown

    @property
    def sandbox_lifetime(self) -> float:
        """How long a sandbox must live: creation, the rollout deadline, a dense and a final grading,
        teardown and a margin. It never expires under a running episode."""
        t = self.timeouts
        return t.create + self.wall_clock_limit + 2 * self._grading_seconds() + t.teardown + 60.0

    def _start(self, task: Task | None) -> WorldState:
        self._teardown()
        if task is None:
            raise ValueError("SWEEnv needs a task; pass tasks=... or options={'task': ...}")
        instance = SWEInstance.from_task(task)
        self._instance, self._phi, self._final, self._patch = instance, 0.0, None, ""
        spec = SandboxSpec(
            repo_dir=local_repo_dir(instance.repo_path) if instance.repo_path else None,
            image=instance.image,
            lifetime_s=self.sandbox_lifetime,
            limits=self.limits,
            timeouts=self.timeouts,
            name=instance.instance_id,
        )
        try:
            self._sandbox = make_sandbox(self.sandbox_backend, spec, workspace_root=self.workspace_root).start()
            self._workspace = Workspace(self._sandbox, instance, test_timeout=self.timeouts.test)
            base_commit = self._workspace.prepare(timeout=self.timeouts.create)
        except SandboxError as error:
            self._teardown()
            return WorldState(text="", failure=f"sandbox_error: {escape_controls(str(error))}")
        self._deadline = time.monotonic() + self.wall_clock_limit
        max_turns = self.max_turns_option or self.default_max_turns(None)
        tools = self.action_protocol is ActionProtocol.TOOLS
        how = (TOOLS_HOW if tools else FREE_FORM_HOW).format(
            workdir=WORKDIR, exec_limit=self.timeouts.exec, max_turns=max_turns, wall_limit=self.wall_clock_limit)
        text = PROMPT.format(repo=instance.repo, workdir=WORKDIR, problem=instance.problem_statement.strip(), how=how)
        return WorldState(
            text=text,
            progress=0.0,
            extra={
                "instance_id": instance.instance_id,
                "repo": instance.repo,
                "base_commit": base_commit,
                "sandbox": self.sandbox_backend,
                "wall_clock_limit": self.wall_clock_limit,
                "walkthrough": (tools and self._tool_walkthrough(instance)) or oracle_actions(instance),
            },
        )

    def _tool_walkthrough(self, instance: SWEInstance) -> list[str] | None:
        """The oracle under the ``tools`` protocol: view, edit and submit calls that rebuild the gold patch from the
        bugged files as set-up left them (:mod:`turngym.envs.swe.walkthrough`); None (then the gold patch goes in with
        ``git apply``) when the tools cannot rebuild it. Costs one command in the sandbox at a task's first reset in
        this env (RL plays a task many times: the walkthrough is kept per task)."""
        key = (instance.instance_id, instance.patch)
        if key in self._walkthroughs:
            return self._walkthroughs[key]
        try:
            result = self._sandbox.exec(read_files_command(patch_files(instance.patch)), timeout=self.timeouts.exec)
            if not result.ok:
                raise WalkthroughError(f"reading the files the gold patch touches failed: {result.output[-300:]}")
            calls = tool_walkthrough(instance.patch, parse_read_files(result.output))
        except (WalkthroughError, SandboxError) as error:
            logger.info("%s: the oracle applies the gold patch with git apply (%s)", instance.instance_id,
                        escape_controls(str(error)))
            if isinstance(error, SandboxError):  # this sandbox's trouble, not the task's: not kept
                return None
            calls = None
        self._walkthroughs[key] = None if calls is None else [call.to_action() for call in calls]
        return self._walkthroughs[key]

    def tools(self) -> list[dict[str, Any]]:
        return swe_tools()

    def _tool_command(self, call: Any) -> str:
        return tool_command(call.name, dict(call.arguments))

    def _command_call(self, command: str) -> Any:
        from turngym.envs.tools import ToolCall, ToolCallError

        if command.startswith("{"):  # a call already (the tools walkthrough, _tool_walkthrough)
            try:
                return ToolCall.from_action(command)
            except ToolCallError:
                pass
        parsed = parse_action(command, self.max_action_chars)  # a fenced command: bash, or submit
        return ToolCall("submit", {}) if parsed.submit else ToolCall("bash", {"command": parsed.command or command})

    def _interpret(self, action: str) -> tuple[str, str | None]:
        if time.monotonic() >= self._deadline:
            return WALL_CLOCK, None
        if self.action_protocol is ActionProtocol.TOOLS:  # TextEnv's: read and check the call, then _character_problem
            return super()._interpret(action)
        parsed = parse_action(action, self.max_action_chars)
        if parsed.error is not None:
            return "", parsed.error
        return (SUBMIT, None) if parsed.submit else (parsed.command, None)

    def _character_problem(self, command: str) -> str | None:
        """Commands are shell scripts: line breaks and tabs are allowed, as in fenced blocks."""
        return "the command contains control characters or undecodable bytes" if bad_characters(command) else None

    def _execute(self, command: str) -> WorldState:
        remaining = self._deadline - time.monotonic()
        if command == WALL_CLOCK or remaining <= 0:
            return self._wall_clock("The wall-clock limit was reached before this action.")
        try:
            if command == SUBMIT:
                report = self._grade_final()
                won = report.resolved
                return WorldState(text=f"Submitted. {report.summary()}.", won=won, lost=not won,
                                  progress=report.reward(self.reward_kind, self.regression_penalty))
            timeout = min(self.timeouts.exec, remaining)
            result = self._sandbox.exec(command, timeout=timeout)
            if result.timed_out and timeout < self.timeouts.exec:
                return self._wall_clock(self._format(result, timeout))
            if result.out_of_memory:  # the sandbox hit its memory limit: end the episode, say why
                return WorldState(text=self._format(result, timeout) + "\n[turngym] The sandbox ran out of memory "
                                  f"(limit {self.limits.memory_mb} MB); the episode was truncated.",
                                  failure="oom_killed", extra={"exit_code": result.exit_code})
            state = WorldState(text=self._format(result, timeout),
                               extra={"exit_code": result.exit_code, "command_seconds": round(result.duration_s, 3)})
            if self.reward_mode is RewardMode.DENSE and self._workspace.sources_changed():
                report = self._workspace.grade()
                self._phi = state.progress = report.reward(self.reward_kind, self.regression_penalty)
                state.components = report.components(self.regression_penalty)
            return state
        except SandboxError as error:
            message = escape_controls(str(error))  # it may quote what the sandbox printed
            logger.warning("sandbox failure on %s: %s", self._instance.instance_id, message)
            return WorldState(text=f"[turngym] The sandbox failed ({message}); the episode was truncated.",
                              failure="sandbox_error")

    def _close_world(self) -> None:
        self._teardown()

    # ----------------------------------------------------------------- the end of an episode
    def _finish(self, state: WorldState, truncation: str | None) -> WorldState:
        """Grade the episode (if submit has not already) and tear the sandbox down.

        The episode's outcome is the reward R(final) of :mod:`turngym.envs.swe.grading`; the base
        class pays it as r_T = R(final) (sparse) or R(final) - φ_{T-1} (dense, so rewards sum to it).
        """
        try:
            report = self._final or self._grade_final()
        except SandboxError as error:  # the sandbox died: the episode ends with nothing to grade
            logger.warning("could not grade %s: %s", self._instance.instance_id, escape_controls(str(error)))
            report = None
        finally:
            self._teardown()
        if report is None:
            state.outcome = self._phi
            return state
        state.outcome = self._phi = report.reward(self.reward_kind, self.regression_penalty)
        state.components = {**state.components, **report.components(self.regression_penalty)}
        state.extra = {**state.extra, "resolved": report.resolved,
                       "pass_ratio": report.pass_ratio(self.regression_penalty), "tests": dict(report.statuses),
                       "grading_error": report.error, "grading_tampered": report.tampered, "patch": self._patch,
                       "patch_truncated": report.patch_truncated}
        if truncation is not None:
            state.text += f"\n[turngym] Episode over ({truncation}); graded: {report.summary()}."
        return state

    def _grade_final(self) -> GradeReport:
        self._final = self._workspace.grade()
        self._patch = escape_controls(self._final.patch)  # the grader bounds it (MAX_PATCH_BYTES)
        return self._final

    def _remember(self, action: str | None, observation: str) -> None:
        super()._remember(escape_controls(action) if action is not None else None, observation)

    # ----------------------------------------------------------------- helpers
    def _wall_clock(self, text: str) -> WorldState:
        return WorldState(text=f"{text}\n[turngym] The episode's wall-clock limit ({self.wall_clock_limit:g} s) "
                               "was reached; the episode was truncated.", failure="wall_clock")

    def _format(self, result: ExecResult, timeout: float) -> str:
        """``<returncode>`` and ``<output>`` (mini-swe-agent's layout), the output cut to fit."""
        killed = result.describe_kill(timeout, self.limits)
        code = "killed" if result.exit_code is None else str(result.exit_code)
        note = f"[turngym] {killed}.\n" if killed else ""
        output = truncate_text(escape_controls(result.output), max(self.max_observation_chars - len(note) - 64, 200))
        if output and not output.endswith("\n"):
            output += "\n"
        return f"{note}<returncode>{code}</returncode>\n<output>\n{output}</output>"

    def _teardown(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
        self._sandbox, self._workspace = None, None
