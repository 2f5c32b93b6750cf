"""V013 engine-flags-accepted."""

from __future__ import annotations

import functools
from collections.abc import Iterator

from gpustrata.catalog.vllm_release_types import FlagSet, source_url
from gpustrata.catalog.vllm_releases import accepted_flags, flag_releases, load_vllm_releases
from gpustrata.core.versions import parse_version
from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.engines import EngineSite, engine_sites
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.vllm_args import flags_starting_with

Verdict = tuple[bool, str]
"""(accepted, the option the parser resolves it to, or why not)."""


def _resolve(option: str, flags: frozenset[str]) -> Verdict:
    """How one release's argument parser takes an option as written.

    FlexibleArgumentParser turns ``_`` into ``-`` in ``--names``; ``--a.b`` sets a key of
    the JSON option ``--a``; a one-letter short option takes its value attached
    (``-O3``); argparse accepts a unique prefix of a long option (``allow_abbrev``) and
    stops on an ambiguous one.
    """
    if option.startswith("--"):
        name = "--" + option[2:].replace("_", "-")
        if name in flags:
            return True, name
        base = name.split(".", 1)[0]
        if base != name and base in flags:
            return True, base
        matches = flags_starting_with(base, flags, 5)  # five: enough to say "..." after four
        if len(matches) == 1:
            return True, matches[0]
        if matches:
            shown = ", ".join(matches[:4]) + (", ..." if len(matches) > 4 else "")
            return False, f"ambiguous option: {option} could match {shown}"
        return False, f"unrecognized arguments: {option}"
    if option in flags or option[:2] in flags:
        return True, option
    return False, f"unrecognized arguments: {option}"


@functools.cache
def _read_releases() -> tuple[tuple[str, tuple[int, ...], tuple[FlagSet, ...] | None], ...]:
    """Every read release, oldest first, with its parsed version and the flag sets that
    judge it: the catalogue is read once per process, and :func:`_last_accepting` walks
    every release for each option it looks back for."""
    return tuple((v, parse_version(v), accepted_flags(v)) for v in flag_releases())


def _last_accepting(option: str, before: str | None) -> str | None:
    """The newest read release (older than *before*, if given) that accepts the option."""
    key = parse_version(before) if before else None
    found = None
    for version, parsed, sets in _read_releases():
        if key is not None and parsed >= key:
            break
        if sets and _resolve(option, sets[0].flags)[0]:
            found = version
    return found


def _instead(option: str) -> str:
    name = "--" + option.lstrip("-").replace("_", "-").split(".", 1)[0]
    for change in load_vllm_releases().flag_changes:
        if change.flag == name:
            return f"; instead: {change.instead} ({source_url(change.source)})"
    return ""


def _judge(sets: tuple[FlagSet, ...], option: str) -> Verdict | None:
    """(accepted, why) where every read release around agrees; None where they differ."""
    verdicts = [_resolve(option, s.flags) for s in sets]
    if all(v[0] for v in verdicts):
        return True, verdicts[0][1]
    if not any(v[0] for v in verdicts):
        return False, verdicts[0][1]
    return None


def _options(site: EngineSite) -> list[tuple[str, str]]:
    """(as written, as the parser sees it): flags of a container, ``engine_kwargs`` keys of
    a Ray Serve LLM config (``max_model_len`` as ``--max-model-len``)."""
    if site.container is not None:
        return [(o, o) for o in dict.fromkeys(site.engine.written)]
    return [(k, "--" + k.replace("_", "-")) for k in dict.fromkeys(site.engine.written)]


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """Every option of every engine is one that the image's vLLM release accepts."""
    for site in engine_sites(ctx, obj):
        options = _options(site)
        if not options:
            continue
        release = site.release()
        version, where = release.version, release.where
        if version is None:
            yield ctx.not_evaluated(
                obj, f"{site.name}: the accepted flags depend on the vLLM release, but {where}"
            )
            continue
        sets = accepted_flags(version)
        if sets is None:
            read = flag_releases()
            yield ctx.not_evaluated(
                obj,
                f"{site.name}: vLLM {version} ({where}) is outside the releases whose flags "
                f"were read ({read[0]} to {read[-1]})",
            )
            continue
        judged = " and ".join(s.version for s in sets)
        label = f"vLLM {version} ({where})" + (
            f"; judged by {judged}, the read releases around it" if len(sets) > 1 else ""
        )
        for written, option in options:
            verdict = _judge(sets, option)
            if verdict is None:
                yield ctx.not_evaluated(
                    obj,
                    f"{site.name}: {written} is accepted by only one of vLLM {judged}, the read "
                    f"releases around {version}",
                )
                continue
            accepted, why = verdict
            if accepted:
                continue
            if site.container is None and _last_accepting(option, None) is None:
                # An engine_kwargs key no release has as a flag may still be an EngineArgs
                # field without one: only keys a release dropped are judged.
                continue
            last = _last_accepting(option, sets[0].version)
            history = f"; vLLM {last} was the last read release to accept it" if last else ""
            if site.container is None:
                what = f"the engine_kwargs key {written}"
                stop = (
                    "AsyncEngineArgs(**engine_kwargs) refuses the unknown keyword before the "
                    "engine starts, so the replica never comes up"
                )
            else:
                what = f"the option {written}"
                stop = (
                    f"the argument parser stops ('{why}') before the engine starts, so the "
                    "container exits"
                )
            yield ctx.violation(
                obj,
                f"{site.name} passes {what}, which {label} does not accept: {stop}{history}"
                f"{_instead(option)}. Fix: remove it or use what this release accepts",
                site.path,
            )


RULE = folder_rule(__name__, check)
