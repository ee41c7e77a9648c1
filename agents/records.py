"""What an agent keeps of one episode; the rollout stores it on the trajectory as ``record``.

* :class:`TokenRecord`: an LLM agent's episode as the exact token ids it sampled and was shown,
  the one sequence a trainer trains on (:class:`~turngym.trainers.episodes.Episode` reads it);
* :class:`ChatRecord`: an agent behind a chat API (no token ids): messages, replies, actions.

Text-only agents (baselines) keep nothing: their trajectories carry ``record=None``.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from turngym.agents.generation import Generation


@dataclass
class TurnSample:
    """One turn as a training sample of its own: the exact context the model was given before it sampled
    the turn (``prompt_ids``) and the ids it sampled (``completion_ids``, all trained on)."""

    turn: int
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]


@dataclass
class TokenRecord:
    """One episode as the exact token ids the model saw and sampled, never re-tokenised::

        prompt_ids                      chat template of [system, first observation] + generation prompt
        completion_ids = a_1 e_1 a_2 e_2 ... a_T
            a_t  the ids sampled at turn t, ending with the end-of-turn token   (env_mask 1)
            e_t  the template's delta for observation t                        (env_mask 0)

    With a history window K (``history_window``), the model sampling turn t saw only

        context_t = prompt_ids + (a_{t-K} e_{t-K} ... a_{t-1} e_{t-1})

    (the system prompt, the first observation and the last K turns, the latest observation included):
    :meth:`context_ids` is that sequence, and :meth:`turn_sample` turn t's training sample. Without a
    window, context_t is the whole sequence so far, and the episode trains as one sequence.

    A history that rewrites earlier turns (``LLMAgentConfig.history``: ``strip_thinking``, ``compact``;
    :mod:`turngym.agents.histories`) cannot be sliced from the sequence: ``contexts`` then keeps, per turn, the
    exact ids the model was given, and :attr:`rewritten` says whether any of them is not the sequence before it.
    """

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)  # 1: sampled by the model (trained on); 0: environment
    logprobs: list[float] = field(default_factory=list)  # sampling logprob; 0.0 where env_mask is 0
    turn_index: list[int] = field(default_factory=list)  # the turn (from 0) each completion token belongs to
    turn_ends: list[int] = field(default_factory=list)  # index of each turn's last sampled token
    replies: list[str] = field(default_factory=list)  # decoded model text per turn
    actions: list[str | None] = field(default_factory=list)  # parsed action per turn (None: none found)
    forced_end_of_turn: list[bool] = field(default_factory=list)  # turn hit max_new_tokens
    context_truncated: bool = False
    history_window: int | None = None  # K: each turn saw the prompt and the last K turns only (None: everything)
    contexts: list[list[int]] | None = None  # per turn, the ids it was given (a rewritten history; None: sliced)

    @property
    def num_turns(self) -> int:
        return len(self.replies)

    def turn_start(self, turn: int) -> int:
        """Index in ``completion_ids`` of turn ``turn``'s first token (its first sampled id); the end of the
        sequence for the next turn to be played."""
        return bisect_left(self.turn_index, turn)  # turn_index never decreases

    def context_ids(self, turn: int | None = None) -> list[int]:
        """The ids the model is (was) given before sampling turn ``turn`` (default: the next turn):
        ``prompt_ids`` and every earlier turn's tokens, or only the last ``history_window`` turns', or the
        context kept for it (``contexts``)."""
        turn = self.num_turns if turn is None else turn
        if self.contexts is not None:
            return list(self._kept_context(turn))
        first = max(0, turn - self.history_window) if self.history_window else 0
        return self.prompt_ids + self.completion_ids[self.turn_start(first): self.turn_start(turn)]

    def context_length(self, turn: int | None = None) -> int:
        """``len(self.context_ids(turn))``, without building the list."""
        turn = self.num_turns if turn is None else turn
        if self.contexts is not None:
            return len(self._kept_context(turn))
        first = max(0, turn - self.history_window) if self.history_window else 0
        return len(self.prompt_ids) + self.turn_start(turn) - self.turn_start(first)

    def _kept_context(self, turn: int) -> list[int]:
        if turn >= len(self.contexts):
            raise ValueError(f"turn {turn}'s context is not kept yet: the agent's history makes it "
                             f"({len(self.contexts)} kept)")
        return self.contexts[turn]

    def add_context(self, ids: list[int]) -> None:
        """Keep the ids the next turn is given (a rewritten history); call before :meth:`add_model_turn`."""
        if self.contexts is None:
            self.contexts = []
        if len(self.contexts) != self.num_turns:
            raise ValueError(f"a context for turn {self.num_turns} comes after {len(self.contexts)} kept contexts")
        self.contexts.append(list(ids))

    def turn_ids(self, turn: int) -> list[int]:
        """Turn ``turn``'s whole part of ``completion_ids``: its sampled ids, then the environment's answer."""
        return self.completion_ids[self.turn_start(turn): self.turn_start(turn + 1)]

    @property
    def rewritten(self) -> bool:
        """Some turn was given a context other than the whole sequence before it (a rewritten history: the turns
        then train one by one, each on its own context)."""
        if self.contexts is None:
            return False
        return any(not self._is_whole_prefix(turn, context) for turn, context in enumerate(self.contexts))

    def _is_whole_prefix(self, turn: int, context: list[int]) -> bool:
        start = self.turn_start(turn)
        return (len(context) == len(self.prompt_ids) + start and context[: len(self.prompt_ids)] == self.prompt_ids
                and context[len(self.prompt_ids):] == self.completion_ids[:start])

    def turn_sample(self, turn: int) -> TurnSample:
        """Turn ``turn`` as its own sample: :meth:`context_ids` and the ids sampled at that turn."""
        start, end = self.turn_start(turn), self.turn_ends[turn] + 1
        if not (start < end and all(self.env_mask[start:end])):
            raise ValueError(f"turn {turn}'s tokens {start}..{end - 1} are not all sampled ids: a broken record")
        return TurnSample(turn, self.context_ids(turn), self.completion_ids[start:end], self.logprobs[start:end])

    def __len__(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)

    def all_ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def add_model_turn(self, generation: Generation, end_of_turn_id: int, *, closed: bool | None = None) -> None:
        """Append one turn's sampled ids (``env_mask`` 1) and close it with the end-of-turn token.

        ``closed``: the sampled ids end with the end-of-turn token themselves (default: ``generation.stopped``).
        A turn that stopped on another stop token (the line break after an action) is closed like one that
        hit ``max_new_tokens``, with an end-of-turn token appended as context, but is not counted as forced."""
        turn = self.num_turns
        self.completion_ids += generation.ids
        self.env_mask += [1] * len(generation.ids)
        self.logprobs += generation.logprobs
        self.turn_index += [turn] * len(generation.ids)
        self.turn_ends.append(len(self.completion_ids) - 1)
        if not (generation.stopped if closed is None else closed):  # a token the model did not sample: context
            self._add_env(turn, [end_of_turn_id])
        self.forced_end_of_turn.append(not generation.stopped)

    def add_env_turn(self, ids: list[int]) -> None:
        """Append context the model did not sample (an observation's template delta): ``env_mask`` 0,
        counted in the latest turn."""
        self._add_env(max(self.num_turns - 1, 0), ids)

    def _add_env(self, turn: int, ids: list[int]) -> None:
        self.completion_ids += ids
        self.env_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        self.turn_index += [turn] * len(ids)


@dataclass
class ChatRecord:
    """One episode of a chat-API agent: the messages sent, the raw replies and the parsed actions."""

    messages: list[dict[str, str]] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    actions: list[str | None] = field(default_factory=list)


AgentRecord = TokenRecord | ChatRecord
