"""Grading: per-test statuses from a test log, and the reward estimators computed from them.

Statuses follow SWE-bench: a test *passes* when the log reports it ``PASSED`` or ``XFAIL``.
Anything else (``FAILED``, ``ERROR``, ``SKIPPED``, or missing from the log because the run crashed
or timed out) is *not passing*. turngym's runner adds ``TAMPERED``: the code under test was caught
forging its verdict (a canary test passed or went missing, unittest was modified, the independent
harness disagreed); one such test voids the whole grading (:attr:`GradeReport.tampered`, reward 0).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

TAMPERED = "TAMPERED"
STATUSES = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS", TAMPERED)
PASSING = frozenset({"PASSED", "XFAIL"})
MISSING = "MISSING"


def parse_test_log(log: str, test_ids: Iterable[str], prefix: str = "") -> dict[str, str]:
    """The status of each of ``test_ids`` found in ``log``; absent tests are :data:`MISSING`.

    Two line formats are read, as pytest prints them with ``-rA`` and ``-v``:
    ``STATUS <id>`` (optionally followed by `` - message``) and ``<id> STATUS [ 50%]``.
    The turngym unittest runner prints the first. With ``prefix``, only lines starting with it
    count (the runner's nonce: printed output of the code under test cannot forge a result).
    The last report of a test wins.

    Hand-written: SWE-bench's log parsers come with its whole harness (the ``swebench`` package and
    its Docker tooling); these two line formats are all turngym's grading reads.
    """
    ids = list(dict.fromkeys(test_ids))
    known = set(ids)
    statuses = dict.fromkeys(ids, MISSING)
    for raw in log.splitlines():
        line = raw.strip()
        if prefix:
            if not line.startswith(prefix):
                continue
            line = line[len(prefix) :].lstrip()
        word, _, rest = line.partition(" ")
        if word in STATUSES:
            test_id = _match_id(rest, known, ids)
            if test_id is not None:
                statuses[test_id] = word
        elif not prefix and word in known:
            status = rest.split(" ", 1)[0]
            if status in STATUSES:
                statuses[word] = status
    return statuses


def _match_id(text: str, known: set[str], ids: list[str]) -> str | None:
    text = text.rstrip()
    if text in known:
        return text
    head = text.split(" - ", 1)[0]
    if head in known:
        return head
    # an id that itself contains " - " (pytest parameters): the longest id the line starts with
    candidates = [i for i in ids if text.startswith(i + " - ")]
    return max(candidates, key=len) if candidates else None


def pass_ratio_reward(
    f2p_passed: int, f2p_total: int, p2p_failed: int, p2p_total: int, regression_penalty: float = 1.0
) -> float:
    r"""The test pass ratio, the reference study's SWE-Gym reward (22 % success against 4.2 % for binary).

        r = clip( n⁺_F2P / N_F2P  -  λ · n⁻_P2P / N_P2P ,  0, 1 )

    where N_F2P = |FAIL_TO_PASS| >= 1, n⁺_F2P the FAIL_TO_PASS tests now passing, N_P2P =
    |PASS_TO_PASS|, n⁻_P2P the PASS_TO_PASS tests no longer passing (regressions), and λ >= 0 the
    ``regression_penalty``. The regression term is 0 when N_P2P = 0. With λ > 0, r = 1 exactly
    when the instance is resolved. Example: 2 of 4 F2P pass and 1 of 10 P2P regresses:
    r = 2/4 - 1 * 1/10 = 0.4.
    """
    if f2p_total < 1:
        raise ValueError("an instance needs at least one FAIL_TO_PASS test")
    if regression_penalty < 0:
        raise ValueError(f"regression_penalty must be >= 0, got {regression_penalty}")
    regression = regression_penalty * p2p_failed / p2p_total if p2p_total else 0.0
    return min(1.0, max(0.0, f2p_passed / f2p_total - regression))


def resolved_reward(resolved: bool) -> float:
    """The binary SWE-bench outcome: r = 1 if every FAIL_TO_PASS and PASS_TO_PASS test passes, else 0."""
    return 1.0 if resolved else 0.0


@dataclass(frozen=True)
class GradeReport:
    """One grading run of an instance's tests."""

    statuses: Mapping[str, str]
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    log: str = ""
    error: str | None = None  # the test patch did not apply, the run timed out...
    duration_s: float = 0.0
    extra: Mapping[str, object] = field(default_factory=dict)
    patch: str = ""  # the agent's change as graded (test directories, .git and bytecode left out)
    patch_truncated: bool = False  # the patch was over the size limit: only its head is shown, and nothing was graded

    @property
    def f2p_passed(self) -> int:
        return sum(self.statuses.get(t) in PASSING for t in self.fail_to_pass)

    @property
    def p2p_failed(self) -> int:
        return sum(self.statuses.get(t) not in PASSING for t in self.pass_to_pass)

    @property
    def tampered(self) -> bool:
        """The runner caught the code under test forging its verdict: the grading is void (reward 0)."""
        return any(status == TAMPERED for status in self.statuses.values())

    @property
    def resolved(self) -> bool:
        return not self.tampered and self.f2p_passed == len(self.fail_to_pass) and self.p2p_failed == 0

    def pass_ratio(self, regression_penalty: float = 1.0) -> float:
        if self.tampered:
            return 0.0
        return pass_ratio_reward(
            self.f2p_passed, len(self.fail_to_pass), self.p2p_failed, len(self.pass_to_pass), regression_penalty
        )

    def reward(self, kind: str, regression_penalty: float = 1.0) -> float:
        """``kind="ratio"``: :func:`pass_ratio_reward`; ``kind="resolved"``: :func:`resolved_reward`."""
        if kind == "ratio":
            return self.pass_ratio(regression_penalty)
        if kind == "resolved":
            return resolved_reward(self.resolved)
        raise ValueError(f"reward must be 'ratio' or 'resolved', got {kind!r}")

    def components(self, regression_penalty: float = 1.0) -> dict[str, float]:
        """Numbers for ``info["reward_components"]``."""
        return {
            "pass_ratio": self.pass_ratio(regression_penalty),
            "resolved": float(self.resolved),
            "f2p_passed": float(self.f2p_passed),
            "f2p_total": float(len(self.fail_to_pass)),
            "p2p_failed": float(self.p2p_failed),
            "p2p_total": float(len(self.pass_to_pass)),
            "tampered": float(self.tampered),
        }

    def summary(self) -> str:
        if self.tampered:
            return "the grading is void: the code under test tampered with the test harness"
        line = (
            f"{self.f2p_passed}/{len(self.fail_to_pass)} FAIL_TO_PASS tests pass, "
            f"{self.p2p_failed}/{len(self.pass_to_pass)} PASS_TO_PASS tests regressed"
        )
        return line + (f" ({self.error})" if self.error else "")


_DIFF_GIT = re.compile(r"^diff --git a/(\S+) b/(\S+)$")
_FILE_HEADER = re.compile(r"^(?:---|\+\+\+) (?:[ab]/)?(\S+)")


def patch_paths(patch: str) -> list[str]:
    """Paths a unified diff touches (old and new names; ``/dev/null`` excluded), in order.

    Hand-written: a regex over the ``diff --git`` and ``---``/``+++`` headers is all grading needs,
    and it keeps the sandbox free of a patch-parsing dependency.
    """
    paths: list[str] = []
    for line in patch.splitlines():
        match = _DIFF_GIT.match(line)
        found = match.groups() if match else None
        if found is None and line.startswith(("--- ", "+++ ")):
            header = _FILE_HEADER.match(line)
            found = (header.group(1),) if header else None
        for path in found or ():
            if path != "/dev/null" and path not in paths:
                paths.append(path)
    return paths
