"""Invoices: lines, discount, tax and total."""

from dataclasses import dataclass, field
from decimal import Decimal

from ledger.money import Money, round_cents, to_decimal


@dataclass
class Line:
    description: str
    unit_price: Money
    quantity: int = 1

    @property
    def total(self):
        return self.unit_price * self.quantity


@dataclass
class Invoice:
    """An invoice in one currency. ``tax_rate`` and ``discount`` are fractions (0.2 is 20 %)."""

    currency: str = "EUR"
    tax_rate: Decimal = Decimal("0")
    discount: Decimal = Decimal("0")
    lines: list = field(default_factory=list)

    def add(self, description, unit_price, quantity=1):
        if quantity < 1:
            raise ValueError("quantity must be at least 1")
        self.lines.append(Line(description, Money(unit_price, self.currency), quantity))
        return self

    def subtotal(self):
        total = Money(0, self.currency)
        for line in self.lines:
            total = total + line.total
        return total

    def discounted(self):
        return self.subtotal() * (1 - to_decimal(self.discount))

    def tax(self):
        return Money(round_cents(self.discounted().amount * to_decimal(self.tax_rate)), self.currency)

    def total(self):
        """Discounted subtotal plus tax, rounded to cents."""
        return (self.discounted() + self.tax()).rounded()
