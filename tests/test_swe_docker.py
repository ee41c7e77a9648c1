"""The Docker backend for real: episodes and task validation in images built from a local root
filesystem (``make docker-image``: debootstrap + ``docker import``; no registry is reachable).

Run with ``make test-docker``; skipped, with the reason, when no Docker daemon answers or the
image is not built.
"""

from __future__ import annotations

import gymnasium
import pytest

from turngym import envs  # noqa: F401 - registers turngym/SWE-v0
from turngym.envs.swe import SWEInstance, shipped_instances, swe_taskset, validate
from turngym.envs.swe.instances import local_repo_dir
from turngym.envs.swe.sandbox import backend_available

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def docker_ready():
    problem = backend_available("docker")
    if problem:
        pytest.skip(f"docker sandbox unavailable: {problem}")
    from turngym.envs.swe.sandbox import docker

    if not docker.image_exists(docker.DEFAULT_IMAGE):
        pytest.skip(f"docker image {docker.DEFAULT_IMAGE} is not built: run `make docker-image`")
    return docker


@pytest.mark.parametrize("instance", [pytest.param(i, id=i.instance_id) for _, i in shipped_instances()])
def test_shipped_tasks_validate_in_docker(docker_ready, instance):
    validation = validate(instance, "docker")
    assert not validation.problems, validation.problems
    assert validation.base_commit == instance.base_commit  # the same snapshot as under bwrap


def test_episode_in_docker(docker_ready):
    env = gymnasium.make("turngym/SWE-v0", split="eval", sandbox="docker")
    try:
        obs, info = env.reset(options={"task": "turngym__intervals-2"})
        assert info["sandbox"] == "docker"
        obs, *_ = env.step("```bash\nid -u; python3 --version; ls /testbed\n```")
        assert "65534" in obs and "intervals" in obs
        naive = ("```bash\nsed -i 's/self.start <= other.end and other.start <= self.end/"
                 "self.start < other.end and other.start < self.end/' intervals/core.py\n```")
        env.step(naive)
        *_, info = env.step("submit")
        assert info["episode_reward"] == pytest.approx(1 - 1 / 21) and not info["resolved"]
    finally:
        env.close()


def test_a_per_task_image_with_the_repository_baked_in(docker_ready):
    """SWE-bench's layout: the task names its image, and the image holds the repository at /testbed."""
    _, instance = shipped_instances()[0]
    tag = f"turngym/swe-task:{instance.instance_id.lower()}"
    docker_ready.build_image(tag, repo_dir=local_repo_dir(instance.repo_path))
    try:
        record = {**instance.to_record(), "image": tag}
        del record["repo_path"]
        task = swe_taskset([SWEInstance.from_record(record)], name="images")
        env = gymnasium.make("turngym/SWE-v0", tasks=task, sandbox="docker")
        try:
            _, info = env.reset(options={"task": instance.instance_id})
            assert info["base_commit"] == instance.base_commit
            for action in info["walkthrough"]:
                *_, info = env.step(action)
            assert info["resolved"] and info["episode_reward"] == 1.0
        finally:
            env.close()
    finally:
        import docker

        client = docker.from_env()
        client.images.remove(tag, force=True)
        client.close()


def test_a_missing_image_says_how_to_build_it(docker_ready):
    _, instance = shipped_instances()[0]
    record = {**instance.to_record(), "image": "turngym/not-built:latest"}
    env = gymnasium.make("turngym/SWE-v0", tasks=swe_taskset([SWEInstance.from_record(record)], name="x"),
                         sandbox="docker")
    try:
        with pytest.raises(RuntimeError, match="turngym/not-built:latest is not present.*make docker-image"):
            env.reset(options={"task": instance.instance_id})
    finally:
        env.close()
