"""Round 21 (pytest): a ``unittest.TestCase`` with passing subtests and an ``IsolatedAsyncioTestCase``, run by
pytest (whose harnesses run ``TestCase.run``): no ``_ShouldStop`` leaves a part, nothing is written as an error, and
the grading passes on the untouched package."""
PYTEST = True
ID = "tests/test_pkg.py::T::test_a"
PKG = '''def double(x):
    return 2 * x
'''
TESTS = '''import asyncio
import unittest

from pkg import double


class T(unittest.TestCase):
    def test_a(self):
        for given in (1, 2, 3):
            with self.subTest(given=given):
                self.assertEqual(double(given), 2 * given)


class A(unittest.IsolatedAsyncioTestCase):
    async def test_async(self):
        await asyncio.sleep(0)
        self.assertEqual(double(2), 4)
'''
