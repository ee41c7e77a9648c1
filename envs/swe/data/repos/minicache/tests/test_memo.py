import unittest

from minicache import memoize


class TestMemoize(unittest.TestCase):
    def test_caches_results(self):
        calls = []

        @memoize()
        def square(x):
            calls.append(x)
            return x * x

        self.assertEqual(square(3), 9)
        self.assertEqual(square(3), 9)
        self.assertEqual(calls, [3])

    def test_different_arguments(self):
        @memoize()
        def add(a, b):
            return a + b

        self.assertEqual(add(1, 2), 3)
        self.assertEqual(add(2, 2), 4)

    def test_cache_clear(self):
        calls = []

        @memoize()
        def identity(x):
            calls.append(x)
            return x

        identity(1)
        identity.cache_clear()
        identity(1)
        self.assertEqual(calls, [1, 1])

    def test_keeps_function_name(self):
        @memoize()
        def named():
            return 1

        self.assertEqual(named.__name__, "named")


if __name__ == "__main__":
    unittest.main()
