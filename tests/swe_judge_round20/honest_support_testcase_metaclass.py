"""Round 20: markdown 3.6's LegacyTestCase (markdown/test_tools.py, a support file): a unittest TestCase whose
metaclass makes one test per case, imported by the test file, so pytest collects it there and sets its xunit
fixtures on it. The grading passes on the untouched package (it was void: the class was looked up only in the test
modules)."""
PYTEST = True
ID = "tests/test_pkg.py::TestBasic::test_a"
PKG = '''def double(x):
    return 2 * x
'''
FILES = {"pkg/test_tools.py": '''import unittest


class LegacyTestMeta(type):
    def __new__(cls, name, bases, dct):
        def generate_test(given, expected):
            def test(self):
                from pkg import double
                self.assertEqual(double(given), expected)
            return test

        for case, (given, expected) in dct.get("cases", {}).items():
            if case in dct.get("exclude", ()):
                dct["test_" + case] = unittest.skip("Excluded")(lambda: None)
            else:
                dct["test_" + case] = generate_test(given, expected)
        return type.__new__(cls, name, bases, dct)


class LegacyTestCase(unittest.TestCase, metaclass=LegacyTestMeta):
    """One test per case of the subclass's ``cases``."""
'''}
TESTS = '''from pkg.test_tools import LegacyTestCase


class TestBasic(LegacyTestCase):
    cases = {"a": (2, 4), "b": (3, 6), "c": (4, 0)}
    exclude = ["c"]
'''
SUPPORT = ["pkg/test_tools.py"]
