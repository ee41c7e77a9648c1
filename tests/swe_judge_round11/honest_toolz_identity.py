"""Issue 42, gold runs on toolz 0.12.1 (after round 11's attacks): a package object holding a function made inside
the test, through a ``functools.partial`` (toolz's ``curry``), and a plain ``object()`` sentinel (its ``compose``):
both compared by identity, which the judge could not rebuild (opaque stand-ins said no). And the test's
``assert not (f == g)`` on a disputed pair failed at once: a pair went to the judge before the comparison ran, its
``==`` taken as True. PKG is the untouched package, AGENT the agent's version of it, TESTS its test; the test must
pass on PKG."""
PKG = '''import functools


class Curried:
    def __init__(self, func, *args, **kwargs):
        self._partial = functools.partial(func, *args, **kwargs)

    def __eq__(self, other):
        return (isinstance(other, Curried) and self._partial.func == other._partial.func
                and self._partial.args == other._partial.args and self._partial.keywords == other._partial.keywords)

    __hash__ = None


class Pair:
    def __init__(self, first, second):
        self.first, self.second = first, second

    def __eq__(self, other):
        return isinstance(other, Pair) and self.first == other.first and self.second == other.second

    __hash__ = None
'''
AGENT = PKG
TESTS = '''from pkg import Curried, Pair


def test_a():
    def foo(a, b, c=1):
        return a + b + c

    assert Curried(foo, 1, c=2) == Curried(foo, 1, c=2)
    assert not (Curried(foo, 1, c=2) == Curried(foo, 1, c=3))
    sentinel = object()
    assert Pair(foo, sentinel) == Pair(foo, sentinel)
    assert not Pair(foo, sentinel) == Pair(sentinel, foo)
'''
PYTEST = True
