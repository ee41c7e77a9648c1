"""Validation of the scale set under 475101b (cachetools' test_pickle and test_pickle_maxsize failed on the gold
patch, now and then): a large cache holding a function (its timer) whose == reorders its entries as it reads them
(an LRU's). With a function in the table, 475101b probed every pair on rebuilds of its own, and a cache of
thousands of entries ran past the rebuild budget, so the honest pair was refused. Now the judge rebuilds afresh only
when a call changed what the pair holds, and an ordered dict's new order is no change."""
PKG = '''import collections
import time


class Cache:
    def __init__(self, items):
        self.timer = time.monotonic
        self.order = collections.OrderedDict((key, None) for key in items)
        self.data = dict(items)

    def __getitem__(self, key):
        self.order.move_to_end(key)
        return self.data[key]

    def __eq__(self, other):
        if isinstance(other, dict):
            return self.timer() > 0 and len(other) == len(self.data) and all(
                key in self.data and self[key] == value for key, value in other.items())
        return NotImplemented

    __hash__ = None


def cache(items):
    return Cache(items)
'''
AGENT = PKG
TESTS = '''import unittest
from pkg import cache


class T(unittest.TestCase):
    def test_a(self):
        items = {i: str(i) for i in range(20000)}
        self.assertEqual(cache(items), items)
'''
