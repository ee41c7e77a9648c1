"""Round 14: run_test_whole_module under a wrong add fails (its canaries fail beside it)."""
PKG = '''def add(a, b):
    return a + b
'''
AGENT = PKG.replace("a + b", "a - b")
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
