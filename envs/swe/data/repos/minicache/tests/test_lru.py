import unittest

from minicache import LRUCache


class TestLRUCache(unittest.TestCase):
    def test_put_and_get(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        self.assertEqual(cache.get("a"), 1)

    def test_missing_key_returns_default(self):
        self.assertEqual(LRUCache(2).get("x", "none"), "none")

    def test_evicts_least_recently_put(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        cache.put("c", 3)
        self.assertNotIn("a", cache)
        self.assertEqual(len(cache), 2)

    def test_overwrite_keeps_size(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.put("a", 2)
        self.assertEqual(cache.get("a"), 2)
        self.assertEqual(len(cache), 1)

    def test_hit_and_miss_counts(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.get("a")
        cache.get("b")
        self.assertEqual((cache.hits, cache.misses), (1, 1))

    def test_negative_capacity(self):
        with self.assertRaises(ValueError):
            LRUCache(-1)


if __name__ == "__main__":
    unittest.main()
