import unittest

from intervals import Interval, merge


class TestInterval(unittest.TestCase):
    def test_length(self):
        self.assertEqual(Interval(2, 5).length, 3)

    def test_contains_is_half_open(self):
        interval = Interval(1, 3)
        self.assertTrue(interval.contains(1))
        self.assertFalse(interval.contains(3))

    def test_end_before_start_is_rejected(self):
        with self.assertRaises(ValueError):
            Interval(3, 1)

    def test_overlapping_intervals(self):
        self.assertTrue(Interval(1, 4).overlaps(Interval(3, 6)))

    def test_disjoint_intervals(self):
        self.assertFalse(Interval(1, 2).overlaps(Interval(5, 6)))

    def test_intersection(self):
        self.assertEqual(Interval(1, 4).intersection(Interval(3, 6)), Interval(3, 4))


class TestMerge(unittest.TestCase):
    def test_merges_overlapping(self):
        self.assertEqual(merge([Interval(1, 3), Interval(2, 5)]), [Interval(1, 5)])

    def test_merges_touching(self):
        self.assertEqual(merge([Interval(1, 3), Interval(3, 5)]), [Interval(1, 5)])

    def test_keeps_disjoint(self):
        self.assertEqual(merge([Interval(1, 2), Interval(4, 5)]), [Interval(1, 2), Interval(4, 5)])

    def test_empty(self):
        self.assertEqual(merge([]), [])


if __name__ == "__main__":
    unittest.main()
