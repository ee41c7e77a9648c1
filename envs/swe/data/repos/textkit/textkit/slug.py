"""URL slugs."""

import re
import unicodedata

_NOT_WORD = re.compile(r"[^a-z0-9]+")


def slugify(text, sep="-", max_length=None):
    """Turn ``text`` into a lowercase ASCII slug.

    Accents are removed, every run of other characters becomes one ``sep``, and the slug never
    starts or ends with ``sep``. With ``max_length`` the slug is cut to at most that many
    characters, still without a trailing separator.

    >>> slugify("Héllo, World!")
    'hello-world'
    """
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = _NOT_WORD.sub(sep, ascii_text.lower()).strip(sep)
    if max_length is not None:
        slug = slug[:max_length].rstrip(sep)
    return slug
