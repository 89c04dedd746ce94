"""``python -m audit`` is ``wireup``."""

from .cli import console

console()
