"""Overriding configuration values from environment variables.

``APP_SERVER__PORT=8080`` sets ``config["server"]["port"] = "8080"``: the prefix, then the
section, a double underscore, and the key. Keys may contain single underscores
(``APP_DB__MAX_CONNECTIONS``). Without a double underscore the key goes to ``"default"``.
"""


def apply_env(config, environ, prefix="APP_"):
    """Return a copy of ``config`` with the overrides found in ``environ`` applied."""
    result = {section: dict(values) for section, values in config.items()}
    for name, value in sorted(environ.items()):
        if not name.startswith(prefix):
            continue
        rest = name[len(prefix):].lower()
        section, sep, key = rest.partition("__")
        if not sep:
            section, key = "default", rest
        if not section or not key:
            continue
        result.setdefault(section, {})[key] = value
    return result
