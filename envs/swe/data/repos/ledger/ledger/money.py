"""Money: an exact decimal amount in one currency."""

from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def to_decimal(value):
    """An exact Decimal from an int, a str, a Decimal or a float (through its shortest repr)."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    return Decimal(value)


def round_cents(amount):
    """Round half up to whole cents, as invoices do (2.675 -> 2.68, 0.125 -> 0.13)."""
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


class Money:
    __slots__ = ("amount", "currency")

    def __init__(self, amount, currency="EUR"):
        self.amount = to_decimal(amount)
        self.currency = currency

    def _check(self, other):
        if not isinstance(other, Money):
            raise TypeError(f"cannot combine Money with {type(other).__name__}")
        if other.currency != self.currency:
            raise ValueError(f"currency mismatch: {self.currency} and {other.currency}")

    def __add__(self, other):
        self._check(other)
        return Money(self.amount + other.amount, self.currency)

    def __sub__(self, other):
        self._check(other)
        return Money(self.amount - other.amount, self.currency)

    def __mul__(self, factor):
        return Money(self.amount * to_decimal(factor), self.currency)

    __rmul__ = __mul__

    def __eq__(self, other):
        return isinstance(other, Money) and (self.amount, self.currency) == (other.amount, other.currency)

    def __hash__(self):
        return hash((self.amount, self.currency))

    def __repr__(self):
        return f"Money('{self.amount}', '{self.currency}')"

    def rounded(self):
        return Money(round_cents(self.amount), self.currency)

    def allocate(self, ratios):
        """Split into parts proportional to ``ratios``, in whole cents, losing nothing.

        The cents left over by rounding down go one each to the first parts.

        >>> Money("100").allocate([1, 1, 1])
        [Money('33.34', 'EUR'), Money('33.33', 'EUR'), Money('33.33', 'EUR')]
        """
        if not ratios or any(r < 0 for r in ratios) or sum(ratios) == 0:
            raise ValueError("ratios must be non-negative and not all zero")
        total_cents = int(round_cents(self.amount) / CENT)
        shares = [total_cents * r // sum(ratios) for r in ratios]
        for index in range(total_cents - sum(shares)):
            shares[index] += 1
        return [Money(Decimal(share) * CENT, self.currency) for share in shares]

    def format(self):
        """``1234.5`` -> ``'1,234.50 EUR'``."""
        return f"{round_cents(self.amount):,.2f} {self.currency}"
