"""Round 14 (helper-40, against 0df3f44): a whole-module unittest id of a module of runTest classes: as the plain
module id, and no class of it had test* methods for the canaries to copy, so it passed without canaries
(TAMPERED). Fixed: its first runTest class gets runTest canaries."""
PKG = '''def add(a, b):
    return a + b
'''
AGENT = PKG
TESTS = '''import unittest
from pkg import add


class Cases(unittest.TestCase):
    cases = [((1, 2), 3)]

    def runTest(self):
        for args, want in self.cases:
            self.assertEqual(add(*args), want)


class TestMore(Cases):
    cases = [((2, 2), 4), ((0, 5), 5)]
'''
ID = "tests.test_pkg"
