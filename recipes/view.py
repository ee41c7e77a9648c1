"""``turngym view``: look at episodes instead of reading JSON, in one static, self-contained HTML page.

    turngym view results/eval                                  every episode file under a folder
    turngym view runs/signals-ppo/episode_samples.jsonl -o ppo.html   the trainer's episodes, with advantages

It reads the files turngym writes:

- ``turngym eval --out DIR``: ``DIR/<agent>.jsonl`` (one trajectory per line) next to ``DIR/<agent>.json``
  (the report, whose success and pass@k head that agent's episodes);
- a study (``turngym compare``/``budget``): ``results/<name>/evals/<policy>/seed<s>-<panel>.jsonl``, and
  ``results/<name>/seed<s>/<policy>/episode_samples.jsonl`` from its RL runs;
- the trainer's ``output_dir/episode_samples.jsonl`` (``TurnGymConfig.episode_samples``): the first episodes
  of every step with each turn's advantage.

Each episode shows its task, outcome (won, lost, truncated with the reason, failed: an infrastructure
failure), return and every turn: the action, the model's raw reply when it differs, the observation, the
turn reward, the advantage (trainer samples) and whether the action was invalid.

The page fetches nothing (inline CSS and JS, no CDN, no font, no image), so it opens offline and can be
mailed. Every string from an episode is HTML-escaped: model output is hostile. Plain JS filters the
episodes by task (substring), outcome and source; the filter lives in the URL (``page.html#outcome=won&task=
signals/eval/3``, or ``?outcome=won``), so a filtered view is a link, and ``window.turngymFilter({...})``
applies one from a script.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUTCOMES = ("won", "lost", "truncated", "failed")
MAX_EPISODES = 2000  # per page; the rest is counted, not shown
MAX_CHARS = 4000  # per text cell; a longer observation is cut with a note


@dataclass
class Source:
    """One file of episodes, and the report that summarises it when there is one."""

    label: str
    path: Path
    episodes: list[dict[str, Any]] = field(default_factory=list)
    report: dict[str, Any] | None = None
    skipped_lines: int = 0


# ---------------------------------------------------------------------- reading
def load_sources(target: str | Path) -> list[Source]:
    """The episode files of ``target``: a ``.jsonl`` file, a ``.json`` report (its ``.jsonl`` trajectories) or
    list of episodes, or a folder searched recursively for episode files."""
    target = Path(target).expanduser()
    if not target.exists():
        raise FileNotFoundError(f"{target} does not exist; give a results folder or an episode file (.jsonl)")
    if target.is_dir():
        files = sorted(p for p in target.rglob("*.jsonl") if p.is_file())
        sources = [s for s in (_read_jsonl(p, _label(p, target)) for p in files) if s.episodes]
        sources += [s for p in sorted(target.rglob("*.json")) if not p.with_suffix(".jsonl").exists()
                    for s in [_read_json_episodes(p, _label(p, target))] if s is not None and s.episodes]
        if not sources:
            raise ValueError(f"{target} holds no episodes: expected turngym's .jsonl files (turngym eval --out, a "
                             "study's evals/, a trainer's episode_samples.jsonl)")
        return sources
    if target.suffix == ".json":
        sibling = target.with_suffix(".jsonl")
        if sibling.exists():
            return [_read_jsonl(sibling, target.stem)]
        source = _read_json_episodes(target, target.stem)
        if source is None or not source.episodes:
            raise ValueError(f"{target} holds no episodes (an evaluation report keeps them in {sibling.name}, which "
                             "turngym eval --out writes next to it)")
        return [source]
    source = _read_jsonl(target, target.stem)
    if not source.episodes:
        raise ValueError(f"{target} holds no episodes: each line should be one JSON episode (turngym's trajectories "
                         "or episode_samples.jsonl)")
    return [source]


def _label(path: Path, root: Path) -> str:
    return str(path.relative_to(root).with_suffix("")) or path.stem


def _read_jsonl(path: Path, label: str) -> Source:
    source = Source(label, path, report=_report_next_to(path))
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):  # bad JSON, a number over Python's digit limit, deep nesting
                source.skipped_lines += 1
                continue
            if is_episode(record) and episode_problem(record) is None:
                source.episodes.append(record)
            else:  # valid JSON of another shape: skipped like bad JSON, never the end of the page
                source.skipped_lines += 1
    return source


def _read_json_episodes(path: Path, label: str) -> Source | None:
    """A ``.json`` file that is a list of episodes or holds one under ``episodes``/``trajectories``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return None
    if isinstance(data, dict):
        data = data.get("episodes", data.get("trajectories"))
    if not isinstance(data, list):
        return None
    episodes = [e for e in data if is_episode(e) and episode_problem(e) is None]
    return Source(label, path, episodes=episodes, report=None, skipped_lines=len(data) - len(episodes))


def _report_next_to(path: Path) -> dict[str, Any] | None:
    """The evaluation report written next to a trajectory file (``turngym eval --out``; a study's evals)."""
    file = path.with_suffix(".json")
    if not file.is_file():
        return None
    try:
        data = json.loads(file.read_text(encoding="utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return None
    report = data.get("report", data) if isinstance(data, dict) else None
    if not isinstance(report, dict) or not isinstance(report.get("overall"), dict):
        return None
    interval, passes = report["overall"].get("success_ci95"), report.get("pass_at_k")
    if interval is not None and not _numbers(interval, 2):
        return None  # a report of another shape heads nothing rather than stopping the page
    if passes is not None and not (isinstance(passes, list) and all(
            isinstance(p, dict) and _number(p.get("estimate")) and _numbers(p.get("ci95"), 2) for p in passes)):
        return None
    return report


def is_episode(record: Any) -> bool:
    return isinstance(record, dict) and isinstance(record.get("actions"), list) and isinstance(
        record.get("observations"), list)


def episode_problem(record: Mapping[str, Any]) -> str | None:
    """Why an episode record cannot be shown (None when it can): a field the page reads has the wrong type."""
    for key in ("turn_rewards", "turn_advantages"):
        value = record.get(key)
        if value is not None and not _numbers(value):
            return f"{key} is not a list of numbers"
    if record.get("episode_reward") is not None and not _number(record["episode_reward"]):
        return "episode_reward is not a number"
    if not isinstance(record.get("invalid_actions") or [], list):
        return "invalid_actions is not a list"
    inner = record.get("record")
    if isinstance(inner, Mapping) and not isinstance(inner.get("replies") or [], list):
        return "record.replies is not a list"
    for key in ("outcome", "truncation_reason"):
        if record.get(key) is not None and not isinstance(record[key], str):
            return f"{key} is not a string"
    return None


def _number(value: Any) -> bool:
    """An int or float the page can print as a float (bool too: 0/1; not an int past float's range)."""
    return isinstance(value, float) or (isinstance(value, int) and abs(value) <= sys.float_info.max)


def _numbers(value: Any, length: int | None = None) -> bool:
    return (isinstance(value, list) and (length is None or len(value) == length)
            and all(_number(v) for v in value))


def outcome_of(episode: Mapping[str, Any]) -> str:
    """:attr:`~turngym.agents.rollout.Trajectory.outcome`, also for files written before it was recorded."""
    if episode.get("outcome") in OUTCOMES:
        return str(episode["outcome"])
    if episode.get("won"):
        return "won"
    if episode.get("truncated"):
        from turngym.agents.rollout import LIMIT_REASONS

        return "truncated" if episode.get("truncation_reason") in (None, *LIMIT_REASONS) else "failed"
    return "lost"


# ---------------------------------------------------------------------- rendering
def render_page(sources: Sequence[Source], *, title: str = "turngym episodes", max_episodes: int = MAX_EPISODES,
                max_chars: int = MAX_CHARS) -> str:
    """The whole page as one string: inline CSS, the episodes as HTML (every text escaped), inline JS."""
    total = sum(len(s.episodes) for s in sources)
    shown: list[tuple[Source, int, dict[str, Any]]] = []
    for source in sources:
        for index, episode in enumerate(source.episodes):
            if len(shown) < max_episodes:
                shown.append((source, index, episode))
    outcomes = Counter(outcome_of(e) for _, _, e in shown)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # Nothing is fetched, and the browser runs no script but the page's own (its hash), should any text
        # ever get past the escaping.
        ('<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; '
         f'script-src \'sha256-{_script_hash()}\'">'),
        f"<title>{_e(title)}</title>",
        f"<style>{CSS}</style>",
        "</head><body>",
        f"<header><h1>{_e(title)}</h1>",
        f'<p class="meta">{total} episodes from {len(sources)} file{"s" if len(sources) != 1 else ""}'
        + (f"; the first {len(shown)} are shown (turngym view --max-episodes)" if len(shown) < total else "")
        + ". " + ", ".join(f"{outcomes[o]} {o}" for o in OUTCOMES if outcomes[o]) + "</p>",
        _controls(sources),
        "</header>",
        _summaries(sources),
        "<main>",
        *(_episode(source, index, episode, max_chars, open_=not position)
          for position, (source, index, episode) in enumerate(shown)),
        "</main>",
        f"<script>{SCRIPT}</script>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _e(value: Any) -> str:
    """HTML-escaped text (quotes too, so it is safe inside attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def _clip(text: Any, max_chars: int) -> str:
    text = "" if text is None else str(text)
    if len(text) <= max_chars:
        return _e(text)
    return f'{_e(text[:max_chars])}<span class="cut"> … ({len(text) - max_chars:,} more characters)</span>'


def _controls(sources: Sequence[Source]) -> str:
    options = "".join(f'<option value="{_e(o)}">{_e(o)}</option>' for o in OUTCOMES)
    source_options = "".join(f'<option value="{_e(s.label)}">{_e(s.label)}</option>' for s in sources)
    return (
        '<form id="filters">'
        '<label>task <input id="filter-task" type="search" placeholder="id contains"></label> '
        f'<label>outcome <select id="filter-outcome"><option value="">any</option>{options}</select></label> '
        f'<label>source <select id="filter-source"><option value="">any</option>{source_options}</select></label> '
        '<span class="count"><span id="shown-count"></span> shown</span>'
        "</form>"
    )


def _summaries(sources: Sequence[Source]) -> str:
    rows = []
    for source in sources:
        episodes = source.episodes
        n = len(episodes)
        won = sum(outcome_of(e) == "won" for e in episodes)
        report = source.report or {}
        overall = report.get("overall") or {}
        interval = overall.get("success_ci95")
        success = f"{100 * won / n:.1f} %" if n else "-"
        if interval:
            success += f" ({100 * interval[0]:.1f}-{100 * interval[1]:.1f})"
        passes = ", ".join(f"pass@{p['k']} {100 * p['estimate']:.1f} % ({100 * p['ci95'][0]:.1f}-"
                           f"{100 * p['ci95'][1]:.1f})" for p in report.get("pass_at_k") or [])
        returns = sum(float(e.get("episode_reward", sum(e.get("turn_rewards") or []))) for e in episodes)
        steps = sorted({e["step"] for e in episodes if isinstance(e.get("step"), int)})
        extra = f"steps {steps[0]}-{steps[-1]}" if steps else (_e(report.get("agent", "")) if report else "")
        rows.append(
            f"<tr><td>{_e(source.label)}</td><td>{_e(extra)}</td><td class=num>{n}</td><td>{_e(success)}</td>"
            f"<td>{_e(passes) or '-'}</td><td class=num>{returns / n if n else 0.0:.3f}</td>"
            f"<td class=num>{source.skipped_lines or ''}</td></tr>")
    return ('<table class="summary"><thead><tr><th>source</th><th></th><th>episodes</th><th>success (95 % CI)</th>'
            "<th>pass@k (95 % CI)</th><th>mean return</th><th>lines skipped</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def _episode(source: Source, index: int, episode: Mapping[str, Any], max_chars: int, open_: bool = False) -> str:
    task = episode.get("task") or {}
    task_id = str(task.get("id", "?")) if isinstance(task, Mapping) else str(task)
    outcome = outcome_of(episode)
    actions = episode.get("actions") or []
    observations = episode.get("observations") or []
    rewards = episode.get("turn_rewards") or []
    invalid = episode.get("invalid_actions") or []
    advantages = episode.get("turn_advantages")
    record = episode.get("record") if isinstance(episode.get("record"), Mapping) else {}
    replies = record.get("replies") or []
    total = episode.get("episode_reward", sum(float(r) for r in rewards))
    facts = [f"return {float(total):+.3f}", f"{len(actions)} turn{'s' if len(actions) != 1 else ''}"]
    if episode.get("step") is not None:
        facts.insert(0, f"step {episode['step']}")
    if episode.get("sample"):
        facts.append(f"sample {episode['sample']}")
    if any(invalid):
        facts.append(f"{sum(bool(i) for i in invalid)} invalid")
    if episode.get("action_protocol"):
        facts.append(str(episode["action_protocol"]))
    reason = episode.get("truncation_reason")
    badge = outcome + (f": {reason}" if reason and outcome in ("truncated", "failed") else "")
    head = (f'<span class="badge {outcome}">{_e(badge)}</span> <span class="task">{_e(task_id)}</span> '
            f'<span class="source">{_e(source.label)} #{index}</span> '
            f'<span class="facts">{_e(" · ".join(facts))}</span>')
    turns = []
    for turn, action in enumerate(actions):
        reply = replies[turn] if turn < len(replies) else None
        reply_cell = _clip(reply, max_chars) if reply is not None and str(reply).strip() != str(action).strip() else ""
        observation = observations[turn + 1] if turn + 1 < len(observations) else ""
        reward = float(rewards[turn]) if turn < len(rewards) else 0.0
        bad = turn < len(invalid) and bool(invalid[turn])
        advantage = ""
        if advantages is not None and turn < len(advantages):
            value = float(advantages[turn])
            advantage = f'<td class="num adv" style="{_shade(value)}">{value:+.3f}</td>'
        elif advantages is not None:
            advantage = "<td></td>"
        turns.append(
            f'<tr class="{"invalid" if bad else ""}"><td class=num>{turn + 1}</td>'
            f'<td class="action">{_clip(action, max_chars)}{" <b>invalid</b>" if bad else ""}</td>'
            f'<td class="reply">{reply_cell}</td><td class="obs">{_clip(observation, max_chars)}</td>'
            f"<td class=num>{reward:+.3f}</td>{advantage}</tr>")
    adv_head = "<th>advantage</th>" if advantages is not None else ""
    first = observations[0] if observations else ""
    return (
        f'<section class="episode {outcome}" id="episode-{_e(source.label)}-{index}" data-task="{_e(task_id)}" '
        f'data-outcome="{outcome}" data-source="{_e(source.label)}">'
        f"<details{' open' if open_ else ''}><summary>{head}</summary>"
        f'<div class="first"><b>start</b> {_clip(first, max_chars)}</div>'
        '<table class="turns"><thead><tr><th>#</th><th>action</th><th>model reply</th><th>observation</th>'
        f"<th>reward</th>{adv_head}</tr></thead><tbody>{''.join(turns)}</tbody></table>"
        "</details></section>"
    )


def _script_hash() -> str:
    return base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()


def _shade(value: float) -> str:
    """Green for a positive advantage, red for a negative one; stronger as |A| grows (saturating at 1)."""
    strength = min(abs(value), 1.0)
    colour = "46, 160, 67" if value > 0 else "218, 54, 51"
    return f"background: rgba({colour}, {0.1 + 0.5 * strength:.2f})" if value else ""


CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1f2328; background: #fff; }
header { position: sticky; top: 0; background: #f6f8fa; border-bottom: 1px solid #d0d7de; padding: 8px 16px;
         z-index: 1; }
h1 { font-size: 18px; margin: 0 0 4px; }
.meta { margin: 0 0 6px; color: #59636e; }
form label { margin-right: 12px; }
.count { color: #59636e; }
table { border-collapse: collapse; }
.summary { margin: 12px 16px; }
.summary td, .summary th { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; }
main { padding: 8px 16px 40px; }
.episode { border: 1px solid #d0d7de; border-left: 6px solid #8c959f; border-radius: 4px; margin: 6px 0; }
.episode.won { border-left-color: #1a7f37; }
.episode.lost { border-left-color: #cf222e; }
.episode.truncated { border-left-color: #bf8700; }
.episode.failed { border-left-color: #8250df; }
summary { cursor: pointer; padding: 6px 8px; }
.badge { display: inline-block; min-width: 64px; padding: 0 6px; border-radius: 10px; color: #fff;
         background: #8c959f; font-size: 12px; text-align: center; }
.badge.won { background: #1a7f37; } .badge.lost { background: #cf222e; }
.badge.truncated { background: #bf8700; } .badge.failed { background: #8250df; }
.task { font-weight: 600; font-family: ui-monospace, monospace; }
.source, .facts { color: #59636e; margin-left: 8px; }
.first { padding: 4px 8px; white-space: pre-wrap; font-family: ui-monospace, monospace; font-size: 12px; }
.turns { width: 100%; font-size: 12px; }
.turns td, .turns th { border-top: 1px solid #d0d7de; padding: 3px 6px; vertical-align: top; text-align: left; }
.turns td.action, .turns td.reply, .turns td.obs { white-space: pre-wrap; font-family: ui-monospace, monospace;
                                                  word-break: break-word; }
.turns tr.invalid td.action { color: #cf222e; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.cut { color: #59636e; font-style: italic; }
[hidden] { display: none !important; }
"""

# Filtering: every episode section carries data-task, data-outcome and data-source; a filter hides the others.
SCRIPT = """
(function () {
  "use strict";
  var KEYS = ["task", "outcome", "source"];
  var episodes = Array.prototype.slice.call(document.querySelectorAll("section.episode"));
  function parse(text) {
    var filter = {};
    text.replace(/^[#?]/, "").split("&").forEach(function (pair) {
      if (!pair) { return; }
      var at = pair.indexOf("=");
      var key = decodeURIComponent(at < 0 ? pair : pair.slice(0, at));
      var value = at < 0 ? "" : decodeURIComponent(pair.slice(at + 1).replace(/\\+/g, " "));
      if (KEYS.indexOf(key) >= 0) { filter[key] = value; }
    });
    return filter;
  }
  function apply(filter) {
    var task = (filter.task || "").toLowerCase(), outcome = filter.outcome || "", source = filter.source || "";
    var shown = 0;
    episodes.forEach(function (section) {
      var keep = (!outcome || section.getAttribute("data-outcome") === outcome) &&
                 (!source || section.getAttribute("data-source") === source) &&
                 (!task || section.getAttribute("data-task").toLowerCase().indexOf(task) >= 0);
      section.hidden = !keep;
      if (keep) { shown += 1; }
    });
    KEYS.forEach(function (key) { document.getElementById("filter-" + key).value = filter[key] || ""; });
    document.getElementById("shown-count").textContent = shown + " of " + episodes.length;
    document.body.setAttribute("data-shown", String(shown));
    return shown;
  }
  function fromControls() {
    var filter = {};
    KEYS.forEach(function (key) { filter[key] = document.getElementById("filter-" + key).value; });
    return filter;
  }
  // The hook for scripts and tests: turngymFilter({outcome: "won", task: "eval/3"}) -> episodes shown.
  window.turngymFilter = function (filter) {
    filter = filter || {};
    var hash = KEYS.filter(function (k) { return filter[k]; })
                   .map(function (k) { return k + "=" + encodeURIComponent(filter[k]); }).join("&");
    if (history.replaceState) { history.replaceState(null, "", hash ? "#" + hash : location.pathname); }
    return apply(filter);
  };
  KEYS.forEach(function (key) {
    var control = document.getElementById("filter-" + key);
    control.addEventListener(key === "task" ? "input" : "change", function () {
      window.turngymFilter(fromControls());
    });
  });
  document.getElementById("filters").addEventListener("submit", function (event) { event.preventDefault(); });
  window.addEventListener("hashchange", function () { apply(parse(location.hash)); });
  var start = parse(location.search);
  var fromHash = parse(location.hash);
  KEYS.forEach(function (k) { if (k in fromHash) { start[k] = fromHash[k]; } });
  apply(start);
})();
"""


# ---------------------------------------------------------------------- command line
def default_output(target: Path) -> Path:
    return target / "episodes.html" if target.is_dir() else target.with_suffix(".html")


def write_page(target: str | Path, output: str | Path | None = None, *, max_episodes: int = MAX_EPISODES,
               max_chars: int = MAX_CHARS) -> tuple[Path, list[Source]]:
    """Render the episodes of ``target`` into ``output`` (default: ``episodes.html`` in a folder, or the file's
    name with ``.html``); returns the page's path and what it read."""
    target = Path(target).expanduser()
    sources = load_sources(target)
    out = Path(output).expanduser() if output else default_output(target)
    if out.resolve() in {s.path.resolve() for s in sources}:
        raise ValueError(f"-o {out} would overwrite an episode file; choose another name")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_page(sources, title=f"turngym episodes: {target.name or target}",
                               max_episodes=max_episodes, max_chars=max_chars), encoding="utf-8")
    return out, sources


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", help="a results folder (searched for episode files), a .jsonl episode file or "
                                        "an eval report .json")
    parser.add_argument("-o", "--output", help="the HTML page (default: RESULTS/episodes.html for a folder, "
                                               "else the file's name with .html)")
    parser.add_argument("--max-episodes", type=int, default=MAX_EPISODES, help="episodes on the page (default: "
                                                                                 "%(default)s)")
    parser.add_argument("--max-chars", type=int, default=MAX_CHARS,
                        help="characters per action or observation before it is cut (default: %(default)s)")


def main_with(args: argparse.Namespace) -> int:
    if args.max_episodes < 1 or args.max_chars < 1:
        raise ValueError("--max-episodes and --max-chars must be at least 1")
    out, sources = write_page(args.results, args.output, max_episodes=args.max_episodes, max_chars=args.max_chars)
    episodes, skipped = sum(len(s.episodes) for s in sources), sum(s.skipped_lines for s in sources)
    print(f"{episodes} episodes from {len(sources)} file(s) -> {out}"
          + (f"; {skipped} line(s) skipped: not JSON, or not an episode turngym can show" if skipped else ""))
    return 0
