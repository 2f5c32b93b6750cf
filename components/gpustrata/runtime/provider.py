"""gpustrata's components as a Pulumi component provider, for programs in any Pulumi language.

``components/`` is a source-based Pulumi plugin package: ``components/PulumiPlugin.yaml``
(``runtime: python``) and ``components/__main__.py``, which calls :func:`main`. When a
TypeScript, Go, YAML (or Python) program runs ``pulumi package add <repo>/components``,
Pulumi's Python language host starts that directory as a plugin
(``python components <engine address>``), asks it for its schema over gRPC (``GetSchema``)
and generates an SDK in the program's language from it. At deploy time the same plugin
``Construct``-s the components.

The schema is inferred by Pulumi's component analyzer
(:mod:`pulumi.provider.experimental.analyzer`) from the components' annotated ``args``
TypedDicts and ``pulumi.Output`` attributes, with their docstrings as descriptions;
``InferenceStack.stack`` is typed by the TypedDicts generated from the spec
(:mod:`gpustrata.components.stack_args`). The analyzer has no notion of a secret output,
so the outputs a component names in ``_secret_outputs`` are marked ``secret`` here.
"""

import json
import sys
from collections.abc import Mapping
from inspect import isclass
from typing import Any

import pulumi
import pulumi.provider
from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.experimental.util import camel_case

import gpustrata.components as _components
from gpustrata import __version__

PACKAGE = "gpustrata"
"""Package name: the ``<pkg>`` of every ``gpustrata:index:<Type>`` token."""


def components() -> list[type[pulumi.ComponentResource]]:
    """Every ComponentResource that :mod:`gpustrata.components` exports in ``__all__``."""
    found: list[type[pulumi.ComponentResource]] = []
    for name in _components.__all__:
        value = getattr(_components, name)
        if isclass(value) and issubclass(value, pulumi.ComponentResource):
            found.append(value)
    return found


class GpustrataProvider(ComponentProvider):
    """Pulumi's component provider for gpustrata's components, with secret outputs marked
    in the schema (``"secret": true``: generated SDKs keep them secret)."""

    def __init__(self) -> None:
        found = components()
        super().__init__(found, PACKAGE, None, __version__)
        assert self.schema is not None
        package = json.loads(self.schema)
        for component in found:
            token = f"{PACKAGE}:index:{component.__name__}"
            outputs = package["resources"][token]["properties"]
            for name in getattr(component, "_secret_outputs", ()):
                outputs[camel_case(name)]["secret"] = True
        self.schema = json.dumps(package)

    def component_args(self, component: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The ``args`` the component *component* receives for *inputs* in schema names
        (camelCase, as a TypeScript or YAML program writes them), mapped the way a
        ``Construct`` request is: Python names, enum values as the generated Enums,
        missing required inputs raised as :class:`pulumi.InputPropertyError`."""
        definition = Analyzer(PACKAGE).analyze(components())["component_definitions"][component]
        return dict(self.map_inputs(dict(inputs), definition))


def provider() -> GpustrataProvider:
    """The provider the plugin serves (the analyzer runs here, as in the plugin)."""
    return GpustrataProvider()


def schema() -> dict[str, Any]:
    """The package schema the plugin answers ``GetSchema`` with, as a dict."""
    text = provider().schema
    assert text is not None
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def main() -> None:
    """Serve the components over gRPC (prints the port; Pulumi passes the engine address).

    What ``pulumi.provider.experimental.component_provider_host`` does, with the
    provider above: the language host passes the engine address as the first argument."""
    pulumi.provider.main(provider(), sys.argv[1:])
