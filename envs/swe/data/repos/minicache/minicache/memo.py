"""A memoising decorator backed by an LRU cache."""

import functools

from minicache.lru import LRUCache

_MISSING = object()


def make_key(args, kwargs):
    """A hashable key for a call; keyword order does not matter."""
    return args + tuple(sorted(kwargs.items()))


def memoize(maxsize=128):
    """Cache a function's results by its arguments (which must be hashable).

    The wrapper exposes ``cache`` (the :class:`LRUCache`) and ``cache_clear()``.
    """

    def decorate(function):
        cache = LRUCache(maxsize)

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            key = make_key(args, kwargs)
            value = cache.get(key, _MISSING)
            if value is _MISSING:
                value = function(*args, **kwargs)
                cache.put(key, value)
            return value

        def cache_clear():
            wrapper.cache = LRUCache(maxsize)
            nonlocal cache
            cache = wrapper.cache

        wrapper.cache = cache
        wrapper.cache_clear = cache_clear
        return wrapper

    return decorate
