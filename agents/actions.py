"""Action extraction: from a model's free text to one command, or ``None`` when there is none.

Three formats, chosen by :class:`ActionFormat`:

* ``last_line``: the last non-empty line of the reply;
* ``prefix``: the text after the last ``Action:`` (configurable) on its line;
* ``tags``: the content of the last ``<action>...</action>`` pair (configurable tag);
* ``raw``: the whole reply, for worlds that parse it themselves (the SWE world reads a fenced
  shell block from it).

``<think>...</think>`` blocks are dropped first, so reasoning never becomes the action. A reply
with no action becomes the empty string when stepped, which every turngym world answers as an
invalid action with feedback (and the optional ``invalid_action_penalty``), never a crash.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

# A <think> block (or one left open to the end): reasoning, never the action (tool calls drop it too).
THINK_BLOCK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)


class ActionFormat(str, enum.Enum):
    LAST_LINE = "last_line"
    PREFIX = "prefix"
    TAGS = "tags"
    RAW = "raw"


@dataclass(frozen=True)
class ActionParser:
    """Extracts the action from a reply. ``parse`` never raises on any string."""

    format: ActionFormat | str = ActionFormat.PREFIX
    prefix: str = "Action:"
    tag: str = "action"
    max_chars: int = 512  # an "action" longer than this is not an action

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "format", ActionFormat(self.format))
        except ValueError:
            choices = ", ".join(f.value for f in ActionFormat)
            raise ValueError(f"unknown action format {self.format!r}; choose from {choices}") from None
        if self.format is ActionFormat.PREFIX and not self.prefix.strip():
            raise ValueError("the prefix action format needs a non-empty prefix, e.g. 'Action:'")
        if self.format is ActionFormat.TAGS and not re.fullmatch(r"[A-Za-z][\w-]*", self.tag):
            raise ValueError(f"tag must be a plain XML name, got {self.tag!r}")

    def parse(self, reply: str) -> str | None:
        """The action in ``reply``, stripped, or ``None`` if it has none."""
        text = THINK_BLOCK.sub("", reply.replace("\r\n", "\n"))
        if self.format is ActionFormat.RAW:
            return text.strip() or None  # the world validates it (length, format) and gives feedback
        if self.format is ActionFormat.LAST_LINE:
            lines = [line.strip() for line in text.split("\n") if line.strip()]
            action = lines[-1] if lines else None
        elif self.format is ActionFormat.PREFIX:
            at = text.lower().rfind(self.prefix.lower())
            action = text[at + len(self.prefix) :].split("\n", 1)[0].strip() if at >= 0 else None
        else:
            found = re.findall(rf"<{self.tag}>(.*?)</{self.tag}>", text, re.DOTALL | re.IGNORECASE)
            action = found[-1].strip() if found else None
        if not action or len(action) > self.max_chars:
            return None
        return action.strip("`\"' ") or None

    def instruction(self) -> str:
        """One sentence telling the model the expected format (for the system prompt)."""
        if self.format is ActionFormat.LAST_LINE:
            return "Reply with your command alone on the last line."
        if self.format is ActionFormat.PREFIX:
            return f"End your reply with one line of the form '{self.prefix} <command>'."
        if self.format is ActionFormat.RAW:
            return "Follow the format the world asks for."
        return f"Put your command between <{self.tag}> and </{self.tag}>."
