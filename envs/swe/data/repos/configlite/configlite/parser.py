"""Parse INI-style text into ``{section: {key: value}}``.

    [server]
    host = example.org      # comments start with '#' or ';'
    motd = "hello # world"  # quotes keep '#' and spaces

Keys before the first section go to the ``"default"`` section. Keys are lower-cased.
"""


class ParseError(ValueError):
    def __init__(self, message, line_number):
        super().__init__(f"line {line_number}: {message}")
        self.line_number = line_number


def strip_comment(value):
    """Remove a trailing '#' or ';' comment that is not inside double quotes."""
    in_quotes = False
    for index, char in enumerate(value):
        if char == '"':
            in_quotes = not in_quotes
        elif char in "#;" and not in_quotes:
            return value[:index]
    return value


def unquote(value):
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1].replace('\\"', '"')
    return value


def parse(text):
    config = {"default": {}}
    section = config["default"]
    for line_number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            if not line.endswith("]") or len(line) < 3:
                raise ParseError(f"bad section header {line!r}", line_number)
            section = config.setdefault(line[1:-1].strip().lower(), {})
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ParseError(f"expected 'key = value', got {line!r}", line_number)
        section[key.strip().lower()] = unquote(strip_comment(value).strip())
    return config
