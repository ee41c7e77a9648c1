"""Open (a false alarm under c497d626): markdown 3.6's RegistryTests shape. The test file's own ``Item`` compares by
its ``data`` and the test compares a list of ``Item``s with a list of strings; strict equality takes a ``str`` only
against a ``str``, and its judge rebuilds only the package's classes, so the untouched package fails the test."""
PKG = '''class Registry:
    def __init__(self):
        self._items = []

    def register(self, item, priority):
        self._items.append((priority, item))

    def __iter__(self):
        return iter([item for _, item in sorted(self._items, key=lambda pair: -pair[0])])
'''
TESTS = '''import unittest

from pkg import Registry


class Item:
    def __init__(self, data):
        self.data = data

    def __eq__(self, other):
        return self.data == other


class T(unittest.TestCase):
    def test_a(self):
        r = Registry()
        r.register(Item("a"), 20)
        r.register(Item("b"), 30)
        self.assertEqual(list(r), ["b", "a"])
'''
