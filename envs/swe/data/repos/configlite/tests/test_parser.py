import unittest

from configlite import ParseError, parse

SAMPLE = """
# global settings
name = demo

[server]
host = example.org
port = 8080   ; the public port

[paths]
root = "/srv/my app"
"""


class TestParse(unittest.TestCase):
    def test_default_section(self):
        self.assertEqual(parse(SAMPLE)["default"], {"name": "demo"})

    def test_sections(self):
        self.assertEqual(parse(SAMPLE)["server"], {"host": "example.org", "port": "8080"})

    def test_quoted_value_keeps_spaces(self):
        self.assertEqual(parse(SAMPLE)["paths"]["root"], "/srv/my app")

    def test_keys_are_lower_cased(self):
        self.assertEqual(parse("[A]\nKey = v")["a"], {"key": "v"})

    def test_missing_equals_sign(self):
        with self.assertRaises(ParseError):
            parse("[a]\njust words")

    def test_bad_section_header(self):
        with self.assertRaises(ParseError):
            parse("[unclosed")


if __name__ == "__main__":
    unittest.main()
