"""Every check wireup runs, one rule object each; see :mod:`audit.rules._base` for the framework.

Rules by category live in ``schema``, ``wiring``, ``isv``, ``layout``, ``invariants``, ``build``,
``evidence`` and ``launchers``; ``wireup rules`` lists them with their purpose.
"""

from ._base import (
    CATEGORIES as CATEGORIES,
)
from ._base import (
    CONTRACT_ONLY as CONTRACT_ONLY,
)
from ._base import (
    PROBES as PROBES,
)
from ._base import (
    REGISTRY as REGISTRY,
)
from ._base import (
    RUN_ONLY as RUN_ONLY,
)
from ._base import (
    CheckContext as CheckContext,
)
from ._base import (
    Hit as Hit,
)
from ._base import (
    Rule as Rule,
)
from ._base import (
    RuleNotRun as RuleNotRun,
)
from ._base import (
    rule as rule,
)
from ._engine import iter_rules as iter_rules
from ._engine import run_rules as run_rules
from ._engine import select_rules as select_rules
from ._parallel import JOBS_ENV as JOBS_ENV
from ._parallel import requested_jobs as requested_jobs
