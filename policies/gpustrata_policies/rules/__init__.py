"""One rule per folder: ``<id>_<name>/`` holds ``meta.yaml`` (the rule's public metadata:
id, name, title, layer, severity, default enforcement, scope, rationale, fix, references,
thresholds) and ``rule.py``, which holds the logic and exports
``RULE = folder_rule(__name__, check)`` (:mod:`gpustrata_policies.rules._meta` reads and
validates ``meta.yaml``).

Beside them sit the rule's ``good-*.yaml`` and ``bad-*.yaml`` fixtures and
``expected.yaml`` (the exact findings and "not evaluated" records of the rule on each
fixture; a good fixture has no finding of any rule). ``tests/policies/test_rule_folders.py``
runs every folder. The YAML files ship as package data: ``gpustrata explain`` prints a bad
fixture from an installed wheel (:func:`gpustrata_policies.evaluate.rule_folder`).

The registry in :mod:`gpustrata_policies.evaluate` discovers the folders; helpers shared by
rules live in ``_common``. A new rule is a new folder: ``meta.yaml``, ``rule.py``, at least
one good and one bad fixture, and its ``expected.yaml``.
"""
