"""Gold on pyparsing (after 6fc6ca3): a package object that keeps bound methods as state. pyparsing's Word holds
``self.parseImpl = self.parseImpl_regex`` (a Python method) and ``self.re_match = self.re.match`` (a C method of a
compiled pattern); the freezer had no node for either, so the judge stood an opaque object in for each and the
untouched ``==`` failed on it. Fix: a bound Python method is frozen as its function (looked up by name in the
untouched package) and its object, a bound C method as its object and name (the judge takes the C type's method
descriptor, never getattr)."""
PKG = '''import re


class Exact:
    def __init__(self, text):
        self.text = text
        self.items = []
        self.add = self.items.append
        self.check = self._full
        self.find = re.compile(re.escape(text)).fullmatch

    def _full(self, other):
        return self.find(other) is not None

    def __eq__(self, other):
        if isinstance(other, str):
            self.add(other)
            return self.check(other)
        if isinstance(other, Exact):
            return self.text == other.text
        return NotImplemented

    __hash__ = None
'''
AGENT = PKG
TESTS = '''import unittest
from pkg import Exact


class T(unittest.TestCase):
    def test_a(self):
        self.assertEqual(Exact("abc"), "abc")
        self.assertNotEqual(Exact("abc"), "abd")
'''
