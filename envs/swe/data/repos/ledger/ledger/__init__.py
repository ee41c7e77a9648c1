"""ledger: money amounts, invoices and amount parsing."""

from ledger.invoice import Invoice, Line
from ledger.money import Money
from ledger.parse import parse_amount

__all__ = ["Invoice", "Line", "Money", "parse_amount"]
