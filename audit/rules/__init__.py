"""Every check wireup runs, one rule object each; see :mod:`audit.rules._base` for the framework.

Rules by category live in ``schema``, ``wiring``, ``isv``, ``layout``, ``invariants``, ``build``,
``evidence`` and ``launchers``; ``wireup rules`` lists them with their purpose.
"""

from ._base import (
    CATEGORIES as CATEGORIES,
    REGISTRY as REGISTRY,
    CheckContext as CheckContext,
    Hit as Hit,
    Rule as Rule,
    RuleNotRun as RuleNotRun,
    iter_rules as iter_rules,
    rule as rule,
    run_rules as run_rules,
    select_rules as select_rules,
)
