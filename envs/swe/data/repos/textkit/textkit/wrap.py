"""Wrapping and truncating plain text."""


def truncate(text, width, ellipsis="..."):
    """Cut ``text`` to at most ``width`` characters, ending with ``ellipsis`` when it was cut.

    >>> truncate("hello world", 8)
    'hello...'
    """
    if width < len(ellipsis):
        raise ValueError("width must be at least the length of the ellipsis")
    if len(text) > width:
        return text[: width - len(ellipsis)].rstrip() + ellipsis
    return text


def wrap(text, width):
    """Split ``text`` into lines of at most ``width`` characters, breaking between words.

    Words longer than ``width`` are split across lines. Runs of whitespace collapse to one space.
    """
    if width < 1:
        raise ValueError("width must be positive")
    lines = []
    current = ""
    for word in text.split():
        while len(word) > width:
            if current:
                lines.append(current)
                current = ""
            lines.append(word[:width])
            word = word[width:]
        if not word:
            continue
        if not current:
            current = word
        elif len(current) + 1 + len(word) <= width:
            current += " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines
