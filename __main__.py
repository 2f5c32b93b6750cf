"""gpustrata's Pulumi program: `pulumi up` reads stacks/Pulumi.<stack>.yaml (gpustrata:stack)."""

from gpustrata.runtime.program import main

main()
