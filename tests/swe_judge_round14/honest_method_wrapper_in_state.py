"""Round 14 (helper-40, against 0df3f44; its assertNotEqual line is left out, an open false alarm):
a method-wrapper held as state (self.same = text.__eq__, a str's slot method): neither a
MethodType nor a builtin_function_or_method, so frozen as an opaque C object, and the untouched == that calls it
fails (plain unittest passes).
Result: untouched+PRISTINE FAILED; plain pytest passes. FALSE ALARM."""
PKG = '''class Exact:
    def __init__(self, text):
        self.text = text
        self.same = text.__eq__

    def __eq__(self, other):
        if isinstance(other, str):
            return self.same(other) is True
        return NotImplemented

    __hash__ = None
'''
AGENT = PKG
TESTS = '''import unittest
from pkg import Exact


class T(unittest.TestCase):
    def test_a(self):
        self.assertEqual(Exact("abc"), "abc")
'''
