"""The gpustrata CrossGuard policy pack (PulumiPolicy.yaml): `pulumi preview --policy-pack
policies`. The pack's code ships in the gpustrata package (gpustrata_policies.pulumi_pack),
so this folder, published alone, needs only the released wheel (requirements.txt)."""

from gpustrata_policies.pulumi_pack import serve

serve()
