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
TypedDicts and ``pulumi.Output`` attributes, with their docstrings as descriptions.
"""

from inspect import isclass
from typing import Any

import pulumi
from pulumi.provider.experimental import component_provider_host
from pulumi.provider.experimental.component import ComponentProvider

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


def provider() -> ComponentProvider:
    """The provider the plugin serves (the analyzer runs here, as in the plugin)."""
    return ComponentProvider(components(), PACKAGE, None, __version__)


def schema() -> dict[str, Any]:
    """The package schema the plugin answers ``GetSchema`` with, as a dict."""
    import json

    text = provider().schema
    assert text is not None
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def main() -> None:
    """Serve the components over gRPC (prints the port; Pulumi passes the engine address)."""
    component_provider_host(components(), PACKAGE, version=__version__)
