"""Round 14 (helper-40, against 0df3f44) (honest): the round-14 runTest scenario graded by its class id (tests.test_pkg.TestMore): the class has no
test* def, so its canaries are plain test* methods inserted into it, which hide runTest. Result: ERROR (also under
6fc6ca3); plain `python -m unittest tests.test_pkg.TestMore` passes. FALSE ALARM."""
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
ID = "tests.test_pkg.TestMore"
