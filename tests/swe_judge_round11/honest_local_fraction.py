"""Issue 42, gold runs on cachetools 5.3.3 (after round 10): a class the test makes inside its function (a Fraction
subclass with its own ``__add__``, as cachetools' ``test_weakref``), compared with ints; the judge had nothing to look
up and stood an opaque object in. PKG is the untouched package, AGENT the agent's version of it, TESTS its test; the
test must pass on PKG."""
PKG = '''class Counter:
    def __init__(self, start):
        self.count = start

    def next(self):
        self.count = self.count + 1
        return self.count
'''
AGENT = PKG
TESTS = '''import unittest

from pkg import Counter


class T(unittest.TestCase):
    def test_a(self):
        import fractions

        class Int(fractions.Fraction):
            def __add__(self, other):
                return Int(fractions.Fraction.__add__(self, other))

        counter = Counter(Int(0))
        self.assertEqual(counter.next(), 1)
        self.assertEqual(counter.next(), 2)
'''
