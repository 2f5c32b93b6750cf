"""Read a cluster profile file (:mod:`gpustrata.catalog.profile`) with one-line errors.

Each problem is ``file:line: profile.key.path: bad value ...; fix``, the stack loader's
style and machinery (:mod:`gpustrata.spec.loader`): the same YAML guards, pydantic error
wording and line index.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpustrata.catalog.profile import CLUSTER_PROFILE_FILE, ClusterProfile
from gpustrata.core.errors import Problem, StackError
from gpustrata.core.textfiles import TextFileError, read_text_file
from gpustrata.spec.loader import LineIndex, Schema, compose_document, validation_problems

__all__ = [
    "PROFILE_SCHEMA",
    "ProfileError",
    "load_profile_file",
    "profile_json_schema",
]

PROFILE_SCHEMA = Schema(ClusterProfile, "profile", "gpustrata schema --profile")


class ProfileError(StackError):
    """A cluster profile that cannot be used: one line per problem, with file and line."""


def load_profile_file(path: str | Path) -> ClusterProfile:
    """Read and validate the cluster profile at *path*.

    Raises :class:`ProfileError` naming the file, line, key path, value and fix.
    """
    file = str(path)
    try:
        text = read_text_file(Path(path))
    except TextFileError as exc:
        raise ProfileError([Problem("", exc.reason, exc.line)], file) from None
    try:
        root, document = compose_document(text, file)
    except StackError as exc:
        raise ProfileError(exc.problems, file) from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ProfileError(
            [Problem("profile", "is not a map; write the profile as a YAML map of keys", 1)],
            file,
        )
    try:
        return ClusterProfile.model_validate(document)
    except ValidationError as exc:
        lines = LineIndex(root, (), PROFILE_SCHEMA.prefix)
        raise ProfileError(validation_problems(exc, PROFILE_SCHEMA, lines), file) from None


def profile_json_schema() -> dict[str, Any]:
    """The JSON Schema of a cluster profile file (``gpustrata schema --profile``)."""
    schema = ClusterProfile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"gpustrata cluster profile ({CLUSTER_PROFILE_FILE})"
    return schema
