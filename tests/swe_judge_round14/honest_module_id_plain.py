"""Round 14 (helper-40, against 0df3f44): a whole-module unittest id (tests.test_pkg) of a plain passing class
errored ("the test process ended abnormally", under 6fc6ca3 too): the step of a whole module with nothing left out
was an empty line, which the child read as the end of its steps; and the module's own class was left out with the
canaries' names. Fixed: an empty line is a step; only names the file did not have are left out."""
PKG = '''def add(a, b):
    return a + b
'''
AGENT = PKG
TESTS = '''import unittest
from pkg import add


class Cases(unittest.TestCase):
    def test_one(self):
        self.assertEqual(add(1, 2), 3)
'''
ID = "tests.test_pkg"
