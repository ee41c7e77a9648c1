import unittest
from decimal import Decimal

from ledger import Invoice, Money


class TestInvoice(unittest.TestCase):
    def test_subtotal(self):
        invoice = Invoice().add("pen", "1.50", 4).add("pad", "3.00")
        self.assertEqual(invoice.subtotal(), Money("9.00"))

    def test_tax(self):
        invoice = Invoice(tax_rate=Decimal("0.2")).add("book", "10.00")
        self.assertEqual(invoice.tax(), Money("2.00"))
        self.assertEqual(invoice.total(), Money("12.00"))

    def test_quantity_must_be_positive(self):
        with self.assertRaises(ValueError):
            Invoice().add("nothing", "1.00", 0)


if __name__ == "__main__":
    unittest.main()
