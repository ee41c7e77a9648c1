"""The outcome files behind published tables (``docs/outcomes/``, a study's ``outcomes.json``), read and checked
for ``turngym stats``.

Four shapes are read; everything else is refused in one line that names the file, what is wrong and where:

* a study's outcomes (``outcomes.json``, :func:`~turngym.recipes.study.outcome_record`):
  ``{"arms": {ARM: {"outcomes": {SEED: {PANEL: {TASK: success}}}, "demos": n, "episodes": n, "null": bool}}}``;
* per-game records of single-seed evaluations:
  ``{"arms": {ARM: {"games": {TASK: {"won": bool, ...}}}}}`` (one seed, panel ``held_out``);
* runs of sampled arms: ``{"runs": [{"run": NAME, "arms": {ARM: {TASK: [0 or 1 per sample]}}}]}`` (a task's
  success is the mean over its samples; one seed, panel ``held_out``; an arm is ``NAME: ARM``);
* per-seed rates, when the per-game outcomes were not kept:
  ``{"seeds": [SEED, ...], "studies": {STUDY: {ARM: [percent per seed]}}}``.

The first three become a study's outcome record (:func:`read_outcomes`) and get its table, intervals over seeds
and tasks; per-seed rates get the t interval over seeds (:func:`rates_markdown`). A success is a finite number in
[0, 1] (a rate, in [0, 100]); ``demos`` and ``episodes`` are counts (0 when absent), ``null`` a bool (false).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

DEFAULT_PANEL = "held_out"  # the panel of shapes that have none, and ``turngym stats``' default
FORMATS = ('a study\'s outcomes.json {"arms": {ARM: {"outcomes": {SEED: {PANEL: {TASK: success in [0, 1]}}}}}}, '
           'per-game records {"arms": {ARM: {"games": {TASK: {"won": bool}}}}}, runs of sampled arms '
           '{"runs": [{"run": NAME, "arms": {ARM: {TASK: [0 or 1, ...]}}}]} or per-seed rates '
           '{"seeds": [SEED, ...], "studies": {STUDY: {ARM: [percent per seed]}}}')
RATES_NOTE = ("Intervals: Student's t over the seed means (the per-game outcomes were not kept, so the seeds x tasks "
              "interval cannot be computed).")


class OutcomeFileError(ValueError):
    """An outcome file turngym cannot read: the message names the file, what is wrong and where."""


def read_outcomes(path: str | Path) -> dict[str, Any]:
    """The checked content of an outcome file: ``{"kind": "record", "record": ...}`` (a study's outcome record,
    whatever shape it was written in) or ``{"kind": "rates", "seeds": [...], "studies": {...}}``."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise OutcomeFileError(f"{path}: cannot be read ({error.strerror or error})") from None
    if not data.strip():
        raise OutcomeFileError(f"{path}: the file is empty; expected {FORMATS}")
    try:
        value = json.loads(data)
    except RecursionError:
        raise OutcomeFileError(f"{path}: JSON nested too deeply to read") from None
    except ValueError as error:  # not JSON, not UTF-8, or a number past Python's digit limit
        raise OutcomeFileError(f"{path}: not JSON ({str(error)[:100]})") from None
    where = _Where(path)
    if isinstance(value, Mapping) and "studies" in value:
        return {"kind": "rates", **_rates(value, where)}
    if isinstance(value, Mapping) and "runs" in value:
        return {"kind": "record", "record": _runs(value, where)}
    if isinstance(value, Mapping) and "arms" in value:
        return {"kind": "record", "record": _arms(value, where)}
    raise OutcomeFileError(f"{path}: not a table of outcomes (a JSON {_kind(value)} without \"arms\", \"runs\" or "
                           f"\"studies\"); turngym stats reads {FORMATS}")


def merge_records(records: Sequence[tuple[str | Path, Mapping[str, Any]]],
                  keep_first: Collection[str] = ()) -> dict[str, Any]:
    """One outcome record from several runs of the same study (``(path, record)`` pairs in order), such as the
    seeds of one study run on different machines into separate results folders. Refused in one line, naming the
    files: different study names, a panel with two fingerprints (not the same games), an arm of two kinds (demos,
    episodes or null), or a (arm, seed, panel) cell that two files hold with different outcomes. A cell two files
    hold alike is kept once, so rerunning a finished arm and seed is a check that it reproduces.

    ``keep_first`` names arms whose cells may differ between files: the earliest file's cell is kept and the later
    ones are left out (a warm start re-made on another machine, re-evaluated as a check, whose committed cell stays
    the study's). :func:`cell_agreement` reports what differed."""
    if not records:
        raise OutcomeFileError("no outcome files to merge")
    first_path, first = records[0]
    unknown = sorted(set(keep_first) - {label for _, record in records for label in record["arms"]})
    if unknown:
        raise OutcomeFileError(f"--keep-first names arms no file holds: {_listed(unknown)}")
    merged: dict[str, Any] = {"name": first.get("name"), "panels": dict(first.get("panels") or {}), "arms": {}}
    for path, record in records:
        if record.get("name") != merged["name"]:
            raise OutcomeFileError(f"{path}: study {record.get('name')!r}, not {merged['name']!r} as in "
                                   f"{first_path}; only runs of one study merge")
        for panel, fingerprint in (record.get("panels") or {}).items():
            known = merged["panels"].setdefault(panel, fingerprint)
            if known != fingerprint:
                raise OutcomeFileError(f"{path}: panel {panel!r} has fingerprint {fingerprint}, not {known} as in "
                                       "an earlier file: they are not the same games")
        for label, arm in record["arms"].items():
            kind = {key: arm[key] for key in ("demos", "episodes", "null")}
            into = merged["arms"].setdefault(label, {**kind, "outcomes": {}})
            if {key: into[key] for key in kind} != kind:
                raise OutcomeFileError(f"{path}: arm {label!r} is {kind}, not "
                                       f"{ {key: into[key] for key in kind} } as in an earlier file")
            for seed, panels in arm["outcomes"].items():
                cells = into["outcomes"].setdefault(seed, {})
                for panel, tasks in panels.items():
                    if tasks:  # the earliest file holding a cell keeps it
                        cells.setdefault(panel, dict(tasks))
    for row in cell_agreement(records):
        if row["differing"] and row["arm"] not in keep_first:
            raise OutcomeFileError(f"{row['file']}: arm {row['arm']!r}, seed {row['seed']}, panel {row['panel']!r} "
                                   f"differs from {row['first']} on {len(row['differing'])} of {row['games']} tasks")
    return merged


def cell_agreement(records: Sequence[tuple[str | Path, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Every (arm, seed, panel) cell that more than one file holds, compared game by game with the earliest file
    that holds it: ``{"arm", "seed", "panel", "first", "file", "games", "first_wins", "wins", "differing"}``,
    ``differing`` the sorted task ids whose outcomes differ (a task only one of the two holds counts). A rerun that
    reproduces has ``differing == []``. Wins are the sums of the cells' successes."""
    first_holder: dict[tuple[str, str, str], tuple[str | Path, Mapping[str, Any]]] = {}
    rows = []
    for path, record in records:
        for label, arm in record["arms"].items():
            for seed, panels in arm["outcomes"].items():
                for panel, tasks in panels.items():
                    if not tasks:
                        continue
                    earlier = first_holder.setdefault((label, seed, panel), (path, tasks))
                    if earlier[0] is path:
                        continue
                    first_path, first_tasks = earlier
                    games = set(first_tasks) | set(tasks)
                    rows.append({"arm": label, "seed": seed, "panel": panel, "first": str(first_path),
                                 "file": str(path), "games": len(games), "first_wins": sum(first_tasks.values()),
                                 "wins": sum(tasks.values()),
                                 "differing": sorted(g for g in games if first_tasks.get(g) != tasks.get(g))})
    return rows


def agreement_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """:func:`cell_agreement`'s rows as a table: which cells reruns reproduced game by game, and which they did not."""
    if not rows:
        return ""
    lines = ["Cells held by more than one file (the first file's is used):", "",
             "| arm | seed | panel | first file | wins | rerun file | wins | games differing |",
             "|---|---|---|---|---:|---|---:|---|"]
    for row in rows:
        shown = ", ".join(row["differing"][:5]) + (" ..." if len(row["differing"]) > 5 else "")
        differing = f"{len(row['differing'])} of {row['games']}" + (f" ({shown})" if shown else " (reproduced)")
        lines.append(f"| {row['arm']} | {row['seed']} | {row['panel']} | {row['first']} | {row['first_wins']:g} | "
                     f"{row['file']} | {row['wins']:g} | {differing} |")
    return "\n".join(lines) + "\n"


def panels_of(record: Mapping[str, Any]) -> list[str]:
    """Every panel some arm of ``record`` has outcomes on, sorted."""
    return sorted({panel for arm in record["arms"].values() for panels in arm["outcomes"].values()
                   for panel in panels})


def check_choice(path: str | Path, record: Mapping[str, Any], reference: str | None, panel: str) -> None:
    """Refuse a ``--reference`` the record has no arm for, or a ``--panel`` it has no outcomes on (or an arm
    that has none there: its row would read 0 %)."""
    arms = record["arms"]
    if reference is not None and reference not in arms:
        raise OutcomeFileError(f"{path}: no arm {reference!r} for --reference; the arms are {_listed(arms)}")
    known = panels_of(record)
    if panel not in known:
        raise OutcomeFileError(f"{path}: no panel {panel!r}; the panels are {_listed(known)}")
    for label, arm in arms.items():
        if not any(panels.get(panel) for panels in arm["outcomes"].values()):
            raise OutcomeFileError(f"{path}: arm {label!r} has no outcomes on panel {panel!r}")


def rates_markdown(path: str | Path, rates: Mapping[str, Any], reference: str | None = None) -> str:
    """Per-seed rates as one table per study: each arm's rate per seed and its mean with the t interval over
    seeds, and the same for its difference to ``reference`` (default: ``sft-only`` where a study has it, else
    its first arm)."""
    from turngym.agents.intervals import seed_t_interval

    seeds = rates["seeds"]
    lines: list[str] = []
    for study, arms in rates["studies"].items():
        if reference is not None and reference not in arms:
            raise OutcomeFileError(f"{path}: study {study!r} has no arm {reference!r} for --reference; its arms "
                                   f"are {_listed(arms)}")
        ref = reference or ("sft-only" if "sft-only" in arms else next(iter(arms)))
        head = (f"| policy | per seed {', '.join(map(str, seeds))} (%) | success (95 % CI, t over seeds) "
                f"| vs {ref} per seed | vs {ref} (95 % CI, t over seeds) |")
        lines += [f"### {study}", "", head, "|---|---|---|---|---|"]
        for label, values in arms.items():
            diffs = [a - b for a, b in zip(values, arms[ref], strict=True)]
            vs = ("(reference)", "") if label == ref else (
                " / ".join(_points(d) for d in diffs), _interval(seed_t_interval([d / 100 for d in diffs]), True))
            lines.append(f"| {label} | {' / '.join(_points(v, False) for v in values)} | "
                         f"{_interval(seed_t_interval([v / 100 for v in values]), False)} | {vs[0]} | {vs[1]} |")
        lines.append("")
    return "\n".join([*lines, RATES_NOTE]) + "\n"


# ---------------------------------------------------------------------- the shapes
class _Where:
    """Builds the one-line errors of one file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, where: str, what: str) -> OutcomeFileError:
        return OutcomeFileError(f"{self.path}: {where} {what}")

    def mapping(self, value: Any, where: str, *, empty_ok: bool = False) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.error(where, f"is a JSON {_kind(value)}, not an object")
        if not value and not empty_ok:
            raise self.error(where, "is empty")
        return value

    def listing(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.error(where, f"is a JSON {_kind(value)}, not a list")
        if not value:
            raise self.error(where, "is empty")
        return value

    def success(self, value: Any, where: str, *, top: float = 1.0, bool_ok: bool = False) -> float:
        """A finite number in [0, top]."""
        if isinstance(value, bool) and not bool_ok or not isinstance(value, (int, float)):
            raise self.error(where, f"is {_glimpse(value)}, not a number in [0, {top:g}]")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(where, f"is {_glimpse(value)}, not a finite number")
        if not 0 <= value <= top:  # an int is compared exactly, however long
            raise self.error(where, f"is {_glimpse(value)}, outside [0, {top:g}]")
        return float(value)

    def count(self, value: Any, where: str) -> int:
        if value is None:
            return 0
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.error(where, f"is {_glimpse(value)}, not a count")
        return value


def _arms(value: Mapping[str, Any], where: _Where) -> dict[str, Any]:
    """A study's outcome record, or per-game records of single-seed evaluations, as an outcome record."""
    arms: dict[str, Any] = {}
    for label, arm in where.mapping(value["arms"], '"arms"').items():
        at = f"arm {label!r}"
        arm = where.mapping(arm, at)
        if "outcomes" in arm:
            outcomes = {}
            for seed, panels in where.mapping(arm["outcomes"], f"{at}'s outcomes").items():
                outcomes[seed] = {
                    panel: {task: where.success(cell, f"{at}, seed {seed}, panel {panel!r}, task {task!r}")
                            for task, cell in where.mapping(tasks, f"{at}, seed {seed}, panel {panel!r}",
                                                            empty_ok=True).items()}
                    for panel, tasks in where.mapping(panels, f"{at}, seed {seed}", empty_ok=True).items()}
        elif "games" in arm:
            games = where.mapping(arm["games"], f"{at}'s games")
            outcomes = {"0": {DEFAULT_PANEL: {
                task: where.success(where.mapping(game, f"{at}, game {task!r}").get("won"),
                                    f"{at}, game {task!r}: won", bool_ok=True)
                for task, game in games.items()}}}
        else:
            raise where.error(at, 'has neither "outcomes" (a study\'s) nor "games" (per-game records)')
        null = arm.get("null", False)
        if not isinstance(null, bool):
            raise where.error(f"{at}'s null", f"is {_glimpse(null)}, not true or false")
        arms[label] = {"demos": where.count(arm.get("demos"), f"{at}'s demos"),
                       "episodes": where.count(arm.get("episodes"), f"{at}'s episodes"),
                       "null": null, "outcomes": outcomes}
    return {"name": value.get("name"), "panels": value.get("panels") or {}, "arms": arms}


def _runs(value: Mapping[str, Any], where: _Where) -> dict[str, Any]:
    """Runs of sampled arms as one outcome record: arm ``RUN: ARM``, a task's success the mean of its samples."""
    arms: dict[str, Any] = {}
    for index, run in enumerate(where.listing(value["runs"], '"runs"')):
        run = where.mapping(run, f"run {index}")
        name = run.get("run", str(index))
        if not isinstance(name, str) or not name:
            raise where.error(f"run {index}'s name", f"is {_glimpse(name)}, not a name")
        for label, tasks in where.mapping(run.get("arms"), f"run {name!r}'s arms").items():
            at = f"run {name!r}, arm {label!r}"
            grid = {}
            for task, samples in where.mapping(tasks, at).items():
                won = [where.success(s, f"{at}, task {task!r}: a sample", bool_ok=True)
                       for s in where.listing(samples, f"{at}, task {task!r}")]
                grid[task] = sum(won) / len(won)
            arms[f"{name}: {label}"] = {"demos": 0, "episodes": 0, "null": False,
                                        "outcomes": {"0": {DEFAULT_PANEL: grid}}}
    return {"name": value.get("source"), "panels": {}, "arms": arms}


def _rates(value: Mapping[str, Any], where: _Where) -> dict[str, Any]:
    seeds = where.listing(value.get("seeds"), '"seeds"')
    studies: dict[str, Any] = {}
    for study, arms in where.mapping(value["studies"], '"studies"').items():
        checked = {}
        for label, rates in where.mapping(arms, f"study {study!r}").items():
            at = f"study {study!r}, arm {label!r}"
            rates = where.listing(rates, at)
            if len(rates) != len(seeds):
                raise where.error(at, f"has {len(rates)} rates for {len(seeds)} seeds")
            checked[label] = [where.success(r, f"{at}, seed {s}: the rate", top=100.0) for s, r in zip(seeds, rates)]
        studies[study] = checked
    return {"seeds": seeds, "studies": studies}


# ---------------------------------------------------------------------- text
def _kind(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number" if isinstance(value, (int, float)) else type(value).__name__)


def _glimpse(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"an integer of {len(str(abs(value)))} digits"
    text = json.dumps(value) if isinstance(value, (str, bool, type(None))) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _listed(names: Any) -> str:
    names = list(names)
    return ", ".join(repr(n) for n in names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")


def _points(value: float, signed: bool = True) -> str:
    """A rate in percent as the published tables print it: +10 (whole) or +4.5."""
    sign = "+" if signed else ""
    return f"{value:{sign}.0f}" if float(value).is_integer() else f"{value:{sign}.1f}"


def _interval(interval: Any, signed: bool) -> str:
    """``+5.7 (-5.5 to +16.9)`` for a difference, ``64.0 % (56.5-71.5)`` for a rate."""
    if interval is None:
        return "one seed: no interval"
    mean, low, high = 100 * interval.mean, 100 * interval.low, 100 * interval.high
    return f"{mean:+.1f} ({low:+.1f} to {high:+.1f})" if signed else f"{mean:.1f} % ({low:.1f}-{high:.1f})"
