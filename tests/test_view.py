"""`turngym view`: one static HTML page of episodes, escaped, filterable, checked in headless Chromium."""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from turngym.recipes.cli import main
from turngym.recipes.view import load_sources, outcome_of, render_page, write_page

SIGNALS = "turngym/Signals-v0"
HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>\"'&"


@pytest.fixture(scope="module")
def eval_dir(tmp_path_factory):
    """What `turngym eval --out` writes: random and oracle agents on Signals, 3 samples of 4 tasks each."""
    out = tmp_path_factory.mktemp("eval")
    assert main(["eval", "--env", SIGNALS, "--agent", "random", "--agent", "oracle", "--episodes", "4",
                 "--workers", "0", "--samples-per-task", "3", "--out", str(out)]) == 0
    return out


def hostile_episode(**overrides) -> dict:
    """A trajectory line whose model output and world text try to inject markup and script."""
    episode = {
        "task": {"id": f"task{HOSTILE}", "split": "eval"}, "observations": [f"start {HOSTILE}", f"obs {HOSTILE}"],
        "actions": [f"act {HOSTILE}"], "turn_rewards": [0.0], "invalid_actions": [True], "won": False,
        "terminated": False, "truncated": True, "truncation_reason": f"max_turns{HOSTILE}", "sample": 0,
        "record": {"replies": [f"reply {HOSTILE}"], "actions": [None]}, "episode_reward": 0.0, "num_turns": 1,
    }
    return {**episode, **overrides}


def parsed_tags(page: str) -> list[tuple[str, dict[str, str]]]:
    """Every start tag of ``page`` and its attributes, as a browser's tokenizer reads them."""
    tags = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append((tag, {k: v or "" for k, v in attrs}))

    Collect().feed(page)
    return tags


def sections(page: str) -> list[str]:
    return re.findall(r"<section class=\"episode[^>]*>", page)


# ---------------------------------------------------------------------- reading turngym's files
def test_an_eval_folder_becomes_one_page_with_every_episode(eval_dir, capsys):
    assert main(["view", str(eval_dir)]) == 0
    page_path = eval_dir / "episodes.html"
    assert f"-> {page_path}" in capsys.readouterr().out
    page = page_path.read_text()
    assert len(sections(page)) == 2 * 4 * 3  # two agents, 4 tasks, 3 samples each
    assert page.count('data-source="oracle"') == 12 and page.count('data-outcome="won"') >= 12
    # The report next to each trajectory file heads its episodes: success and pass@k.
    assert "pass@1 100.0 % (51.0-100.0), pass@3 100.0 % (51.0-100.0)" in page  # Wilson over 4 tasks won
    assert "sample 2" in page and "signals/eval/10003" in page


def test_a_report_json_is_read_through_its_trajectory_file(eval_dir, tmp_path):
    (source,) = load_sources(eval_dir / "random.json")
    assert source.path.name == "random.jsonl" and len(source.episodes) == 12 and source.report["agent"] == "random"
    out, _ = write_page(eval_dir / "random.jsonl", tmp_path / "random.html")
    assert len(sections(out.read_text())) == 12


def test_nothing_to_show_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_sources(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no episodes"):
        load_sources(tmp_path / "empty")
    (tmp_path / "report.json").write_text(json.dumps({"overall": {}}))
    with pytest.raises(ValueError, match="report.jsonl"):
        load_sources(tmp_path / "report.json")
    lines = tmp_path / "bad.jsonl"
    lines.write_text("not json\n" + json.dumps(hostile_episode()) + "\n" + json.dumps({"other": 1}) + "\n")
    (source,) = load_sources(lines)
    assert len(source.episodes) == 1 and source.skipped_lines == 2
    assert main(["view", str(lines), "-o", str(lines)]) == 2  # never overwrite the episodes


# Issue 40: valid JSON of the wrong shape (a list, a field of the wrong type) stopped the whole page; it is
# skipped as bad JSON is, and the command says how many lines it skipped.
BAD_SHAPES = [
    [1, 2, 3],
    hostile_episode(turn_rewards="abc"),
    hostile_episode(turn_rewards=[{"r": 1}]),
    hostile_episode(episode_reward="x"),
    hostile_episode(episode_reward=10 ** 400),  # past float's range
    hostile_episode(turn_advantages=["high"]),
    hostile_episode(invalid_actions=7),
    hostile_episode(record={"replies": 3}),
    hostile_episode(outcome=["won"]),
]


def test_a_line_of_the_wrong_shape_is_skipped_and_counted(tmp_path, capsys):
    lines = tmp_path / "mixed.jsonl"
    bad = [json.dumps(record) for record in BAD_SHAPES]
    bad += ['{"actions": [], "observations": [], "episode_reward": ' + "9" * 5000 + "}",  # Python's digit limit
            "[" * 5000 + "]" * 5000]  # nesting deeper than the stack
    good = [json.dumps(hostile_episode()), json.dumps(hostile_episode(won=True, episode_reward=1.0))]
    lines.write_text("\n".join([good[0], *bad, good[1]]) + "\n")
    (source,) = load_sources(lines)
    assert len(source.episodes) == 2 and source.skipped_lines == len(bad)
    capsys.readouterr()
    assert main(["view", str(lines), "-o", str(tmp_path / "page.html")]) == 0
    out = capsys.readouterr().out
    assert f"2 episodes from 1 file(s) -> {tmp_path / 'page.html'}; {len(bad)} line(s) skipped" in out, out
    page = (tmp_path / "page.html").read_text()
    assert len(sections(page)) == 2 and f"<td class=num>{len(bad)}</td></tr>" in page  # the summary's count
    listed = tmp_path / "listed.json"  # a .json list of episodes: the same rule
    listed.write_text(json.dumps([hostile_episode(), *BAD_SHAPES]))
    (source,) = load_sources(listed)
    assert len(source.episodes) == 1 and source.skipped_lines == len(BAD_SHAPES)


def test_a_report_of_the_wrong_shape_heads_nothing_and_stops_nothing(tmp_path):
    lines = tmp_path / "agent.jsonl"
    lines.write_text(json.dumps(hostile_episode()) + "\n")
    for report in ({"overall": {"success_ci95": "ab"}}, {"overall": {}, "pass_at_k": [{"k": 1}]}, {"overall": 3}):
        (tmp_path / "agent.json").write_text(json.dumps(report))
        (source,) = load_sources(lines)
        assert source.report is None and len(source.episodes) == 1
        assert len(sections(render_page([source]))) == 1


def test_outcomes_also_for_files_without_the_outcome_field():
    assert outcome_of({"won": True}) == "won"
    assert outcome_of({"truncated": True, "truncation_reason": "max_turns"}) == "truncated"
    assert outcome_of({"truncated": True, "truncation_reason": "worker_crashed"}) == "failed"
    assert outcome_of({"terminated": True}) == "lost"


# ---------------------------------------------------------------------- hostile text
def test_every_text_is_escaped_and_the_page_fetches_nothing(tmp_path):
    file = tmp_path / "hostile.jsonl"
    file.write_text(json.dumps(hostile_episode()) + "\n")
    page = render_page(load_sources(file))
    assert "<script>document.title" not in page and "<img src=x" not in page
    assert html.escape(f"act {HOSTILE}") in page and html.escape(f"reply {HOSTILE}") in page
    assert html.escape(f"obs {HOSTILE}") in page and html.escape(f"start {HOSTILE}") in page
    tags = parsed_tags(page)
    assert [t for t, _ in tags].count("script") == 1 and "img" not in {t for t, _ in tags}  # only the page's script
    assert any(a.get("data-task") == f"task{HOSTILE}" for _, a in tags)  # attributes hold the text, escaped
    # Self-contained: no tag loads anything, no CSS fetches, and a CSP forbids fetching and foreign scripts.
    assert not [a for _, a in tags if {"src", "href"} & set(a)]
    assert "url(" not in page and "@import" not in page
    assert "default-src 'none'" in page and "script-src 'sha256-" in page


def test_long_texts_are_cut_with_a_note(tmp_path):
    file = tmp_path / "long.jsonl"
    file.write_text(json.dumps(hostile_episode(observations=["x" * 50, "y" * 10_000])) + "\n")
    page = render_page(load_sources(file), max_chars=100)
    assert "y" * 100 in page and "y" * 101 not in page and "(9,900 more characters)" in page


# ---------------------------------------------------------------------- in a real browser
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; "
                                                              "`make install` does it as root)")


def chromium(tmp_path: Path, url: str, *args: str) -> str:
    """Headless Chromium, isolated: its own fresh profile, no GPU, nothing fetched in the background."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
               f"--user-data-dir={profile}", *args, url]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def visible(dom: str) -> list[tuple[str, str, str]]:
    """(source, task, outcome) of each episode section the page's script left visible."""
    out = []
    for tag in sections(dom):
        if " hidden" not in tag:
            attributes = dict(re.findall(r'data-(source|task|outcome)="([^"]*)"', tag))
            out.append((html.unescape(attributes["source"]), html.unescape(attributes["task"]), attributes["outcome"]))
    return out


@needs_chromium
def test_the_page_renders_in_chromium(eval_dir, tmp_path):
    from PIL import Image

    page, _ = write_page(eval_dir, tmp_path / "page.html")
    shot = tmp_path / "shot.png"
    chromium(tmp_path, page.as_uri(), f"--screenshot={shot}", "--window-size=1100,700", "--hide-scrollbars")
    width, height = struct.unpack(">II", shot.read_bytes()[16:24])  # the PNG's IHDR
    assert (width, height) == (1100, 700)
    image = Image.open(shot).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20)
    assert len(colours) > 50  # text, badges, table lines: not a blank page
    background = max(colours)[0] / (width * height)
    assert background < 0.95  # most of the screen is not one colour
    dom = chromium(tmp_path, page.as_uri(), "--dump-dom")
    assert len(visible(dom)) == 24 and 'data-shown="24"' in dom  # the script ran; no filter: all shown


@needs_chromium
def test_a_filter_in_the_url_hides_the_right_episodes(eval_dir, tmp_path):
    page, sources = write_page(eval_dir, tmp_path / "page.html")
    every = [(s.label, e["task"]["id"], outcome_of(e)) for s in sources for e in s.episodes]
    lost = {o for _, _, o in every} - {"won"}
    assert lost, "the random agent should lose some episodes"
    dom = chromium(tmp_path, page.as_uri() + "#outcome=won&source=random", "--dump-dom")
    expected = [row for row in every if row[0] == "random" and row[2] == "won"]
    assert visible(dom) == expected and f'data-shown="{len(expected)}"' in dom
    task = "signals/eval/10002"
    dom = chromium(tmp_path, page.as_uri() + "?task=" + task.replace("/", "%2F"), "--dump-dom")
    assert visible(dom) == [row for row in every if row[1] == task] and len(visible(dom)) == 6
    dom = chromium(tmp_path, page.as_uri() + "#outcome=failed", "--dump-dom")
    assert visible(dom) == [] and 'data-shown="0"' in dom


@needs_chromium
def test_hostile_text_stays_text_in_the_browser(tmp_path):
    file = tmp_path / "hostile.jsonl"
    file.write_text(json.dumps(hostile_episode()) + "\n" + json.dumps(hostile_episode(won=True, truncated=False,
                                                                                      outcome="won")) + "\n")
    page, _ = write_page(file, tmp_path / "hostile.html")
    dom = chromium(tmp_path, page.as_uri(), "--dump-dom")
    assert "<title>turngym episodes: hostile.jsonl</title>" in dom  # the injected script never ran
    assert dom.count("<script") == 1 and "<img" not in dom
    assert html.escape(f"act {HOSTILE}", quote=False) in dom  # shown as text
    dom = chromium(tmp_path, page.as_uri() + "#task=" + "task%3Cscript", "--dump-dom")
    assert len(visible(dom)) == 2  # a filter on the escaped id matches the text, not the markup
