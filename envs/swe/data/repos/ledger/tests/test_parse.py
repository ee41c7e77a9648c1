import unittest
from decimal import Decimal

from ledger import parse_amount


class TestParseAmount(unittest.TestCase):
    def test_plain(self):
        self.assertEqual(parse_amount("12.50"), Decimal("12.50"))

    def test_thousands(self):
        self.assertEqual(parse_amount("1,234.50"), Decimal("1234.50"))

    def test_currency_symbol(self):
        self.assertEqual(parse_amount("€ 12"), Decimal("12"))

    def test_negative(self):
        self.assertEqual(parse_amount("-3.10"), Decimal("-3.10"))

    def test_garbage(self):
        with self.assertRaises(ValueError):
            parse_amount("twelve")

    def test_misplaced_separator(self):
        with self.assertRaises(ValueError):
            parse_amount("12,34")


if __name__ == "__main__":
    unittest.main()
