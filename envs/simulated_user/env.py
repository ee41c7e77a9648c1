"""``turngym/SupportDesk-v0``: the agent serves a simulated customer and changes the store's records.

Each turn the agent gives one command: ``say <message>`` (the customer answers: its reply is the observation, so
its tokens are world tokens, masked out of the loss), ``orders``, ``lookup <id>``, ``update_address <id>
<address>``, ``cancel <id>`` or ``done``. ``done`` closes the chat and grades it: won when the order table equals
the goal's target (:func:`~turngym.envs.simulated_user.tasks.target_orders`), lost otherwise; a chat cut by the turn
limit scores 0. The last step's ``info["changes"]`` lists the fields the agent changed, exactly what was graded.

Dense rewards follow :func:`~turngym.envs.simulated_user.tasks.goal_progress` (fields set right minus fields set
wrongly). A judge's view of the conversation can be added beside the records with
``JudgedEnv(SupportDeskEnv(...), judge, mode="component")``: each task carries a rubric.
"""

from __future__ import annotations

from typing import Any

from turngym.envs.core import TextEnv, WorldState
from turngym.envs.simulated_user.tasks import (
    DESK,
    QUESTIONS,
    UserGoal,
    changes,
    describe_order,
    goal_progress,
    support_tasks,
    target_orders,
    walkthrough,
)
from turngym.envs.simulated_user.users import ModelUser, RuleUser, UserSimulator, UserSimulatorError
from turngym.envs.tasks import Task, stable_seed

# verb -> (fewest, most) words after it (None: any number), and how it is written
ARITY: dict[str, tuple[int, int | None]] = {"say": (1, None), "orders": (0, 0), "lookup": (1, 1), "cancel": (1, 1),
                                            "update_address": (2, None), "done": (0, 0)}
USAGE = {"say": "say <message>", "orders": "orders", "lookup": "lookup <order id>", "cancel": "cancel <order id>",
         "update_address": "update_address <order id> <new address>", "done": "done"}


class SupportDeskEnv(TextEnv):
    """See the module docstring.

    Args:
        user: the customer: a :class:`~turngym.envs.simulated_user.users.UserSimulator`, or ``"rule"`` (the
            default, :class:`RuleUser`).
        split, num_tasks: the default ``tasks`` (:func:`support_tasks`), when none are given.
    """

    world_name = "support"
    action_hint = ("Reply with one command: say <message>, orders, lookup <order id>, "
                   "update_address <order id> <new address>, cancel <order id>, or done.")

    def __init__(self, *, user: UserSimulator | str = "rule", split: str = "train", num_tasks: int = 64,
                 **kwargs: Any) -> None:
        kwargs.setdefault("tasks", support_tasks(split, num_tasks))
        super().__init__(**kwargs)
        self.user = _user(user)
        self._reset_seed: int | None = None
        self._episode_seed = 0
        self._goal: UserGoal | None = None
        self._initial: dict[str, dict[str, str]] = {}
        self._orders: dict[str, dict[str, str]] = {}
        self._target: dict[str, dict[str, str]] = {}
        self._conversation: list[tuple[str, str]] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._reset_seed = seed
        return super().reset(seed=seed, options=options)

    @property
    def conversation(self) -> list[tuple[str, str]]:
        """The chat so far: ``(speaker, text)`` pairs, the customer's opening first."""
        return list(self._conversation)

    # ------------------------------------------------------------------ the world's hooks
    def _start(self, task: Task | None) -> WorldState:
        if task is None:
            raise ValueError("SupportDeskEnv needs a task: give it tasks=support_tasks(...) or options={'task': ...}")
        base = self._reset_seed if self._reset_seed is not None else int(self.np_random.integers(2**62))
        self._episode_seed = stable_seed(base, task.id)  # the customer's randomness: same seed, same episode
        self._goal = UserGoal.of(task.payload)
        self._initial = {k: dict(v) for k, v in task.payload["orders"].items()}
        self._orders = {k: dict(v) for k, v in self._initial.items()}
        self._target = target_orders(self._initial, self._goal)
        self._conversation = [("customer", self._goal.opening)]
        steps = walkthrough(task.payload)
        text = f"{DESK}\n\nCustomer ({self._goal.customer}): {self._goal.opening}"
        return self._world(text, progress=0.0, optimal_length=len(steps),
                           extra={"walkthrough": steps, "user": self.user.name})

    def _validate_command(self, command: str) -> str | None:
        verb, *words = command.split()
        if verb.lower() not in ARITY:
            return f"unknown command {verb[:40]!r}"
        fewest, most = ARITY[verb.lower()]
        if len(words) < fewest or (most is not None and len(words) > most):
            return f"write it as: {USAGE[verb.lower()]}"
        return None

    def _execute(self, command: str) -> WorldState:
        verb, _, rest = command.strip().partition(" ")
        verb, rest = verb.lower(), rest.strip()
        if verb == "say":
            return self._say(rest)
        if verb == "orders":
            return self._world("\n".join(describe_order(k, v) for k, v in sorted(self._orders.items())))
        if verb == "done":
            return self._close()
        order_id, _, address = rest.partition(" ")
        order = self._orders.get(order_id.upper())
        if order is None:
            return self._world(f"There is no order {order_id[:40]} for this customer.")
        if verb == "lookup":
            return self._world(describe_order(order_id.upper(), order))
        if verb == "cancel":
            return self._cancel(order_id.upper(), order)
        return self._update_address(order_id.upper(), order, address.strip())

    # ------------------------------------------------------------------ commands
    def _say(self, message: str) -> WorldState:
        self._conversation.append(("agent", message))
        seed = stable_seed(self._episode_seed, "customer", len(self._conversation))
        try:
            reply = self.user.reply(self._goal, tuple(self._conversation), seed)
        except UserSimulatorError as error:
            return WorldState(text=f"The customer did not answer ({error}).", failure=str(error))
        self._conversation.append(("customer", reply))
        return self._world(f"Customer: {reply}")

    def _cancel(self, order_id: str, order: dict[str, str]) -> WorldState:
        if order["status"] in ("delivered", "cancelled"):
            return self._world(f"Order {order_id} is {order['status']}; it cannot be cancelled.")
        order["status"] = "cancelled"
        return self._world(f"Order {order_id} is cancelled.")

    def _update_address(self, order_id: str, order: dict[str, str], address: str) -> WorldState:
        if order["status"] != "processing":
            return self._world(f"Order {order_id} is {order['status']}; its address can no longer change.")
        order["address"] = address
        return self._world(f"Order {order_id} will ship to {address}.")

    def _close(self) -> WorldState:
        won = self._orders == self._target
        return self._world("The chat is closed.", won=won, lost=not won, extra={"changes": self._changes()})

    def _finish(self, state: WorldState, truncation: str | None) -> WorldState:
        state.extra.setdefault("changes", self._changes())
        return state

    # ------------------------------------------------------------------ parts
    def _changes(self) -> list[dict[str, str]]:
        return changes(self._initial, self._orders)

    def _world(self, text: str, *, progress: float | None = None, won: bool = False, lost: bool = False,
               optimal_length: int | None = None, extra: dict[str, Any] | None = None) -> WorldState:
        phi = progress if progress is not None else goal_progress(self._initial, self._orders, self._target)
        return WorldState(text=text, progress=phi, won=won, lost=lost, invalid=False,
                          admissible_commands=self._admissible(), optimal_length=optimal_length, extra=extra or {})

    def _admissible(self) -> list[str]:
        """The expert's questions, the lookups and changes on every order (an address change to each address the
        customer has written), and done. Other commands stay valid in free form."""
        heard = " ".join(text for speaker, text in self._conversation if speaker == "customer")
        addresses = [self._goal.address] if self._goal and self._goal.address and self._goal.address in heard else []
        commands = [*QUESTIONS, "orders"]
        for order_id in sorted(self._orders):
            commands += [f"lookup {order_id}", f"cancel {order_id}"]
            commands += [f"update_address {order_id} {address}" for address in addresses]
        return [*commands, "done"]


def _user(user: UserSimulator | str | None) -> UserSimulator:
    if user is None or user == "rule":
        return RuleUser()
    if isinstance(user, str):
        raise ValueError(  # noqa: TRY004 - a str is the right type, the wrong value
            f"user must be 'rule' or a UserSimulator (e.g. ModelUser(model)), got {user!r}")
    if not callable(getattr(user, "reply", None)):
        raise TypeError(f"user must have reply(goal, conversation, seed) -> str; got {type(user).__name__}")
    return user


__all__ = ["ModelUser", "RuleUser", "SupportDeskEnv"]
