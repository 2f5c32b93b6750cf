"""Rule G002: ``rule.py`` holds it; its fixtures and ``expected.yaml`` sit beside it."""
