"""One rule per module. Each module exports ``RULE = Rule(meta=RuleMeta(...), check=...)``.

Module names start with the lower-case rule id (``k001_...``); the registry in
:mod:`gpustrata_policies.engine` discovers them. Helpers live in ``_common``.
"""
