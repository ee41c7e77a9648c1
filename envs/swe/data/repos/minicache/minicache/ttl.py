"""A cache whose entries expire."""

import time


class TTLCache:
    """Entries expire ``ttl`` seconds after they were set.

    ``clock`` returns the current time in seconds; tests pass a fake one.
    """

    def __init__(self, ttl, clock=time.monotonic):
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self.ttl = ttl
        self.clock = clock
        self._data = {}

    def set(self, key, value):
        self._data[key] = (value, self.clock() + self.ttl)

    def get(self, key, default=None):
        entry = self._data.get(key)
        if entry is None:
            return default
        value, expires_at = entry
        if self.clock() >= expires_at:
            del self._data[key]
            return default
        return value

    def purge(self):
        """Drop every expired entry; return how many were dropped."""
        now = self.clock()
        expired = [k for k, (_, expires_at) in self._data.items() if now >= expires_at]
        for key in expired:
            del self._data[key]
        return len(expired)

    def __len__(self):
        return len(self._data)
