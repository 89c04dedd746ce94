"""The search layer: what cases to run (sizes) and what they covered (tails).

:mod:`audit.search.sizes` chooses each subject's dim assignments around its tiling constants;
:mod:`audit.search.coverage` says which sides of every division in the launch geometry those cases ran.
The runtime only runs the cases; the rules and the report read the coverage.
"""

from .coverage import TailSite, TailVerdict, kernel_sites, tail_verdicts
from .sizes import SizePlan, choose_cases, plan_kernel, plan_schedule, tiling_constants

__all__ = ["SizePlan", "TailSite", "TailVerdict", "choose_cases", "kernel_sites", "plan_kernel", "plan_schedule",
           "tail_verdicts", "tiling_constants"]
