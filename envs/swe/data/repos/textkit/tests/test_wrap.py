import unittest

from textkit import truncate, wrap


class TestTruncate(unittest.TestCase):
    def test_short_text_is_unchanged(self):
        self.assertEqual(truncate("hello", 10), "hello")

    def test_long_text_is_cut_with_ellipsis(self):
        self.assertEqual(truncate("hello world", 8), "hello...")

    def test_custom_ellipsis(self):
        self.assertEqual(truncate("abcdefghij", 5, ellipsis="~"), "abcd~")

    def test_width_smaller_than_ellipsis(self):
        with self.assertRaises(ValueError):
            truncate("hello", 2)


class TestWrap(unittest.TestCase):
    def test_wraps_between_words(self):
        self.assertEqual(wrap("the quick brown fox", 10), ["the quick", "brown fox"])

    def test_collapses_whitespace(self):
        self.assertEqual(wrap("a   b\n\nc", 80), ["a b c"])

    def test_empty_text(self):
        self.assertEqual(wrap("", 10), [])

    def test_width_must_be_positive(self):
        with self.assertRaises(ValueError):
            wrap("a", 0)


if __name__ == "__main__":
    unittest.main()
