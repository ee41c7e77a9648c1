"""textkit: small text utilities."""

from textkit.case import camel_to_snake, snake_to_camel, title_case
from textkit.slug import slugify
from textkit.wrap import truncate, wrap

__all__ = ["camel_to_snake", "slugify", "snake_to_camel", "title_case", "truncate", "wrap"]
__version__ = "1.4.0"
