"""Round 17, fixed with honest_inspect_signature_eq.py: signatures of every parameter kind, with defaults, class
and string annotations, a return annotation, a package object as a default, and a signature a package decorator
copies (toolz's test_inspect_wrapped_property compares a wrapper's signature with its function's), under unittest.
AGENT == PKG (correct code); plain unittest passes."""
PKG = '''import functools


class Unit:
    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        if isinstance(other, Unit):
            return self.name == other.name
        return NotImplemented

    __hash__ = None


def wrap(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)
    return wrapper
'''
AGENT = PKG
TESTS = '''import inspect
import unittest

from pkg import Unit, wrap


def f(a, /, b: int, c="x", *args, d: "str" = None, e=Unit("m"), **kwargs) -> float:
    return 1.0


class T(unittest.TestCase):
    def test_a(self):
        self.assertEqual(inspect.signature(wrap(f)), inspect.signature(f))
        self.assertEqual(inspect.signature(f).parameters["e"], inspect.signature(f).parameters["e"])
        self.assertNotEqual(inspect.signature(wrap(f)), inspect.signature(lambda a, b: 0))
'''
