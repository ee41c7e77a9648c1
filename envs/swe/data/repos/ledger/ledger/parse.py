"""Parsing amounts as people write them: '1,234.50', '€ 12', '-3.10', '(12.00)'."""

import re
from decimal import Decimal, InvalidOperation

_SYMBOLS = re.compile(r"[€$£¥\s]|EUR|USD|GBP")


def parse_amount(text):
    """Parse an amount into a Decimal.

    Thousands separators and currency symbols are ignored. A leading minus or accounting
    parentheses make the amount negative.
    """
    cleaned = _SYMBOLS.sub("", text)
    negative = False
    if cleaned.startswith("(") and cleaned.endswith(")"):
        negative, cleaned = True, cleaned[1:-1]
    if cleaned.startswith("-"):
        negative, cleaned = not negative, cleaned[1:]
    if not re.fullmatch(r"\d{1,3}(,\d{3})*(\.\d+)?|\d+(\.\d+)?", cleaned):
        raise ValueError(f"not an amount: {text!r}")
    try:
        value = Decimal(cleaned.replace(",", ""))
    except InvalidOperation:
        raise ValueError(f"not an amount: {text!r}") from None
    return -value if negative else value
