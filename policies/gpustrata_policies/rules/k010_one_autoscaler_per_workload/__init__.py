"""Rule K010: ``meta.yaml`` holds its metadata, ``rule.py`` its logic; its fixtures and
``expected.yaml`` sit beside them."""
