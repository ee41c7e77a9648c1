import unittest

from textkit import camel_to_snake, snake_to_camel, title_case


class TestCamelToSnake(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(camel_to_snake("parseResponse"), "parse_response")

    def test_pascal_case(self):
        self.assertEqual(camel_to_snake("ParseResponse"), "parse_response")

    def test_digits(self):
        self.assertEqual(camel_to_snake("utf8Decode"), "utf8_decode")


class TestSnakeToCamel(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(snake_to_camel("parse_http_response"), "parseHttpResponse")

    def test_upper_first(self):
        self.assertEqual(snake_to_camel("parse_response", upper_first=True), "ParseResponse")

    def test_empty(self):
        self.assertEqual(snake_to_camel("__"), "")


class TestTitleCase(unittest.TestCase):
    def test_small_words_stay_lower_in_the_middle(self):
        self.assertEqual(title_case("war and peace"), "War and Peace")

    def test_capitalises_words(self):
        self.assertEqual(title_case("brave new world"), "Brave New World")


if __name__ == "__main__":
    unittest.main()
