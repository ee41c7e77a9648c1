import unittest

from graphkit import dijkstra, shortest_path

GRID = {"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": ["e"], "e": []}
ROADS = {"a": {"b": 4, "c": 1}, "c": {"b": 2, "d": 7}, "b": {"d": 1}, "d": {}}


class TestShortestPath(unittest.TestCase):
    def test_path(self):
        self.assertEqual(shortest_path(GRID, "a", "e"), ["a", "b", "d", "e"])

    def test_unreachable(self):
        self.assertIsNone(shortest_path(GRID, "e", "a"))


class TestDijkstra(unittest.TestCase):
    def test_cheapest_path(self):
        self.assertEqual(dijkstra(ROADS, "a", "d"), (4, ["a", "c", "b", "d"]))

    def test_unreachable(self):
        self.assertIsNone(dijkstra(ROADS, "d", "a"))

    def test_negative_weight(self):
        with self.assertRaises(ValueError):
            dijkstra({"a": {"b": -1}}, "a", "b")


if __name__ == "__main__":
    unittest.main()
