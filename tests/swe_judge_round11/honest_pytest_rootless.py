"""Issue 42, gold runs on cachetools 5.3.3 (after round 10): the same in a test folder without __init__.py, whose module pytest names test_pkg, not tests.test_pkg. PKG is the untouched package, AGENT the
agent's version of it, TESTS its test; the test must pass on PKG."""
PKG = '''
import collections.abc, time

class _Timer:
    def __init__(self, timer):
        self.__timer = timer
    def __call__(self):
        return self.__timer()

class Cache(collections.abc.MutableMapping):
    def __init__(self, maxsize, timer=time.monotonic):
        self.__data = {}
        self.__timer = _Timer(timer)
        self.maxsize = maxsize
    def __getitem__(self, key):
        return self.__data[key]
    def __setitem__(self, key, value):
        self.__data[key] = (value, self.__timer())[0]
    def __delitem__(self, key):
        del self.__data[key]
    def __iter__(self):
        self.__timer()
        return iter(self.__data)
    def __len__(self):
        return len(self.__data)
'''
AGENT = PKG
TESTS = '''import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pickle, unittest
from pkg import Cache

class Timer:
    def __init__(self):
        self.time = 0
    def __call__(self):
        return self.time

class TestCache(Cache):
    def __init__(self, maxsize):
        Cache.__init__(self, maxsize, timer=Timer())

def test_a():
    if 1:
        source = TestCache(2)
        source.update({1: 1, 2: 2})
        assert source == pickle.loads(pickle.dumps(source))
'''
PYTEST = True
NO_INIT = True
