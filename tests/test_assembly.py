"""How a run is assembled before TRL's init (trainers/assembly.py), and the one interface weights reach a sampler by."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest
import torch
from helpers_llm import tiny_llama, word_tokenizer
from test_trainer import SIGNALS, make_args, make_trainer

from turngym.agents import vllm_backend
from turngym.agents.generation import WeightPublisher
from turngym.agents.vllm_backend import VLLMBackend
from turngym.envs.signals import signal_tasks
from turngym.trainers.assembly import Run, assemble
from turngym.trainers.curriculum import TaskSampler
from turngym.trainers.pipeline import PolicyCopy, PublishWeights, RolloutPipeline
from turngym.trainers.trainer import TurnGymTrainer
from turngym.trainers.vllm_colocate import TRLWeightSync, trl_vllm_sampler


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return word_tokenizer(tmp_path_factory.mktemp("words"))


# ---------------------------------------------------------------------- assembly
def test_a_run_is_assembled_from_its_config_before_trl(tmp_path, tokenizer):
    args = make_args(tmp_path, curriculum="success")
    run = assemble(args, tiny_llama(len(tokenizer)), tasks=signal_tasks("train", 8, **SIGNALS),
                   eval_tasks=signal_tasks("eval", 2, **SIGNALS), tokenizer=tokenizer)
    assert isinstance(run, Run) and run.tokenizer is tokenizer and run.estimator is args.estimator
    assert run.keys == [t.id for t in signal_tasks("train", 8, **SIGNALS)] == list(run.runner.tasks)
    assert run.task_index == {key: i for i, key in enumerate(run.keys)}
    train, held_out = run.datasets()
    assert train["prompt"] == run.keys and held_out["prompt"] == [t.id for t in run.eval_tasks]
    assert isinstance(run.task_sampler, TaskSampler) and run.task_sampler.curriculum is run.curriculum
    assert run.peft_config is None and run.value_model is None and run.pipeline(None, None) is None  # K = 0


def test_assembly_refuses_what_it_cannot_build(tmp_path, tokenizer):
    with pytest.raises(ValueError, match="needs args"):
        assemble(None)
    with pytest.raises(ValueError, match="processing_class"):
        assemble(make_args(tmp_path), tiny_llama(len(tokenizer)))


def test_the_trainer_holds_the_assembled_parts(tmp_path, tokenizer):
    trainer = make_trainer(tmp_path, tokenizer, curriculum="success")
    try:
        assert trainer.train_dataset["prompt"] == list(trainer.runner.tasks)
        assert trainer._get_train_sampler() is trainer.task_sampler
        assert trainer.task_sampler.curriculum is trainer.curriculum
        assert trainer.publisher is None and trainer.pipeline is None  # Hugging Face samples the trained model itself
    finally:
        trainer.runner.close()


# ---------------------------------------------------------------------- one weight-publishing interface
@pytest.mark.parametrize("publisher", [PolicyCopy, RolloutPipeline, VLLMBackend, TRLWeightSync])
def test_every_publisher_has_the_one_signature(publisher):
    assert inspect.signature(publisher.publish) == inspect.signature(WeightPublisher.publish)


class FakeLLM:
    """A colocated ``vllm.LLM`` that records what the weight sync sends its workers."""

    def __init__(self):
        self.loaded, self.resets = [], 0

    def collective_rpc(self, method, args=()):
        (weights,) = args
        self.loaded.append({name: tensor.clone() for name, tensor in weights})

    def reset_prefix_cache(self):
        self.resets += 1


class FakeGeneration:
    """TRL's ``VLLMGeneration``: a colocated engine (``llm``) or a server's client, and TRL's own sync."""

    def __init__(self, llm=None, client=None):
        if llm is not None:
            self.llm = llm
        if client is not None:
            self.vllm_client = client
        self.trl_syncs = 0

    def sync_weights(self):
        self.trl_syncs += 1


def test_a_colocated_engine_gets_the_weights_through_its_backend():
    generation, model = FakeGeneration(llm=FakeLLM()), torch.nn.Linear(2, 2)
    factory, publisher = trl_vllm_sampler(generation, sharded=False)
    engine = factory(model)
    assert isinstance(engine, VLLMBackend) and publisher is engine and engine.llm is generation.llm
    publisher.publish(model, 3)
    assert generation.llm.loaded[0].keys() == {"weight", "bias"} and generation.llm.resets == 1
    assert torch.equal(generation.llm.loaded[0]["weight"], model.weight) and generation.trl_syncs == 0


@pytest.mark.parametrize("where", ["server", "sharded"])
def test_a_server_or_sharded_weights_keep_trls_own_sync(where):
    generation = FakeGeneration(client=object()) if where == "server" else FakeGeneration(llm=FakeLLM())
    factory, publisher = trl_vllm_sampler(generation, sharded=where == "sharded")
    assert isinstance(publisher, TRLWeightSync)
    publisher.publish(torch.nn.Linear(2, 2), 1)
    assert generation.trl_syncs == 1
    assert factory(None).client is getattr(generation, "vllm_client", None)


def test_trls_sync_call_reaches_the_publisher_with_the_trainers_step(monkeypatch):
    """TurnGymTrainer rebinds TRL's ``vllm_generation.sync_weights`` to its publisher (the trainer's vLLM path, on a
    stand-in of the trainer: vLLM is not installed here)."""
    published = []
    monkeypatch.setattr(vllm_backend, "sync_vllm_weights", lambda llm, model: published.append((llm, model)))
    model, generation = torch.nn.Linear(2, 2), FakeGeneration(llm=FakeLLM())
    trainer = SimpleNamespace(vllm_generation=generation, is_deepspeed_enabled=False, is_fsdp_enabled=False,
                              runner=SimpleNamespace(backend=None), model=model, state=SimpleNamespace(global_step=2),
                              accelerator=SimpleNamespace(unwrap_model=lambda m: m))
    trainer._publish_weights = lambda: TurnGymTrainer._publish_weights(trainer)
    trainer.publisher = TurnGymTrainer._sample_with_vllm(trainer, None)
    assert trainer.runner.backend(model) is trainer.publisher  # the engine that samples is the one that gets them
    generation.sync_weights()  # what TRL calls before a rollout when the step changed
    assert published == [(generation.llm, model)]
    given = object()
    trainer.runner.backend = given  # a backend given to the trainer is kept
    TurnGymTrainer._sample_with_vllm(trainer, given)
    assert trainer.runner.backend is given


def test_the_step_callback_publishes_to_any_publisher():
    class Recorder:
        def __init__(self):
            self.calls = []

        def publish(self, model, version):
            self.calls.append((model, version))

    recorder, model = Recorder(), object()
    PublishWeights(recorder).on_step_end(None, SimpleNamespace(global_step=5), None, model=model)
    assert recorder.calls == [(model, 5)]
