"""Round 21: tests the graded class's own file makes at run time and sets under names its class body never binds
(a closure of a factory there, ``setattr`` at its module level), and a module function of that file set as a test:
made by the class's own file, they stand; the grading passes on the untouched package."""
ID = "tests.test_pkg.T.test_double_2"
PKG = '''def double(x):
    return 2 * x
'''
TESTS = '''import unittest

from pkg import double


class T(unittest.TestCase):
    def test_plain(self):
        self.assertEqual(double(1), 2)


def _make(given, expected):
    def test(self):
        self.assertEqual(double(given), expected)
    return test


def check_zero(self):
    self.assertEqual(double(0), 0)


for _given in (2, 3):
    setattr(T, "test_double_%d" % _given, _make(_given, 2 * _given))
T.test_zero = check_zero
'''
