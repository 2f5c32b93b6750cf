"""The planner: pure functions deriving every number the stack does not state."""

from gpustrata.planning.plan import plan_stack
from gpustrata.planning.plan_types import (
    ModelPlan,
    PlanError,
    PoolPlan,
    Probes,
    RayLayout,
    StackPlan,
)
from gpustrata.planning.provenance import Derived, Ledger

__all__ = [
    "Derived",
    "Ledger",
    "ModelPlan",
    "PlanError",
    "PoolPlan",
    "Probes",
    "RayLayout",
    "StackPlan",
    "plan_stack",
]
