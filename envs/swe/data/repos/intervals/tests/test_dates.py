import datetime
import unittest

from intervals import add_months, business_days

D = datetime.date


class TestAddMonths(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(add_months(D(2024, 3, 15), 2), D(2024, 5, 15))

    def test_across_year_end(self):
        self.assertEqual(add_months(D(2023, 11, 10), 3), D(2024, 2, 10))

    def test_backwards(self):
        self.assertEqual(add_months(D(2024, 1, 10), -1), D(2023, 12, 10))


class TestBusinessDays(unittest.TestCase):
    def test_one_week(self):
        # Monday 2024-06-03 to Monday 2024-06-10: five working days
        self.assertEqual(business_days(D(2024, 6, 3), D(2024, 6, 10)), 5)

    def test_weekend_only(self):
        self.assertEqual(business_days(D(2024, 6, 8), D(2024, 6, 10)), 0)

    def test_holidays(self):
        self.assertEqual(business_days(D(2024, 6, 3), D(2024, 6, 10), holidays=[D(2024, 6, 5)]), 4)

    def test_reversed_range_is_negative(self):
        self.assertEqual(business_days(D(2024, 6, 10), D(2024, 6, 3)), -5)


if __name__ == "__main__":
    unittest.main()
