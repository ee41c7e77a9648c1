import unittest

from minicache import TTLCache


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class TestTTLCache(unittest.TestCase):
    def test_value_before_expiry(self):
        clock = FakeClock()
        cache = TTLCache(10, clock=clock)
        cache.set("a", 1)
        clock.now += 5
        self.assertEqual(cache.get("a"), 1)

    def test_value_after_expiry(self):
        clock = FakeClock()
        cache = TTLCache(10, clock=clock)
        cache.set("a", 1)
        clock.now += 11
        self.assertIsNone(cache.get("a"))

    def test_ttl_must_be_positive(self):
        with self.assertRaises(ValueError):
            TTLCache(0)


if __name__ == "__main__":
    unittest.main()
