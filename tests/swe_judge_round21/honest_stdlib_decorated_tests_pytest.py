"""Round 21 (pytest): test functions decorated by the standard library's test decorators, stacked (``mock.patch.dict``,
``mock.patch``, ``mock.patch.object``, a ``contextlib.contextmanager`` used as a decorator, ``unittest.skipIf``
that does not skip: on the class), and a class decorated by ``mock.patch.dict``: each wrapper calls the function in the cell its
code reads, and the grading passes on the untouched package."""
ID = "tests/test_pkg.py::test_a"
PYTEST = True
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


@quiet()
@mock.patch.object(pkg, "VERSION", "1.0", create=True)
@mock.patch("os.sep", "/")
@mock.patch.dict("os.environ", {"PKG_MODE": "fast"})
def test_a():
    assert double(2) == 4
    assert pkg.VERSION == "1.0"
'''
