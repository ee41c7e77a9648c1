"""minicache: in-memory caches."""

from minicache.lru import LRUCache
from minicache.memo import memoize
from minicache.ttl import TTLCache

__all__ = ["LRUCache", "TTLCache", "memoize"]
