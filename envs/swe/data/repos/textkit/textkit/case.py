"""Converting between identifier styles, and title case."""

import re

# An upper-case run followed by a capitalised word (HTTPServer -> HTTP, Server), or a lower
# case letter or digit followed by an upper-case letter (parseURL -> parse, URL).
_ACRONYM_BOUNDARY = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD_BOUNDARY = re.compile(r"([a-z0-9])([A-Z])")

SMALL_WORDS = frozenset("a an and as at but by for in nor of on or the to with".split())


def camel_to_snake(name):
    """``parseHTTPResponse`` -> ``parse_http_response``."""
    name = _ACRONYM_BOUNDARY.sub(r"\1_\2", name)
    name = _WORD_BOUNDARY.sub(r"\1_\2", name)
    return name.replace("-", "_").lower()


def snake_to_camel(name, upper_first=False):
    """``parse_http_response`` -> ``parseHttpResponse`` (``ParseHttpResponse`` with upper_first)."""
    parts = [p for p in name.split("_") if p]
    if not parts:
        return ""
    head = parts[0].capitalize() if upper_first else parts[0].lower()
    return head + "".join(p.capitalize() for p in parts[1:])


def title_case(text):
    """Capitalise each word except small words (articles, short prepositions, conjunctions).

    The first and the last word are always capitalised.

    >>> title_case("the lord of the rings")
    'The Lord of the Rings'
    """
    words = text.split()
    result = []
    for index, word in enumerate(words):
        first_or_last = index == 0 or index == len(words) - 1
        if word.lower() in SMALL_WORDS and not first_or_last:
            result.append(word.lower())
        else:
            result.append(word[:1].upper() + word[1:])
    return " ".join(result)
