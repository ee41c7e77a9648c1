"""Round 14: module_id_plain under a wrong add fails (its canaries fail beside it)."""
PKG = '''def add(a, b):
    return a + b
'''
AGENT = PKG.replace("a + b", "a - b")
TESTS = '''import unittest
from pkg import add


class Cases(unittest.TestCase):
    def test_one(self):
        self.assertEqual(add(1, 2), 3)
'''
ID = "tests.test_pkg"
