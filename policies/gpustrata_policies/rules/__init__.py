"""One rule per folder: ``<id>_<name>/rule.py`` exports ``RULE = Rule(meta=..., check=...)``.

Beside ``rule.py`` sit the rule's ``good-*.yaml`` and ``bad-*.yaml`` fixtures and
``expected.yaml`` (the exact findings of each fixture). The registry in
:mod:`gpustrata_policies.evaluate` discovers the folders; helpers shared by rules live in
``_common``.
"""
