"""Builds the InferenceStack from the stack's gpustrata:stack config."""

from gpustrata.runtime.program import main

main()
