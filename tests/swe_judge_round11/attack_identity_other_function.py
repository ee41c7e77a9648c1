"""Issue 42, gold runs on toolz 0.12.1: a function made inside the test stands in the judge as an object equal to
itself only; the package hands back a partial of *another* local function of the same name. PKG is the untouched
package, AGENT the agent's version of it, TESTS its test; the test must fail on AGENT and pass on PKG."""
PKG = '''import functools


class Curried:
    def __init__(self, func, *args):
        self._partial = functools.partial(func, *args)

    def __eq__(self, other):
        return isinstance(other, Curried) and self._partial.func == other._partial.func \\
            and self._partial.args == other._partial.args

    __hash__ = None


def curry(func, *args):
    return Curried(func, *args)
'''
AGENT = PKG.replace("def curry(func, *args):\n    return Curried(func, *args)", """def curry(func, *args):
    def foo(a, b):
        return a
    foo.__qualname__ = func.__qualname__
    return Curried(foo, *args)""")
TESTS = '''from pkg import Curried, curry


def test_a():
    def foo(a, b):
        return a + b

    assert curry(foo, 1) == Curried(foo, 1)
'''
PYTEST = True
