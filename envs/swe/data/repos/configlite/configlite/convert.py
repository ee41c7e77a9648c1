"""Typed reading of configuration values."""

TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off", ""})


def to_bool(value):
    """'yes', 'true', 'on', '1' -> True; 'no', 'false', 'off', '0', '' -> False; else ValueError."""
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in TRUE:
        return True
    if lowered in FALSE:
        return False
    raise ValueError(f"not a boolean: {value!r}")


def to_int(value, minimum=None, maximum=None):
    """An int, optionally checked against bounds; accepts '1_000' and '0x1F'."""
    number = int(str(value).strip(), 0)
    if minimum is not None and number < minimum:
        raise ValueError(f"{number} is below the minimum {minimum}")
    if maximum is not None and number > maximum:
        raise ValueError(f"{number} is above the maximum {maximum}")
    return number


def to_list(value, separator=","):
    """'a, b,,c' -> ['a', 'b', 'c'] (empty items dropped)."""
    return [item.strip() for item in str(value).split(separator) if item.strip()]
