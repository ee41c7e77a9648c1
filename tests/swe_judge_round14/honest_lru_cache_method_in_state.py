"""Round 14 (helper-40, against 0df3f44; its assertNotEqual line is left out, an open false alarm):
: a bound method of an lru_cache-decorated method held as state (self.norm = self._fold):
MethodType(functools._lru_cache_wrapper, self); its function, an instance of a C type, is frozen opaque, and the
untouched == that calls it fails (plain unittest passes).
Result: untouched+PRISTINE FAILED; plain pytest passes. FALSE ALARM."""
PKG = '''import functools


class Name:
    def __init__(self, text):
        self.norm = self._fold
        self.value = self.norm(text)

    @functools.lru_cache(maxsize=None)
    def _fold(self, s):
        return s.casefold()

    def __eq__(self, other):
        if isinstance(other, str):
            return self.norm(other) == self.value
        return NotImplemented

    __hash__ = object.__hash__
'''
AGENT = PKG
TESTS = '''import unittest
from pkg import Name


class T(unittest.TestCase):
    def test_a(self):
        self.assertEqual(Name("ABC"), "abc")
'''
