"""Round 21: tests decorated by the standard library's test decorators, stacked (``mock.patch.dict``,
``mock.patch``, ``mock.patch.object``, a ``contextlib.contextmanager`` used as a decorator, ``unittest.skipIf``
that does not skip), and a class decorated by ``mock.patch.dict``: each wrapper calls the function in the cell its
code reads, and the grading passes on the untouched package."""
ID = "tests.test_pkg.T.test_a"
PKG = '''import os


def double(x):
    return 2 * x if os.environ.get("PKG_MODE") == "fast" else x + x
'''
TESTS = '''import contextlib
import os
import unittest
from unittest import mock

import pkg
from pkg import double


@contextlib.contextmanager
def quiet():
    yield


@mock.patch.dict("os.environ", {"PKG_CLASS": "1"})
class Patched(unittest.TestCase):
    def test_class_patched(self):
        self.assertEqual(os.environ["PKG_CLASS"], "1")


class T(unittest.TestCase):
    @unittest.skipIf(False, "never")
    @quiet()
    @mock.patch.object(pkg, "VERSION", "1.0", create=True)
    @mock.patch("os.sep", "/")
    @mock.patch.dict("os.environ", {"PKG_MODE": "fast"})
    def test_a(self):
        self.assertEqual(double(2), 4)
        self.assertEqual(pkg.VERSION, "1.0")
'''
