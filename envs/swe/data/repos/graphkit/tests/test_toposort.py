import unittest

from graphkit import CycleError, find_cycle, toposort


class TestToposort(unittest.TestCase):
    def test_chain(self):
        self.assertEqual(toposort({"c": {"b"}, "b": {"a"}, "a": set()}), ["a", "b", "c"])

    def test_ties_are_sorted(self):
        self.assertEqual(toposort({"z": set(), "y": set(), "x": {"y", "z"}}), ["y", "z", "x"])

    def test_cycle_raises(self):
        with self.assertRaises(CycleError):
            toposort({"a": {"b"}, "b": {"a"}})

    def test_empty(self):
        self.assertEqual(toposort({}), [])


class TestFindCycle(unittest.TestCase):
    def test_acyclic(self):
        self.assertIsNone(find_cycle({"a": {"b"}, "b": set()}))

    def test_two_node_cycle(self):
        self.assertEqual(find_cycle({"a": {"b"}, "b": {"a"}}), ["a", "b", "a"])


if __name__ == "__main__":
    unittest.main()
