"""Round 14 (helper-40, against 0df3f44; its assertNotEqual line is left out, an open false alarm):
a bound *class* method held as state (self.norm = self._fold, _fold a @classmethod). Frozen as
("bound", function, class): the function's name Exact._fold leads to the classmethod object in the class dict, not
to the function, so it is frozen as an identity stand-in, and the untouched == that calls it fails.
Result: untouched+PRISTINE FAILED (== says they differ; != says equal); plain pytest passes. FALSE ALARM."""
PKG = '''class Name:
    def __init__(self, text):
        self.norm = self._fold
        self.value = self.norm(text)

    @classmethod
    def _fold(cls, s):
        return s.casefold()

    def __eq__(self, other):
        if isinstance(other, str):
            return self.norm(other) == self.value
        return NotImplemented

    __hash__ = None
'''
AGENT = PKG
TESTS = '''import unittest
from pkg import Name


class T(unittest.TestCase):
    def test_a(self):
        self.assertEqual(Name("ABC"), "abc")
'''
