"""The planner: pure functions deriving every number the stack does not state.

Import from the modules themselves (``gpustrata.planning.plan.plan_stack``, the result types
in ``gpustrata.planning.plan_types``, the ledger in ``gpustrata.planning.provenance``): the
package re-exports nothing, so each name has one import path.
"""
