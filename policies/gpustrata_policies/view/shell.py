"""How a container's command line reaches its program: the one shell grammar of the view.

Two expansions happen before a program sees its arguments:

* **Kubernetes** expands ``$(VAR)`` in ``command`` and ``args`` from the container's
  ``env`` (an env value may refer to entries defined before it); ``$$`` is a literal
  ``$``; a reference to a variable that is not defined is left as written
  (kubernetes/kubernetes ``third_party/forked/golang/expansion/expand.go``; the
  ``EnvVar.value`` and ``Container.command`` documentation in ``core/v1/types.go``).
* A **shell** started with ``sh -c SCRIPT`` / ``bash -exc SCRIPT`` (POSIX ``sh``:
  the first operand after the options is the script, the next ones are ``$0``, ``$1``,
  ...) splits the script into commands and words and expands ``$VAR``, ``${VAR}``,
  ``${VAR:-word}``, ``$@``. Variables come from the container env and from the
  script's own assignments (``MODEL=x``, ``export PORT=8000``).

A value the manifest does not state (``valueFrom``, a variable that only the image or
``envFrom`` may define, a command substitution) becomes :data:`MARK` inside the word, so
the reader can tell "unknown" from text: it is never read as a value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any

__all__ = [
    "MARK",
    "SHELLS",
    "container_env",
    "k8s_expand",
    "shell_commands",
    "shell_script",
]

MARK = "\ue000"
"""Stands in a word for a value known only where the container runs."""
SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh"})

_K8S_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
_DECLARE = frozenset({"export", "declare", "local", "readonly", "typeset"})

Env = dict[str, str | None]
"""Variables by name; ``None`` for one that is defined but whose value is not stated."""


def k8s_expand(text: str, env: Mapping[str, str | None], open_env: bool = False) -> str:
    """Kubernetes' ``$(VAR)`` expansion of one ``command``/``args`` item or env value.

    A defined variable without a stated value, or an undefined one where ``envFrom``
    (*open_env*) may define it, becomes :data:`MARK`; an undefined one stays as written.
    """
    if "$" not in text:
        return text

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        if name in env:
            value = env[name]
            return MARK if value is None else value
        return MARK if open_env else match.group(0)

    return _K8S_REF.sub(sub, text)


def container_env(entries: Sequence[Mapping[str, Any]], env_from: Any) -> tuple[Env, bool]:
    """A container's env as Kubernetes builds it: literal values (with ``$(VAR)`` of the
    entries before them expanded), ``None`` for ``valueFrom`` entries; and whether
    ``envFrom`` may define more names."""
    open_env = isinstance(env_from, list) and bool(env_from)
    out: Env = {}
    for entry in entries:
        name, value = entry.get("name"), entry.get("value")
        if not isinstance(name, str):
            continue
        if isinstance(value, bool):
            out[name] = None  # the API server refuses a non-string value
        elif isinstance(value, str | int | float):
            out[name] = k8s_expand(str(value), out, open_env)
        elif "valueFrom" in entry:
            out[name] = None
        else:
            out[name] = ""
    return out, open_env


def shell_script(argv: Sequence[str]) -> tuple[str, list[str]] | None:
    """``(script, operands after it)`` of ``sh [options] -c SCRIPT [NAME [ARG...]]``
    (``-c`` alone or in a cluster: ``-ec``, ``-exc``, ``-lc``); None when *argv* is no
    shell running an inline script (``bash /start.sh`` runs a file not in the manifest)."""
    argv = _unwrap(argv)
    if not argv or argv[0].rsplit("/", 1)[-1] not in SHELLS:
        return None
    i = 1
    while i < len(argv):
        tok = argv[i]
        i += 1
        if tok in {"-o", "+o", "-O", "+O"}:
            i += 1  # `-o pipefail`
        elif tok.startswith("-") and not tok.startswith("--") and len(tok) > 1:
            if "c" in tok[1:]:
                if i < len(argv) and argv[i] == "--":
                    i += 1  # `bash -lc -- SCRIPT`: the end of the options
                return (argv[i] if i < len(argv) else ""), list(argv[i + 1 :])
            if tok.endswith("o"):
                i += 1  # `-eo pipefail`
        elif tok.startswith(("--", "+")):
            continue  # --login, --noprofile, +x
        else:
            return None
    return None


def _unwrap(argv: Sequence[str]) -> Sequence[str]:
    """*argv* without the launchers that run the next word as the program: ``exec``,
    ``/usr/bin/env`` with its ``NAME=value`` assignments and ``-i`` / ``-u NAME`` options
    (GNU coreutils ``env`` synopsis: ``env [OPTION]... [NAME=VALUE]... [COMMAND [ARG]...]``)."""
    i = 0
    while i < len(argv):
        base = argv[i].rsplit("/", 1)[-1]
        if base == "exec":
            i += 1
        elif base == "env":
            i += 1
            while i < len(argv) and (
                argv[i].startswith("-") or _ASSIGNMENT.fullmatch(argv[i]) is not None
            ):
                i += 2 if argv[i] in {"-u", "--unset", "-C", "--chdir"} else 1
        else:
            break
    return argv[i:]


class _Words:
    """The words of one command being read, with word splitting of unquoted expansions."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.current: list[str] = []
        self.started = False

    def add(self, text: str) -> None:
        self.current.append(text)
        self.started = True

    def add_split(self, text: str) -> None:
        """An unquoted expansion: split on blanks (the shell's IFS default)."""
        parts = re.split(r"[ \t\n]+", text)
        for index, part in enumerate(parts):
            if index:
                self.end()
            if part:
                self.add(part)

    def end(self) -> None:
        if self.started:
            self.words.append("".join(self.current))
        self.current, self.started = [], False


def _closing(text: str, start: int, opener: str, closer: str) -> int:
    """Index after the *closer* that balances the *opener* before *start*."""
    depth, i = 1, start
    while i < len(text) and depth:
        if text[i] == opener:
            depth += 1
        elif text[i] == closer:
            depth -= 1
        i += 1
    return i


def _parameter(body: str, variables: Mapping[str, str | None]) -> str:
    """``${body}``: ``NAME``, ``NAME:-word`` / ``NAME-word`` (a default), else unknown."""
    match = _NAME.match(body)
    if match is None:
        return MARK
    name, rest = match.group(0), body[match.end() :]
    value = variables.get(name, MARK) if name in variables else MARK
    if not rest:
        return MARK if value is None else value
    for op in (":-", "-"):
        if rest.startswith(op) and name in variables and value is not None:
            unset = value == "" if op == ":-" else False
            return rest[len(op) :] if unset else value
    return MARK


def _dollar(
    text: str, i: int, variables: Mapping[str, str | None], positional: Sequence[str] | None
) -> tuple[list[str] | str, int]:
    """The expansion at ``text[i] == '$'``: text, or the words of ``$@``; the next index."""
    nxt = text[i + 1] if i + 1 < len(text) else ""
    if nxt == "{":
        end = _closing(text, i + 2, "{", "}")
        return _parameter(text[i + 2 : end - 1], variables), end
    if nxt == "(":
        return MARK, _closing(text, i + 2, "(", ")")  # $(cmd), $((arith))
    if nxt in {"@", "*"}:
        return (list(positional) if positional is not None else ['"$@"']), i + 2
    if nxt.isdigit() or nxt in {"#", "?", "$", "!", "-"}:
        return MARK, i + 2
    match = _NAME.match(text, i + 1)
    if match is None:
        return "$", i + 1
    name = match.group(0)
    value = variables.get(name) if name in variables else MARK
    return (MARK if value is None else value), match.end()


def shell_commands(
    script: str,
    variables: MutableMapping[str, str | None],
    positional: Sequence[str] | None = None,
) -> Iterator[list[str]]:
    """The commands of a shell script, each as its expanded words.

    Commands end at newlines, ``;``, ``&``, ``|`` and parentheses outside quotes; ``#``
    starts a comment, ``\\`` + newline continues a line, redirections are dropped.
    *variables* is read as each command is expanded and updated by the script's
    assignments between commands (the caller's mapping changes). *positional* are the
    operands ``$1 ...`` (``$@`` without them stays the word ``"$@"``: flags from
    elsewhere). Unknown values are :data:`MARK`.
    """
    words = _Words()
    redirect = False
    heredocs: list[tuple[str, bool]] = []  # (delimiter, <<- strips leading tabs)
    i, n = 0, len(script)

    def finish() -> list[str]:
        nonlocal words, redirect
        words.end()
        found, words, redirect = words.words, _Words(), False
        return found

    def end_word() -> None:
        nonlocal redirect
        if redirect and words.started:
            words.current, words.started, redirect = [], False, False
        else:
            words.end()

    while i < n:
        ch = script[i]
        if ch in " \t":
            end_word()
            i += 1
        elif ch in "\n;&|()":
            end_word()
            command = finish()
            if command:
                _assign(command, variables)
                yield command
            i += 1
            if ch == "\n" and heredocs:
                i = _skip_heredocs(script, i, heredocs)
                heredocs = []
        elif ch == "#" and not words.started:
            while i < n and script[i] != "\n":
                i += 1
        elif script.startswith("<<", i) and not script.startswith("<<<", i):
            end_word()
            i, delimiter = _heredoc_delimiter(script, i + 2)
            heredocs.append(delimiter)
        elif ch in "<>":
            if words.started and "".join(words.current).isdigit():
                words.current, words.started = [], False  # the 2 of 2>&1
            else:
                end_word()
            i += 1
            while i < n and script[i] in "<>&":
                i += 1
            if i < n and script[i].isdigit() and script[i - 1] == "&":
                i += 1  # >&1: no file word follows
            else:
                redirect = True
        elif ch == "\\":
            if i + 1 < n and script[i + 1] != "\n":
                words.add(script[i + 1])
            i += 2
        elif ch == "'":
            end = script.find("'", i + 1)
            end = n if end < 0 else end
            words.add(script[i + 1 : end])
            i = end + 1
        elif ch == '"':
            i = _double_quoted(script, i + 1, words, variables, positional)
        elif ch == "`":
            end = script.find("`", i + 1)
            words.add(MARK)
            i = n if end < 0 else end + 1
        elif ch == "$":
            value, i = _dollar(script, i, variables, positional)
            if isinstance(value, list):
                for word in value:
                    words.end()
                    words.add(word)
                    words.end()
            else:
                words.add_split(value)
        else:
            words.add(ch)
            i += 1
    end_word()
    command = finish()
    if command:
        _assign(command, variables)
        yield command


def _heredoc_delimiter(script: str, i: int) -> tuple[int, tuple[str, bool]]:
    """The delimiter word of ``<<WORD`` / ``<<-'WORD'`` read from *i* (after ``<<``):
    (the index after it, (the word without quotes, whether leading tabs are stripped))."""
    strip = script.startswith("-", i)
    i += 1 if strip else 0
    n = len(script)
    while i < n and script[i] in " \t":
        i += 1
    word: list[str] = []
    while i < n and script[i] not in " \t\n;&|()<>":
        if script[i] in "'\"":
            end = script.find(script[i], i + 1)
            end = n if end < 0 else end
            word.append(script[i + 1 : end])
            i = end + 1
        else:
            word.append(script[i].replace("\\", ""))
            i += 1
    return i, ("".join(word), strip)


def _skip_heredocs(script: str, i: int, heredocs: Sequence[tuple[str, bool]]) -> int:
    """The index after the bodies of *heredocs*, which start at *i* (POSIX: each body
    runs to a line that is its delimiter alone): the body is data, not commands."""
    for delimiter, strip in heredocs:
        while i < len(script):
            end = script.find("\n", i)
            end = len(script) if end < 0 else end
            line = script[i:end]
            i = end + 1
            if (line.lstrip("\t") if strip else line) == delimiter:
                break
    return min(i, len(script))


def _double_quoted(
    script: str,
    i: int,
    words: _Words,
    variables: Mapping[str, str | None],
    positional: Sequence[str] | None,
) -> int:
    """Read ``"..."`` from *i* (after the quote) into *words*; the index after it."""
    words.add("")
    n = len(script)
    while i < n and script[i] != '"':
        ch = script[i]
        if ch == "\\" and i + 1 < n and script[i + 1] in '$`"\\\n':
            if script[i + 1] != "\n":
                words.add(script[i + 1])
            i += 2
        elif ch == "$":
            value, i = _dollar(script, i, variables, positional)
            if isinstance(value, list):  # "$@": one word per operand
                for index, word in enumerate(value):
                    if index:
                        words.end()
                    words.add(word)
            else:
                words.add(value)
        elif ch == "`":
            end = script.find("`", i + 1)
            words.add(MARK)
            i = n if end < 0 else end + 1
        else:
            words.add(ch)
            i += 1
    return i + 1


def _assign(command: list[str], variables: MutableMapping[str, str | None]) -> None:
    """Apply ``NAME=value`` (alone or after ``export``) to the script's variables; an
    assignment in front of a command sets that command's env only and is not kept."""
    words = command[1:] if command[0] in _DECLARE else command
    if not words or not all(_ASSIGNMENT.fullmatch(w) for w in words):
        return
    for word in words:
        match = _ASSIGNMENT.fullmatch(word)
        if match:
            value = match.group(2)
            variables[match.group(1)] = None if MARK in value else value
