import unittest

from configlite import to_bool, to_int, to_list


class TestToBool(unittest.TestCase):
    def test_true_values(self):
        for text in ("1", "true", "Yes", "ON"):
            self.assertIs(to_bool(text), True)

    def test_bool_passes_through(self):
        self.assertIs(to_bool(True), True)

    def test_garbage(self):
        with self.assertRaises(ValueError):
            to_bool("maybe")


class TestToInt(unittest.TestCase):
    def test_plain(self):
        self.assertEqual(to_int(" 42 "), 42)

    def test_hex_and_underscores(self):
        self.assertEqual(to_int("0x1F"), 31)
        self.assertEqual(to_int("1_000"), 1000)

    def test_bounds(self):
        with self.assertRaises(ValueError):
            to_int("5", minimum=10)


class TestToList(unittest.TestCase):
    def test_split(self):
        self.assertEqual(to_list("a, b,,c"), ["a", "b", "c"])

    def test_separator(self):
        self.assertEqual(to_list("a:b", separator=":"), ["a", "b"])


if __name__ == "__main__":
    unittest.main()
