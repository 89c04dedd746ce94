"""``python -m audit`` is ``wireup``."""

import sys

from .cli import main

sys.exit(main())
