import unittest

from intervals import paginate


class TestPaginate(unittest.TestCase):
    def test_first_page(self):
        page = paginate(list(range(30)), 1, per_page=10)
        self.assertEqual(page.items, list(range(10)))
        self.assertEqual(page.pages, 3)
        self.assertTrue(page.has_next)
        self.assertFalse(page.has_previous)

    def test_exact_fit(self):
        page = paginate(list(range(20)), 2, per_page=10)
        self.assertEqual(page.items, list(range(10, 20)))
        self.assertFalse(page.has_next)

    def test_empty_sequence_has_one_page(self):
        self.assertEqual(paginate([], 1).items, [])

    def test_out_of_range(self):
        with self.assertRaises(IndexError):
            paginate(list(range(5)), 2, per_page=5)


if __name__ == "__main__":
    unittest.main()
