"""The gpustrata policy pack, from the installed release."""

from gpustrata_policies.pulumi_pack import serve

serve()
