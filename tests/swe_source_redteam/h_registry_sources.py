"""H: ``registry_sources()`` under a crafted pip configuration. Before the fixes, when ``pip config list`` failed
(a malformed file named by PIP_CONFIG_FILE) its output was dropped whole and the answer fell back to PyPI,
ignoring PIP_NO_INDEX=1 and PIP_FIND_LINKS (fail-open); values were unquoted crudely, and PIP_NO_INDEX=maybe
counted as false where pip rejects it. Nothing is fetched: only the answers are compared."""

from __future__ import annotations

import os

import common

case = common.Case("H.registry_sources")
os.environ["PIP_NO_INDEX"] = "1"
os.environ["PIP_FIND_LINKS"] = "/srv/wheels /srv/more"
(case.dir / "bad.conf").write_text("[global\nindex-url = http://x\n")


def answers() -> str:
    seen = {"plain": common.source.registry_sources()}
    os.environ["PIP_CONFIG_FILE"] = str(case.dir / "bad.conf")
    seen["malformed PIP_CONFIG_FILE"] = common.source.registry_sources()
    os.environ["PIP_CONFIG_FILE"] = os.devnull
    os.environ["PIP_INDEX_URL"] = "https://a.example/simple x"
    os.environ["PIP_EXTRA_INDEX_URL"] = "='q' \"z\""
    seen["odd values"] = common.source.registry_sources()
    os.environ["PIP_NO_INDEX"] = "maybe"
    seen["PIP_NO_INDEX=maybe"] = common.source.registry_sources()
    for label, value in seen.items():
        print(f"{label:28} -> {value}", flush=True)
    kept = seen["malformed PIP_CONFIG_FILE"] == seen["plain"]
    return ("held: a malformed pip configuration keeps PIP_NO_INDEX and PIP_FIND_LINKS" if kept else
            f"accepted: FAIL-OPEN, a malformed pip configuration gives {seen['malformed PIP_CONFIG_FILE']}") + \
        f"; PIP_NO_INDEX=maybe gives indexes {seen['PIP_NO_INDEX=maybe'][0]}"


case.run(answers, deadline=300, judge=lambda text: text)
