"""The search layer: what cases to run (sizes, stress values) and what they covered (tails).

:mod:`audit.search.sizes` chooses each subject's dim assignments around its tiling constants;
:mod:`audit.search.coverage` says which sides of every division in the launch geometry those cases ran;
:mod:`audit.search.values` finds the inputs a kernel feeds into ``exp``, ``log``, ``sqrt`` or a divisor
and plans the numeric stress cases that push them where float32 breaks.
The runtime only runs the cases; the rules and the report read the coverage.
"""

from .coverage import TailSite, TailVerdict, kernel_sites, tail_verdicts
from .sizes import SizePlan, choose_cases, plan_kernel, plan_schedule, tiling_constants
from .values import StressCase, StressPlan, math_uses, stress_plan

__all__ = ["SizePlan", "StressCase", "StressPlan", "TailSite", "TailVerdict", "choose_cases", "kernel_sites", "math_uses",
           "plan_kernel", "plan_schedule", "stress_plan", "tail_verdicts", "tiling_constants"]
