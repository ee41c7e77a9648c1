"""Every shipped SWE task is valid: the untouched repository fails its FAIL_TO_PASS tests and passes
its PASS_TO_PASS tests; the gold patch resolves it (SWE-bench's validation, in the bwrap sandbox)."""

from __future__ import annotations

import pytest

from tests.helpers_marks import first_of_each
from turngym.envs.swe import shipped_instances, validate
from turngym.envs.swe.grading import patch_paths
from turngym.envs.swe.sandbox import backend_available

# Sandbox validation of the first task of each repository in `make test`, every task under `make test-slow` (each
# is two gradings in bwrap, about 5 s on idle cores; all 26 cost `make test` two minutes).
INSTANCES = [instance for _, instance in shipped_instances()]
INSTANCE_IDS = [instance.instance_id for instance in INSTANCES]
BWRAP_PROBLEM = backend_available("bwrap")


@pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"bwrap sandbox unavailable: {BWRAP_PROBLEM}")
@pytest.mark.parametrize("instance", first_of_each(INSTANCES, lambda instance: instance.repo), ids=INSTANCE_IDS)
def test_gold_patch_resolves_and_the_base_fails(instance, tmp_path):
    validation = validate(instance, "bwrap", workspace_root=tmp_path)
    assert not validation.problems, validation.problems
    assert validation.before.f2p_passed == 0 and validation.before.p2p_failed == 0
    assert validation.after.resolved
    assert validation.base_commit == instance.base_commit  # the snapshot commit is reproducible


@pytest.mark.parametrize("instance", INSTANCES, ids=INSTANCE_IDS)
def test_task_data_is_consistent(instance):
    # the gold patch touches sources only; the hidden tests come with the test patch
    assert patch_paths(instance.patch) and not any(p.startswith("tests/") for p in patch_paths(instance.patch))
    assert all(p.startswith("tests/") for p in patch_paths(instance.test_patch))
    for test_id in instance.fail_to_pass:
        assert "def " + test_id.rsplit("::", 1)[1] in instance.test_patch
    assert not set(instance.fail_to_pass) & set(instance.pass_to_pass)
    # the setup patch injects exactly the lines the gold patch removes
    removed = sorted(line[1:] for line in instance.patch.splitlines()
                     if line.startswith("-") and not line.startswith("---"))
    added = sorted(line[1:] for line in instance.setup_patch.splitlines()
                   if line.startswith("+") and not line.startswith("+++"))
    assert removed == added
    assert instance.patch not in instance.problem_statement
