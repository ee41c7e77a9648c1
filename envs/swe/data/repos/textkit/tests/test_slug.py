import unittest

from textkit import slugify


class TestSlugify(unittest.TestCase):
    def test_basic(self):
        self.assertEqual(slugify("Hello World"), "hello-world")

    def test_accents_are_removed(self):
        self.assertEqual(slugify("Crème brûlée"), "creme-brulee")

    def test_punctuation_collapses(self):
        self.assertEqual(slugify("a -- b ... c"), "a-b-c")

    def test_custom_separator(self):
        self.assertEqual(slugify("Hello World", sep="_"), "hello_world")

    def test_no_leading_or_trailing_separator(self):
        self.assertEqual(slugify("  !Hello!  "), "hello")

    def test_max_length(self):
        self.assertEqual(slugify("abcdef ghij", max_length=6), "abcdef")


if __name__ == "__main__":
    unittest.main()
