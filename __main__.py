"""gpustrata's Pulumi program: `pulumi up` reads stacks/Pulumi.<stack>.yaml (gpustrata:stack)."""

from gpustrata.program import main

main()
