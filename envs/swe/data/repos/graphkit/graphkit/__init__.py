"""graphkit: graph algorithms on adjacency dicts."""

from graphkit.paths import dijkstra, shortest_path
from graphkit.toposort import CycleError, find_cycle, toposort

__all__ = ["CycleError", "dijkstra", "find_cycle", "shortest_path", "toposort"]
