"""The gymnasium internals EnvPool builds on, pinned: this test fails loudly when they change.

EnvPool *is* an AsyncVectorEnv, so its workers run gymnasium's private ``_async_worker`` (the one
AsyncVectorEnv starts: ``reset``/``step`` over all workers, ``get_attr``... work as in gymnasium). To
respawn one worker, :class:`~turngym.envs.vector.PipeTransport` starts that function again with the
arguments AsyncVectorEnv gives it (by name), and reads the vector env's own worker bookkeeping. A
gymnasium release that renames a parameter, changes a reply or moves an attribute breaks the respawn
silently at run time: here it breaks a test instead. When it does, re-read ``_async_worker`` and
``AsyncVectorEnv.__init__`` against ``PipeTransport.respawn``/``result`` in envs/vector.py.
"""

from __future__ import annotations

import inspect
import multiprocessing

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, AutoresetMode
from gymnasium.vector.async_vector_env import AsyncState, _async_worker
from gymnasium.vector.utils import CloudpickleWrapper

from tests.helpers_pool import MisbehavingWorld
from turngym import envs

envs.register("testpool/Misbehaving-v0", entry_point=MisbehavingWorld)


def test_the_worker_takes_the_arguments_envpool_respawns_it_with():
    assert list(inspect.signature(_async_worker).parameters) == [
        "index", "env_fn", "pipe", "parent_pipe", "shared_memory", "error_queue", "autoreset_mode", "semaphore"]


def test_async_vector_env_keeps_the_worker_bookkeeping_envpool_reads():
    vec = AsyncVectorEnv([lambda: gym.make("testpool/Misbehaving-v0")], shared_memory=False, copy=False,
                         context="fork", daemon=False, autoreset_mode=AutoresetMode.DISABLED)
    try:
        assert len(vec.parent_pipes) == len(vec.processes) == len(vec.env_fns) == vec.num_envs == 1
        assert (vec.context, vec.daemon, vec.autoreset_mode, vec.worker) == ("fork", False, AutoresetMode.DISABLED,
                                                                            None)
        assert vec.error_queue is not None and vec._state == AsyncState.DEFAULT
        vec._assert_is_running()
    finally:
        vec.close(terminate=True)


def test_the_worker_answers_resets_and_steps_and_reports_an_error_then_exits():
    ctx = multiprocessing.get_context("fork")
    parent_pipe, child_pipe = ctx.Pipe()
    error_queue = ctx.Queue()
    arguments = {"index": 3, "env_fn": CloudpickleWrapper(lambda: gym.make("testpool/Misbehaving-v0")),
                 "pipe": child_pipe, "parent_pipe": parent_pipe, "shared_memory": None, "error_queue": error_queue,
                 "autoreset_mode": AutoresetMode.DISABLED, "semaphore": None}
    process = ctx.Process(target=_async_worker, kwargs=arguments)
    process.start()
    child_pipe.close()
    try:
        parent_pipe.send(("reset", {"seed": None, "options": {}}))
        (observation, info), ok = parent_pipe.recv()
        assert ok and observation == "ready" and isinstance(info, dict)
        parent_pipe.send(("step", "hello"))
        (observation, reward, terminated, truncated, info), ok = parent_pipe.recv()
        assert ok and (observation, reward, terminated, truncated) == ("echo hello", 0.0, False, False)
        parent_pipe.send(("step", "raise"))
        assert parent_pipe.recv() == (None, False)
        index, kind, message, trace = error_queue.get(timeout=10)
        assert (index, kind, str(message)) == (3, RuntimeError, "the world broke") and "Traceback" in trace
        process.join(timeout=10)
        assert process.exitcode is not None  # the worker left its loop: EnvPool must respawn it
    finally:
        if process.is_alive():
            process.kill()
        parent_pipe.close()


def test_the_wrapper_state_forget_reset_puts_back_is_where_it_reads_it():
    """turngym.envs.pool_api.forget_reset undoes a raised reset in gymnasium's PassiveEnvChecker
    (``checked_reset``, ``checked_step``, ``_previous_data``) and OrderEnforcing (``_has_reset``)."""
    from gymnasium.wrappers.common import OrderEnforcing, PassiveEnvChecker

    from turngym.envs.pool_api import forget_reset

    env = gym.make("turngym/Signals-v0")
    try:
        layers, layer = {}, env
        while isinstance(layer, gym.Wrapper):
            layers[type(layer)] = layer
            layer = layer.env
        checker, order = layers[PassiveEnvChecker], layers[OrderEnforcing]
        assert (checker.checked_reset, checker.checked_step, checker._previous_data) == (False, False, None)
        assert order._has_reset is False
        checker.checked_reset, order._has_reset = True, True  # what a reset that raised half-way leaves
        forget_reset(env)
        assert (checker.checked_reset, order._has_reset) == (False, False)
        env.reset(seed=0)  # the reset check runs again, and the order enforcer lets steps through
        assert checker.checked_reset and order._has_reset
    finally:
        env.close()
