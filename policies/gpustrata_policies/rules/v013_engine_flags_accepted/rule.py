"""V013 engine-flags-accepted."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import cast

from gpustrata.catalog.vllm_release_types import FlagSet, source_url
from gpustrata.catalog.vllm_releases import accepted_flags, flag_releases, load_vllm_releases
from gpustrata.core.unknown import UNKNOWN
from gpustrata.core.versions import parse_version
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.engines import (
    EngineSite,
    default_image_releases,
    engine_sites,
    release_candidates,
)
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.vllm_args import flags_starting_with

Resolution = tuple[bool, str]
"""(accepted, the option the parser resolves it to, or why not)."""


def _resolve(option: str, flags: frozenset[str]) -> Resolution:
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


def _instead(option: str) -> tuple[str, str] | None:
    """What the catalogue says replaced a dropped option, and where it says so."""
    name = "--" + option.lstrip("-").replace("_", "-").split(".", 1)[0]
    for change in load_vllm_releases().flag_changes:
        if change.flag == name:
            return change.instead, source_url(change.source)
    return None


def _judge(sets: tuple[FlagSet, ...], option: str) -> Resolution | None:
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


def _judge_options(
    site: EngineSite, options: list[tuple[str, str]], version: str, where: str
) -> Iterator[Verdict]:
    """Each option of one engine against the read releases around *version*."""
    sets = accepted_flags(version)
    values: dict[str, Value] = {"engine": site.name, "version": version, "where": where}
    if sets is None:
        read = flag_releases()
        thresholds = {"read": (read[0], read[-1])}
        yield Verdict("not_evaluated", "release-not-read", values, thresholds)
        return
    values["judged_by"] = tuple(s.version for s in sets)
    for written, option in options:
        verdict = _judge(sets, option)
        if verdict is None:
            yield Verdict("not_evaluated", "releases-disagree", {**values, "written": written})
            continue
        accepted, why = verdict
        if accepted:
            continue
        if site.container is None and _last_accepting(option, None) is None:
            # An engine_kwargs key no release has as a flag may still be an EngineArgs
            # field without one: only keys a release dropped are judged.
            continue
        instead = _instead(option)
        yield Verdict(
            "violation",
            "option-refused",
            values={
                **values,
                "written": written,
                "engine_kwargs": site.container is None,
                "why": why,
                "last_accepting": _last_accepting(option, sets[0].version),
                "instead": instead[0] if instead else None,
            },
            sources=(instead[1],) if instead else (),
            path=site.path,
        )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Every option of every engine is one that the image's vLLM release accepts."""
    for site in engine_sites(ctx, obj):
        options = _options(site)
        if not options:
            continue
        if site.image is UNKNOWN and _accepted_on_kubeai_defaults(site, options):
            continue  # accepted on every KubeAI chart release's default image
        release = site.release()
        version, where = release.version, release.where
        if version is None:
            # A KubeAI default image's release is judged above, read or not.
            read = (
                release_candidates(site, [v for v, _, sets in _read_releases() if sets])
                if site.image is not UNKNOWN
                else None
            )
            if read is not None:
                yield from _judge_every_release(site, options, read, where)
                continue
            values = {"engine": site.name, "where": where}
            yield Verdict("not_evaluated", "release-unknown", values=values)
            continue
        yield from _judge_options(site, options, version, where)


def _accepted_on_kubeai_defaults(site: EngineSite, options: list[tuple[str, str]]) -> bool:
    """Does every option pass under the vLLM release of each default image of the KubeAI
    chart releases (:func:`default_image_releases`)? False where one is refused, undecided
    or a release unknown: the record then names the releases' images."""
    releases = default_image_releases(site)
    where = "the default image of every KubeAI chart release defining the Model's profile"
    return bool(releases) and not any(
        list(_judge_options(site, options, version, where)) for version in releases
    )


def _judge_every_release(
    site: EngineSite, options: list[tuple[str, str]], read: tuple[str, ...], where: str
) -> Iterator[Verdict]:
    """Each option of an engine whose image names no release (``latest``) under every read
    release: refused by all is a finding, accepted by all passes, and options some accept
    and others refuse make the engine "not evaluated", naming them and who accepts them."""
    sets = {v: s for v, _, s in _read_releases() if s}
    split: list[str] = []
    values: dict[str, Value] = {"engine": site.name, "version": "", "where": where}
    for written, option in options:
        found = [(v, _resolve(option, sets[v][0].flags)) for v in read]
        accepting = [v for v, (ok, _) in found if ok]
        if len(accepting) == len(found):
            continue
        if accepting:
            refusing = [v for v, (ok, _) in found if not ok]
            split.append(
                f"{written} (accepted by {_releases(accepting)}, refused by {_releases(refusing)})"
            )
            continue
        if site.container is None and _last_accepting(option, None) is None:
            continue  # an engine_kwargs key no release has as a flag (see _judge_options)
        instead = _instead(option)
        yield Verdict(
            "violation",
            "option-refused-everywhere",
            values={
                **values,
                "written": written,
                "engine_kwargs": site.container is None,
                "why": found[-1][1][1],
                "judged_by": (read[0], read[-1]),
                "last_accepting": None,
                "instead": instead[0] if instead else None,
            },
            sources=(instead[1],) if instead else (),
            path=site.path,
        )
    if split:
        yield Verdict(
            "not_evaluated",
            "releases-split",
            {**values, "split": "; ".join(split)},
            thresholds={"read": (read[0], read[-1]), "count": len(read)},
        )


def _releases(versions: list[str]) -> str:
    """``3: 0.4.2 ... 0.6.4`` (how many, the oldest and newest), or the one release."""
    if len(versions) == 1:
        return versions[0]
    return f"{len(versions)}, {versions[0]} ... {versions[-1]}"


def _refused(verdict: Verdict) -> dict[str, str]:
    """The clauses of an option the release refuses: the releases that judged it, what
    stops the engine (a flag or an engine_kwargs key), its history and replacement."""
    v = verdict.values
    judged_by = cast(tuple[str, ...], v["judged_by"])
    last = v["last_accepting"]
    if v["engine_kwargs"]:
        what = f"the engine_kwargs key {v['written']}"
        stop = (
            "AsyncEngineArgs(**engine_kwargs) refuses the unknown keyword before the "
            "engine starts, so the replica never comes up"
        )
    else:
        what = f"the option {v['written']}"
        stop = (
            f"the argument parser stops ('{v['why']}') before the engine starts, so the "
            "container exits"
        )
    return {
        "around": (
            f"; judged by {' and '.join(judged_by)}, the read releases around it"
            if len(judged_by) > 1
            else ""
        ),
        "what": what,
        "stop": stop,
        "history": f"; vLLM {last} was the last read release to accept it" if last else "",
        "replaced": f"; instead: {v['instead']} ({verdict.sources[0]})" if v["instead"] else "",
    }


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a V013 message quotes beyond its values: the read releases, and the
    clauses of a refused option."""
    if verdict.reason == "releases-disagree":
        return {"judged": " and ".join(cast(tuple[str, ...], verdict.values["judged_by"]))}
    if verdict.reason in ("option-refused", "option-refused-everywhere"):
        return _refused(verdict)
    return {}


RULE = folder_rule(__name__, worded(judge, fields))
