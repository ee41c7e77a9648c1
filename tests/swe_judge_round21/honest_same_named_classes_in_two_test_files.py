"""Round 21: two test files of the suite each have a class ``T`` with a ``test_a`` (and the graded file subclasses a
base of a third file); the graded class is its file's alone, and the grading passes on the untouched package."""
ID = "tests.test_pkg.T.test_a"
PKG = '''def double(x):
    return 2 * x
'''
FILES = {"tests/test_legacy.py": '''import unittest


class T(unittest.TestCase):
    def test_a(self):
        self.assertEqual(str(2), "2")
''', "tests/base.py": '''import unittest


class Base(unittest.TestCase):
    def setUp(self):
        self.given = 2

    def test_inherited(self):
        self.assertEqual(self.given, 2)
'''}
TESTS = '''from pkg import double
from tests import test_legacy
from tests.base import Base


class T(Base):
    def test_a(self):
        self.assertEqual(double(self.given), 4)
        self.assertTrue(test_legacy.T)
'''
