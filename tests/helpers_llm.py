"""A tiny policy for tests: a byte-level BPE tokenizer trained here, and a Llama built from a config.

Nothing is downloaded. The chat templates are written out below: SmolLM2's (the default model's),
a Qwen-style ChatML one, and one that strips earlier ``<think>`` blocks like Qwen3's.
"""

from __future__ import annotations

from pathlib import Path

SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

QWEN_CHATML_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}{%- if message.role != 'system' %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Like Qwen3: assistant messages before the last user message lose their <think> block.
THINK_STRIPPING_TEMPLATE = (
    "{%- set ns = namespace(last_user=0) %}{%- for m in messages %}{%- if m.role == 'user' %}"
    "{%- set ns.last_user = loop.index0 %}{%- endif %}{%- endfor %}"
    "{%- for message in messages %}{%- set content = message.content %}"
    "{%- if message.role == 'assistant' and loop.index0 < ns.last_user and '</think>' in content %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Templates that take tools=, one per call syntax, written here after each family's published format (not copied):
# Hermes / Qwen 2.5: the tools in the system message, calls in <tool_call> blocks, results as <tool_response> in a
# user turn (consecutive results share one).
HERMES_TOOLS_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0].role == 'system' %}"
    "{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions.\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nReturn each call within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|im_start|>assistant' }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for call in message.tool_calls %}{%- set f = call.function %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + f.name + '\", \"arguments\": ' + (f.arguments | tojson) "
    "+ '}\\n</tool_call>' }}"
    "{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Llama 3.1 (JSON calls): the tools in the first user message, a call is the whole reply, results in ipython turns.
LLAMA3_TOOLS_TEMPLATE = (
    "{{- '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\\n\\n' }}"
    "{%- if tools %}{{- 'Environment: ipython\\n' }}{%- endif %}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content }}{%- endif %}{{- '<|eot_id|>' }}"
    "{%- set ns = namespace(tools_shown=false) %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}{{- '<|start_header_id|>user<|end_header_id|>\\n\\n' }}"
    "{%- if tools and not ns.tools_shown %}{{- 'Respond with a JSON function call {\"name\": function name, "
    "\"parameters\": dictionary of arguments}.\\n\\n' }}{%- for tool in tools %}{{- (tool | tojson) + '\\n\\n' }}"
    "{%- endfor %}{%- set ns.tools_shown = true %}{%- endif %}{{- message.content + '<|eot_id|>' }}"
    "{%- elif message.role == 'assistant' and message.tool_calls %}{%- set f = message.tool_calls[0].function %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n{\"name\": \"' + f.name + '\", \"parameters\": ' "
    "+ (f.arguments | tojson) + '}<|eot_id|>' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' + message.content + '<|eot_id|>' }}"
    "{%- elif message.role == 'tool' %}"
    "{{- '<|start_header_id|>ipython<|end_header_id|>\\n\\n' + message.content + '<|eot_id|>' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)

# Mistral (v3): the tools and the system prompt go before the *last* user message (so the history is rewritten each
# turn), calls after [TOOL_CALLS] as a JSON list, results in [TOOL_RESULTS] with the call's 9-character id.
MISTRAL_TOOLS_TEMPLATE = (
    "{%- set ns = namespace(last_user=-1) %}{%- for m in messages %}{%- if m.role == 'user' %}"
    "{%- set ns.last_user = loop.index0 %}{%- endif %}{%- endfor %}{{- '<s>' }}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}"
    "{%- if tools and loop.index0 == ns.last_user %}"
    "{{- '[AVAILABLE_TOOLS]' + (tools | tojson) + '[/AVAILABLE_TOOLS]' }}"
    "{%- endif %}{{- '[INST]' }}"
    "{%- if loop.index0 == ns.last_user and messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}"
    "{%- endif %}{{- message.content + '[/INST]' }}"
    "{%- elif message.role == 'assistant' and message.tool_calls %}{{- '[TOOL_CALLS][' }}"
    "{%- for call in message.tool_calls %}{%- if call.id | length != 9 %}"
    "{{- raise_exception('Tool call ids must be 9 characters') }}{%- endif %}"
    "{{- '{\"name\": \"' + call.function.name + '\", \"arguments\": ' + (call.function.arguments | tojson) + '}' }}"
    "{%- if not loop.last %}{{- ', ' }}{%- endif %}{%- endfor %}{{- ']</s>' }}"
    "{%- elif message.role == 'assistant' %}{{- message.content + '</s>' }}"
    "{%- elif message.role == 'tool' %}"
    "{{- '[TOOL_RESULTS]' + ({'content': message.content, 'call_id': message.tool_call_id} | tojson) "
    "+ '[/TOOL_RESULTS]' }}"
    "{%- endif %}{%- endfor %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOOL_TEMPLATES = {  # syntax -> (template, special tokens, end-of-turn token, start token)
    "hermes": (HERMES_TOOLS_TEMPLATE, [*SPECIAL_TOKENS, "<tool_call>", "</tool_call>"], "<|im_end|>", "<|im_start|>"),
    "llama3": (LLAMA3_TOOLS_TEMPLATE, ["<|endoftext|>", "<|begin_of_text|>", "<|start_header_id|>",
                                       "<|end_header_id|>", "<|eot_id|>", "<|python_tag|>"], "<|eot_id|>",
               "<|begin_of_text|>"),
    "mistral": (MISTRAL_TOOLS_TEMPLATE, ["<|endoftext|>", "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]",
                                         "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
                                         "[/TOOL_RESULTS]"], "</s>", "<s>"),
}

_CORPUS = [
    "You are in a kitchen. There is a fridge, a table and a closed door to the east.",
    "go north", "go south", "go east", "go west", "take apple", "open fridge", "look", "inventory",
    "take latchkey from shelf", "unlock safe with latchkey", "insert the key into the box",
    "Action: go east", "<think>I should look around first.</think>", "<action>open door</action>",
    "Invalid action: the action is empty. Reply with one short command.",
    "Choose one action by its number:\n1. go east\n2. take apple",
    "Your score has just gone up by one point. *** The End ***",
    "def add(a, b):\n    return a + b\n", "0123456789 !?.,:;'\"()[]{}<>/\\|@#$%^&*-_=+~`",
]


def train_tokenizer(directory: Path, chat_template: str = SMOLLM2_TEMPLATE, *, special_tokens: list[str] | None = None,
                    eos_token: str = "<|im_end|>", bos_token: str = "<|im_start|>"):
    """A 600-token byte-level BPE trained on a small text-game corpus, saved to ``directory``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=special_tokens or SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(_CORPUS * 20, trainer=trainer)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=eos_token, pad_token="<|endoftext|>",
                                      bos_token=bos_token, unk_token="<|endoftext|>")
    wrapped.chat_template = chat_template
    wrapped.save_pretrained(directory)
    return wrapped


def tiny_llama(vocab_size: int, seed: int = 0, **overrides):
    """A 2-layer Llama with grouped-query attention, random weights (fp32, CPU)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         tie_word_embeddings=True, **overrides)
    return LlamaForCausalLM(config).eval()


def save_tiny_policy(directory: Path) -> Path:
    """Tokenizer and model together in one folder, loadable with ``from_pretrained``."""
    tokenizer = train_tokenizer(directory)
    tiny_llama(len(tokenizer)).save_pretrained(directory)
    return directory


def signals_vocabulary() -> list[str]:
    """Every word the Signals world, the agent's default system prompt and its feedback use."""
    from turngym.agents.llm import DEFAULT_SYSTEM_PROMPT
    from turngym.envs.signals import COMMANDS, RULE

    text = " ".join([
        DEFAULT_SYSTEM_PROMPT, "Reply with one command after Action:", "Obey the traffic lights. The light is",
        "Right. Wrong. Game over. You made it through.", "Invalid action:", "system user assistant",
        *RULE, *COMMANDS,
    ])
    words = {w for w in text.replace(".", " . ").replace(":", " : ").replace(",", " , ").split() if w}
    return sorted(words - {"{format_instruction}"})


def word_tokenizer(directory: Path, words: list[str] | None = None, chat_template: str = SMOLLM2_TEMPLATE):
    """A word-level tokenizer over a small vocabulary (default: the Signals world's), saved to ``directory``.

    A tiny vocabulary gives a tiny model a fair start: the four Signals commands are 4 of ~60
    tokens, so RL has signal to learn from within seconds.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, "<unk>", *(words or signals_vocabulary())])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                      bos_token="<|im_start|>", unk_token="<unk>")
    wrapped.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS})
    wrapped.chat_template = chat_template
    wrapped.save_pretrained(directory)
    return wrapped


def scripted_signals_backend(tokenizer, tool_syntax: str | None = None):
    """A backend factory whose replies are Signals commands chosen by the episode and the turn: deterministic
    and varied (so groups have advantages), with no model in the loop. With ``tool_syntax``, each is a call of
    the ``command`` tool written in that syntax."""
    from turngym.agents.backends import ScriptedBackend
    from turngym.agents.base import stable_seed
    from turngym.agents.tool_calls import format_tool_call
    from turngym.envs.signals import COMMANDS
    from turngym.envs.tools import ToolCall

    def reply(request):
        command = COMMANDS[stable_seed(request.key, len(request.ids)) % len(COMMANDS)]
        return format_tool_call(ToolCall("command", {"command": command}), tool_syntax) if tool_syntax else command

    return lambda model: ScriptedBackend(reply, lambda text: tokenizer.encode(text, add_special_tokens=False))


def logging_generate(backend, log: list):
    """``backend`` with its ``generate`` wrapped to append every (request key, ids given, ids sampled) to ``log``."""
    generate = backend.generate

    def logged(requests, sampling, stop_ids):
        generations = generate(requests, sampling, stop_ids)
        log.extend((r.key, list(r.ids), g.ids) for r, g in zip(requests, generations, strict=True))
        return generations

    backend.generate = logged
    return backend


class OneProcess:
    """accelerate's Accelerator as the critic uses it, for one process on CPU."""

    @property
    def device(self):
        import torch

        return torch.device("cpu")

    def prepare_model(self, model):
        return model

    def unwrap_model(self, model):
        return model

    def reduce(self, tensor, reduction="sum"):
        return tensor

    def gather(self, tensor):
        return tensor.reshape(-1)
