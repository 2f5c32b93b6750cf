"""Entry point of the gpustrata component provider plugin (see gpustrata/provider.py).

Pulumi's Python language host runs this directory: ``python components <engine address>``.
"""

from gpustrata.provider import main

if __name__ == "__main__":
    main()
