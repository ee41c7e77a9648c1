"""Gold on pyparsing (after 6fc6ca3): unittest runs ``runTest`` only in a class without ``test*`` methods
(pyparsing's test_simple_unit.py: each class lists cases, the base's runTest checks them). The runner's canaries
were written into the class as two ``test*`` methods, so runTest was no longer collected and every such test
errored. Fix: a runTest's canaries are two subclasses, each with a runTest that runs the test's through super()."""
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
ID = "tests.test_pkg.TestMore.runTest"
