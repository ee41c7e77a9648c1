"""The support desk's tasks: a customer's orders, the customer's private goal, and the records that meet it.

A task is drawn from its seed: 2 to 4 orders of one customer (distinct items, each processing, shipped or
delivered) and one goal about one of them:

* ``address``: ship a processing order to a new address (the customer knows the address; the order by its number
  or only by its item);
* ``cancel``: cancel an order that is processing or shipped. The customer's private condition decides what happens
  to a shipped one (``if_shipped``: ``"cancel"`` it anyway, or ``"keep"`` it), and the customer tells it only when
  asked whether it may have shipped.

The verdict is a comparison of records: the order table at the end against :func:`target_orders` (the goal applied
to the orders the task started with), both computed from the task, never from the conversation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from turngym.envs.tasks import Task, TaskSet

WORLD = "support"
VERSION = "1"
SPLIT_SEEDS = {"train": 0, "eval": 10_000, "test": 20_000}  # disjoint seed ranges, one per split
STATUSES = ("processing", "shipped", "delivered")

FIRST_NAMES = ("Ana", "Ben", "Chloe", "Dev", "Emma", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kira", "Liam")
LAST_NAMES = ("Lima", "Okafor", "Novak", "Patel", "Rossi", "Schmidt", "Tanaka", "Weber", "Young", "Zhou")
ITEMS = ("desk lamp", "blue kettle", "yoga mat", "wool scarf", "coffee grinder", "phone case", "road bike helmet",
         "cast iron pan", "reading chair", "garden hose", "wall clock", "rain jacket")
STREETS = ("Oak Street", "Elm Road", "Mill Lane", "High Street", "Park Avenue", "Church Road", "Station Road",
           "Bridge Street", "Victoria Road", "King Street")
CITIES = ("Leeds", "York", "Bristol", "Cardiff", "Norwich", "Exeter", "Bath", "Oxford", "Durham", "Chester")

# What the agent reads first: its job, its commands and the store's rules.
DESK = ("You are the support agent of an online store, chatting with a customer who is logged in.\n"
        "Commands: say <message> (to the customer) | orders | lookup <order id> | "
        "update_address <order id> <new address> | cancel <order id> | done (close the chat).\n"
        "Store rules: an address can change only while the order is processing; a delivered order cannot be "
        "cancelled. Do what the customer wants, no more; ask when you are unsure.")

RUBRIC = ("10: the agent asked for what it needed, did exactly what the customer wanted and told them so, "
          "politely. 5: the request was handled but the agent guessed, overstepped or never confirmed. "
          "0: the agent did the wrong thing, nothing, or was rude.")


@dataclass(frozen=True)
class UserGoal:
    """A customer's private goal (see the module docstring). ``address`` is the new address (``address`` goals);
    ``if_shipped`` what to do with a shipped order (``cancel`` goals); ``knows_id``: the customer can give the
    order's number (else only its item)."""

    kind: str
    customer: str
    order: str
    item: str
    opening: str
    knows_id: bool
    address: str | None = None
    if_shipped: str | None = None

    @classmethod
    def of(cls, payload: Mapping[str, Any]) -> UserGoal:
        return cls(**dict(payload["goal"]))

    def describe(self) -> str:
        """The goal in words, for a model playing the customer."""
        which = f"order {self.order} (the {self.item})" if self.knows_id else f"the order with the {self.item}"
        if self.kind == "address":
            return f"You want {which} delivered to {self.address} instead of the address on the order."
        condition = ("cancel it even if it has already shipped" if self.if_shipped == "cancel"
                     else "cancel it only if it has not shipped yet; if it has, keep it")
        return f"You want to cancel {which}: {condition}."


def target_orders(orders: Mapping[str, Mapping[str, str]], goal: UserGoal) -> dict[str, dict[str, str]]:
    """The order table that meets ``goal``, starting from ``orders``."""
    target = {order_id: dict(order) for order_id, order in orders.items()}
    order = target[goal.order]
    if goal.kind == "address":
        order["address"] = str(goal.address)
    elif order["status"] == "processing" or (order["status"] == "shipped" and goal.if_shipped == "cancel"):
        order["status"] = "cancelled"
    return target


def changes(before: Mapping[str, Mapping[str, str]], after: Mapping[str, Mapping[str, str]]) -> list[dict[str, str]]:
    """Every field that differs between two order tables: ``{"order", "field", "before", "after"}``, sorted."""
    return [{"order": order_id, "field": name, "before": before[order_id][name], "after": value}
            for order_id in sorted(after) for name, value in sorted(after[order_id].items())
            if before[order_id][name] != value]


def goal_progress(initial: Mapping[str, Mapping[str, str]], now: Mapping[str, Mapping[str, str]],
             target: Mapping[str, Mapping[str, str]]) -> float:
    """phi = (fields set as the goal wants - fields set wrongly) / max(1, fields the goal changes), at most 1."""
    needed = {(c["order"], c["field"]) for c in changes(initial, target)}
    made = {(c["order"], c["field"]) for c in changes(initial, now)}
    right = sum(now[o][f] == target[o][f] for o, f in needed)
    wrong = sum(now[o][f] != target[o][f] for o, f in made)  # a needed field left alone is only not done yet
    return min(1.0, (right - wrong) / max(1, len(needed)))


def describe_order(order_id: str, order: Mapping[str, str]) -> str:
    return f"{order_id}: {order['item']}, {order['status']}, ships to {order['address']}"


def walkthrough(payload: Mapping[str, Any]) -> list[str]:
    """An expert's commands for the task: ask what is needed, look it up, act, close."""
    goal, orders = UserGoal.of(payload), payload["orders"]
    commands = [ASK_ORDER] + ([] if goal.knows_id else ["orders"])
    if goal.kind == "address":
        return [*commands, ASK_ADDRESS, f"update_address {goal.order} {goal.address}", "done"]
    commands.append(f"lookup {goal.order}")
    shipped = orders[goal.order]["status"] == "shipped"
    if shipped:
        commands.append(ASK_SHIPPED)
    if not shipped or goal.if_shipped == "cancel":
        commands.append(f"cancel {goal.order}")
    return [*commands, "done"]


# The questions an expert asks (and the admissible ``say`` commands): each carries the rule customer's cue words.
ASK_ORDER = "say Which order is it? Please give me the order number or the item."
ASK_ADDRESS = "say What is the new delivery address?"
ASK_SHIPPED = "say Your order has already shipped. Should I still cancel it?"
QUESTIONS = (ASK_ORDER, ASK_ADDRESS, ASK_SHIPPED)


# ---------------------------------------------------------------------- drawing tasks
def _address(rng: np.random.Generator) -> str:
    street, city = STREETS[int(rng.integers(len(STREETS)))], CITIES[int(rng.integers(len(CITIES)))]
    return f"{int(rng.integers(1, 200))} {street}, {city}"


def _orders(rng: np.random.Generator, count: int, home: str) -> dict[str, dict[str, str]]:
    ids: set[str] = set()
    while len(ids) < count:
        ids.add(f"W{int(rng.integers(10_000, 100_000))}")
    items = rng.choice(len(ITEMS), size=count, replace=False)
    return {order_id: {"item": ITEMS[int(item)], "status": STATUSES[int(rng.integers(len(STATUSES)))],
                       "address": home}
            for order_id, item in zip(sorted(ids), items, strict=True)}


def _goal(rng: np.random.Generator, customer: str, orders: dict[str, dict[str, str]], home: str) -> UserGoal:
    kind = "address" if rng.random() < 0.5 else "cancel"
    wanted = "processing" if kind == "address" else ("processing", "shipped")[int(rng.integers(2))]
    order_id = sorted(orders)[int(rng.integers(len(orders)))]
    orders[order_id]["status"] = wanted  # the goal's order has the status the goal needs
    knows_id = bool(rng.random() < 0.5)
    item = orders[order_id]["item"]
    if kind == "address":
        address = home
        while address == home:
            address = _address(rng)
        return UserGoal("address", customer, order_id, item, "Hi, I need to change the delivery address of one of "
                        "my orders.", knows_id, address=address)
    if_shipped = ("keep", "cancel")[int(rng.integers(2))]
    return UserGoal("cancel", customer, order_id, item, "Hello, I would like to cancel an order.", knows_id,
                    if_shipped=if_shipped)


def draw_task(split: str, seed: int) -> Task:
    """The task of ``seed`` in ``split`` (see the module docstring)."""
    rng = np.random.default_rng([SPLIT_SEEDS[split], seed])
    customer = f"{FIRST_NAMES[int(rng.integers(len(FIRST_NAMES)))]} {LAST_NAMES[int(rng.integers(len(LAST_NAMES)))]}"
    home = _address(rng)
    orders = _orders(rng, int(rng.integers(2, 5)), home)
    goal = _goal(rng, customer, orders, home)
    status = orders[goal.order]["status"]
    difficulty = goal.kind if goal.kind == "address" else f"cancel-{'shipped' if status == 'shipped' else 'open'}"
    payload = {"orders": orders, "goal": goal.__dict__.copy(),
               "rubric": {"criteria": RUBRIC, "reference": f"The customer's goal: {goal.describe()}"}}
    return Task(world=WORLD, id=f"{WORLD}/{split}/{seed}", split=split, difficulty=difficulty, payload=payload)


def support_tasks(split: str = "train", n: int = 64) -> TaskSet:
    """The first ``n`` tasks of ``split`` (``train``, ``eval`` or ``test``; each its own seed range)."""
    if split not in SPLIT_SEEDS:
        raise ValueError(f"split must be one of {sorted(SPLIT_SEEDS)}, got {split!r}")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return TaskSet(name=f"{WORLD}/{split}", version=VERSION, tasks=tuple(draw_task(split, s) for s in range(n)))
