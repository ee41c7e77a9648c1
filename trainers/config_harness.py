"""The harness group of the run's config: training a user's own agent loop through the proxy
(:mod:`turngym.trainers.harness`, docs/proxy.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from turngym.trainers.config_fields import dict_field

RewritePolicy = Literal["own_context", "drop"]
RenderMode = Literal["splice", "template"]


@dataclass
class HarnessOptions:
    """A harness plays the training episodes: ``harness`` names its function; each of its model calls trains as
    one sample on the exact context it was given."""

    harness: str | None = field(
        default=None, metadata={"help": "train a harness: 'module:function' or 'path/to/file.py:function', called "
                                        "with a HarnessEpisode (base_url, api_key, model, env) per episode; its "
                                        "model calls go through turngym's OpenAI-compatible proxy"})
    harness_kwargs: dict[str, Any] | str | None = field(
        default=None, metadata={"help": "keyword arguments the harness function is called with besides the "
                                        "episode (a JSON object on the command line)"})
    harness_reward: str | None = field(
        default=None, metadata={"help": "'module:function(messages, task) -> float': a reward over the episode's "
                                        "final messages, added to its last call (besides the world's rewards)"})
    harness_concurrency: int = field(
        default=0, metadata={"help": "harness episodes played at once (0: a step's all, so their calls batch)"})
    harness_timeout: float = field(
        default=900.0, metadata={"help": "seconds a step's harness episodes may take; a later one ends as "
                                         "truncated (harness_timeout) on the calls it made (0: no limit)"})
    harness_rewrites: RewritePolicy = field(
        default="own_context", metadata={"help": "a call whose history the harness edited (its prompt extends no "
                                                 "earlier call's sampled ids): train it on its own context, or drop "
                                                 "it"})
    harness_render: RenderMode = field(
        default="splice", metadata={"help": "splice: a reply the harness sends back unchanged stays the ids the "
                                            "model sampled; template: the chat template renders every request whole"})
    harness_max_tokens: int = field(
        default=256, metadata={"help": "tokens a call may sample when the harness's request names no max_tokens"})
    harness_max_context: int = field(
        default=4096, metadata={"help": "a call's prompt and reply tokens at most (longer requests get the API's "
                                        "context_length_exceeded error)"})
    harness_model_name: str = field(
        default="turngym-policy", metadata={"help": "the model name the proxy serves (/v1/models)"})

    def validate_harness(self) -> None:
        self.harness_kwargs = dict_field(self.harness_kwargs, "harness_kwargs")
        if self.harness_concurrency < 0:
            raise ValueError(f"harness_concurrency must be >= 0 (0: all at once), got {self.harness_concurrency}")
        if self.harness_timeout < 0:
            raise ValueError(f"harness_timeout must be >= 0 seconds (0: no limit), got {self.harness_timeout}")
        if self.harness_max_tokens < 1 or self.harness_max_context < 2:
            raise ValueError("harness_max_tokens must be >= 1 and harness_max_context >= 2")
