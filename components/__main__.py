"""Entry point of the gpustrata component provider plugin (see gpustrata/runtime/provider.py).

Pulumi's Python language host runs this directory: ``python components <engine address>``.
"""

from gpustrata.runtime.provider import main

if __name__ == "__main__":
    main()
