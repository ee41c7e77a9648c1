import unittest
from decimal import Decimal

from ledger import Money


class TestMoney(unittest.TestCase):
    def test_addition(self):
        self.assertEqual(Money("1.10") + Money("2.20"), Money("3.30"))

    def test_currency_mismatch(self):
        with self.assertRaises(ValueError):
            Money("1", "EUR") + Money("1", "USD")

    def test_multiplication(self):
        self.assertEqual(Money("2.50") * 3, Money("7.50"))

    def test_rounding_to_cents(self):
        self.assertEqual(Money("2.344").rounded(), Money("2.34"))

    def test_format(self):
        self.assertEqual(Money("1234.5").format(), "1,234.50 EUR")

    def test_amount_is_decimal(self):
        self.assertIsInstance(Money(3).amount, Decimal)


class TestAllocate(unittest.TestCase):
    def test_even_split(self):
        self.assertEqual(Money("90").allocate([1, 1, 1]), [Money("30")] * 3)

    def test_weighted_split(self):
        self.assertEqual(Money("100").allocate([3, 1]), [Money("75"), Money("25")])

    def test_invalid_ratios(self):
        with self.assertRaises(ValueError):
            Money("10").allocate([0, 0])


if __name__ == "__main__":
    unittest.main()
