"""Rule metadata read from each folder's ``meta.yaml`` (rules/_meta.py): every folder has
one, it resolves to the metadata the docs and the pack publish, and a broken file stops with
the file, the key, the bad value and the fix."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import yaml
from conftest import RULES_DIR

from gpustrata_policies.evaluate import all_rules
from gpustrata_policies.rules._meta import SHARED_FACTS, RuleMetaError, folder_rule, meta_from

FOLDER = "k003_gpu_pool_tainted"
WHERE = f"rules/{FOLDER}/meta.yaml"


def _good() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((RULES_DIR / FOLDER / "meta.yaml").read_text())
    return data


def _error(data: Any, facts: dict[str, Any] | None = None) -> str:
    with pytest.raises(RuleMetaError) as err:
        meta_from(data, WHERE, FOLDER, facts or {})
    assert str(err.value).startswith(f"{WHERE}: ")
    return str(err.value)


def test_every_folder_has_a_meta_yaml_naming_its_rule() -> None:
    folders = sorted(p.name for p in RULES_DIR.iterdir() if (p / "rule.py").is_file())
    assert folders == sorted(p.parent.name for p in RULES_DIR.glob("*/meta.yaml"))
    assert len(all_rules()) == len(folders)
    for rule in all_rules():
        data = yaml.safe_load(
            next(RULES_DIR.glob(f"{rule.meta.id.lower()}_*/meta.yaml")).read_text()
        )
        assert (data["id"], data["name"]) == (rule.meta.id, rule.meta.name)
        # No placeholder is left unresolved in what the docs and the pack publish.
        texts = (rule.meta.title, rule.meta.rationale, rule.meta.fix, *rule.meta.references)
        assert not [t for t in texts if "${" in t], rule.meta.id


def test_facts_resolve_in_text_and_splice_into_references() -> None:
    data = _good()
    data["rationale"] = "Read in vLLM ${reference_vllm_minor} and ${mine}."
    data["references"] = ["${VLLM_SRC}/vllm/config/cache.py", "${several}", "https://x.test/"]
    meta = meta_from(data, WHERE, FOLDER, {"mine": "a fact", "several": ("https://a", "https://b")})
    assert meta.rationale == f"Read in vLLM {SHARED_FACTS['reference_vllm_minor']} and a fact."
    assert meta.references == (
        f"{SHARED_FACTS['VLLM_SRC']}/vllm/config/cache.py",
        "https://a",
        "https://b",
        "https://x.test/",
    )
    assert meta.default_enforcement == {
        "dev": "advisory",
        "staging": "advisory",
        "prod": "advisory",
    }


def test_enforcement_per_environment_and_thresholds() -> None:
    data = _good()
    data["default_enforcement"] = {"dev": "advisory", "staging": "advisory", "prod": "mandatory"}
    data["thresholds"] = {"ratio": {"type": "number", "default": 2.0}}
    meta = meta_from(data, WHERE, FOLDER, {})
    assert meta.default_enforcement["prod"] == "mandatory"
    assert meta.default_enforcement["dev"] == "advisory"
    assert meta.thresholds == {"ratio": ("number", 2.0)}


@pytest.mark.parametrize(
    ("change", "facts", "said"),
    [
        ({"severity": "urgent"}, {}, "severity: 'urgent' is not one of critical, high"),
        ({"layer": None}, {}, "layer: None is not one of kubernetes"),
        ({"scope": "cluster"}, {}, "scope: 'cluster' is not one of resource, stack"),
        ({"sevrity": "high"}, {}, "unknown key 'sevrity'; the keys are id, name"),
        ({"rationale": None}, {}, "rationale: expected text, got NoneType None"),
        ({"id": "K004"}, {}, "id 'K004' and name 'gpu-pool-tainted' do not match the folder"),
        ({"references": "https://x"}, {}, "references: expected a list of URLs"),
        ({"references": [3]}, {}, "references[0]: expected a URL, got int 3"),
        ({"default_enforcement": "sometimes"}, {}, "default_enforcement.dev: 'sometimes' is not"),
        ({"default_enforcement": {"prod": "mandatory"}}, {}, "is neither one enforcement"),
        ({"fix": "see ${nowhere}"}, {}, "fix: ${nowhere} is not a known fact; the facts are"),
        ({"fix": "see ${many}"}, {"many": ("a", "b")}, "${many} stands for several URLs"),
        ({}, {"unused": "x"}, "passes fact 'unused' but no field cites ${unused}"),
        ({"thresholds": {"n": 3}}, {}, "thresholds.n: expected {type: ..., default: ...}"),
        (
            {"thresholds": {"n": {"type": "integer", "default": "3"}}},
            {},
            "thresholds.n.default: '3' is not of type integer",
        ),
        (
            {"thresholds": {"n": {"type": "integer", "default": True}}},
            {},
            "thresholds.n.default: True is not of type integer",
        ),
        (
            {"thresholds": {"n": {"type": "count", "default": 3}}},
            {},
            "thresholds.n.type: 'count' is not one of integer, number",
        ),
    ],
)
def test_a_bad_meta_yaml_names_the_key_the_value_and_the_fix(
    change: dict[str, Any], facts: dict[str, Any], said: str
) -> None:
    assert said in _error({**_good(), **change}, facts)


def test_missing_key_and_non_mapping() -> None:
    data = _good()
    del data["title"]
    assert "title is missing; add it" in _error(data)
    assert "expected a mapping of keys, got list" in _error(["id: K003"])


def test_missing_and_unparsable_files(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "fakerules" / "k003_gpu_pool_tainted"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = "fakerules.k003_gpu_pool_tainted.rule"
    with pytest.raises(RuleMetaError, match=r"meta.yaml: missing; every rule folder holds"):
        folder_rule(module, lambda ctx, obj: ())
    (package / "meta.yaml").write_text("id: [K003\n")
    with pytest.raises(
        RuleMetaError,
        match=r"meta.yaml:1:5: not valid YAML \(while parsing a flow sequence "
        r"(expected|did not find expected)",
    ):
        folder_rule(module, lambda ctx, obj: ())


_PACKAGES = itertools.count()


def _worded_rule(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, messages: Any) -> str:
    root = f"wordedrules{next(_PACKAGES)}"  # a fresh package: imports are cached by name
    package = tmp_path / root / "k003_gpu_pool_tainted"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    data = {k: v for k, v in _good().items() if k != "messages"}  # K003's own, if it has one
    data.update({"messages": messages} if messages is not None else {})
    (package / "meta.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"{root}.k003_gpu_pool_tainted.rule"


def test_worded_rule_fills_its_reason_template_from_values_and_fields(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpustrata_policies.rules._verdict import Verdict, worded

    module = _worded_rule(
        tmp_path, monkeypatch, {"short": "{pod} asks {gpus:,} GPUs on {pools}; see ${VLLM_SRC}"}
    )

    def judge(ctx: Any, obj: Any) -> Any:
        yield Verdict("violation", "short", {"pod": "Pod/a", "gpus": 1200}, path=("spec",))
        yield Verdict("violation", "unworded", {})

    rule = folder_rule(module, worded(judge, lambda v: {"pools": "p1 and p2"}))

    class Ctx:
        def violation(self, obj: Any, text: str, path: Any, advisory: bool) -> str:
            return text

    outcomes = rule.check(Ctx(), None)  # type: ignore[arg-type]
    assert next(iter(outcomes)) == (
        f"Pod/a asks 1,200 GPUs on p1 and p2; see {SHARED_FACTS['VLLM_SRC']}"
    )
    with pytest.raises(RuleMetaError, match=r"messages has no 'unworded'.*add its template"):
        list(outcomes)


def test_worded_rule_fills_thresholds_and_fields_take_precedence(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A template names the verdict's thresholds as it names its values; *fields* may word
    either anew; a name that is both a value and a threshold is an error naming the rule and
    the reason."""
    from gpustrata_policies.rules._verdict import Verdict, worded

    module = _worded_rule(
        tmp_path, monkeypatch, {"short": "{pod} has {free} of {need:g} GPUs", "both": "{need}"}
    )
    verdicts = [
        Verdict("violation", "short", {"pod": "Pod/a", "free": 1}, {"need": 2.0}),
        Verdict("violation", "both", {"need": 1}, {"need": 2}),
    ]

    def judge(ctx: Any, obj: Any) -> Any:
        return iter(verdicts)

    class Ctx:
        def violation(self, obj: Any, text: str, path: Any, advisory: bool) -> str:
            return text

    def fields(verdict: Verdict) -> dict[str, object]:
        return {"free": "one"} if verdict.reason == "short" else {}

    outcomes = iter(folder_rule(module, worded(judge, fields)).check(Ctx(), None))  # type: ignore[arg-type]
    assert next(outcomes) == "Pod/a has one of 2 GPUs"
    with pytest.raises(
        RuleMetaError,
        match=r"meta.yaml: messages.both: K003's verdict has 'need' both as a value and as a "
        r"threshold; .* rename one in the rule's judge",
    ):
        next(outcomes)


def test_messages_errors_name_the_file_the_reason_and_the_fix(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpustrata_policies.rules._verdict import worded

    def judge(ctx: Any, obj: Any) -> Any:
        return ()

    module = _worded_rule(tmp_path, monkeypatch, {"short": "{pod"})
    with pytest.raises(RuleMetaError, match=r"meta.yaml: messages.short: .*str.format template"):
        folder_rule(module, worded(judge))
    module = _worded_rule(tmp_path / "b", monkeypatch, None)
    with pytest.raises(RuleMetaError, match=r"messages is missing; a rule registered with worded"):
        folder_rule(module, worded(judge))
    module = _worded_rule(tmp_path / "c", monkeypatch, {"short": "text"})
    with pytest.raises(RuleMetaError, match=r"messages is given but rule.py words its findings"):
        folder_rule(module, lambda ctx, obj: ())
