"""The Pulumi-free leaf every other package builds on: quantities, versions, YAML loading
and guards, the render->rules contract, environments and errors. Imports nothing of gpustrata."""
