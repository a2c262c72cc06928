"""Protocols found by name: the registry's decorator, the listed names, plugins and the errors for unknown ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from madrag.errors import ConfigError
from madrag.protocols import ABLATION, CONSENSUS_ABLATION, TRAINING_FREE, available, get_protocol
from madrag.protocols.base import ScoringProtocol
from madrag.protocols.debate import VARIANTS
from madrag.protocols.registry import PLUGINS_ENV, REGISTRY, ProtocolRegistry, Registration
from madrag.protocols.trait_judge import TraitJudgeProtocol


def test_available_lists_seed_000_then_variants_then_consensus() -> None:
    fixed = [*ABLATION, *TRAINING_FREE]  # every base name first, then the listed (parameterised) ones
    own = [n for n in available() if type(get_protocol(n)).__module__.startswith("madrag.")]  # not test plugins
    assert own == [
        *fixed,
        *(f"MADRAG[{v}]" for v in VARIANTS),
        *CONSENSUS_ABLATION,
        "CJ_F",
        "CJ[anchors=medoid]",
        "CJ[comparisons=2]",
        "MTS[reading=integer]",
        "MTS[variant=madrag-v1]",
    ]


def test_every_available_name_resolves_to_a_protocol_of_that_name() -> None:
    for name in available():
        protocol = get_protocol(name)
        assert isinstance(protocol, ScoringProtocol) and protocol.name == name
        assert protocol.describe()["name"] == name


def test_parameterised_names() -> None:
    mad = get_protocol("MAD[both_r1]")  # accepted, though only MADRAG's variants are listed
    assert mad.describe() == {"name": "MAD[both_r1]", "debate": "both_r1", "exemplars": False, "per_trait": True}
    assert get_protocol("MADRAG[skp_r2]").needs.bank
    assert get_protocol("SymmetricMAD[rounds=3]").describe()["rounds"] == 3
    with pytest.raises(ConfigError, match="unknown transcript variant 'zzz'; choose from adv_r1, adv_r2"):
        get_protocol("MADRAG[zzz]")
    with pytest.raises(ConfigError, match=r"write ConsensusMAD\[rounds=N\] with N from 1 to 10"):
        get_protocol("ConsensusMAD[rounds=11]")


@pytest.mark.parametrize("name", ["mad", "MARAG[both_r1]", "SA[x]", "MADRAG[]", "Consensus"])
def test_unknown_names_list_the_choices(name: str) -> None:
    with pytest.raises(ConfigError) as err:
        get_protocol(name)
    assert str(err.value) == f"unknown protocol {name!r}; choose from {', '.join(available())}"


def _fixed(name: str) -> TraitJudgeProtocol:
    return TraitJudgeProtocol(name, debate=None, exemplars=False)


def test_a_registry_asks_the_factory_of_the_base_name_and_makes_each_name_once() -> None:
    seen: list[str] = []
    registry = ProtocolRegistry(plugins=False)

    @registry.register("MA")
    def plain(name: str) -> TraitJudgeProtocol:
        seen.append(f"plain:{name}")
        return _fixed(name)

    @registry.register("X", options=True, listed=("X[1]",))
    def with_options(name: str) -> TraitJudgeProtocol | None:
        seen.append(f"options:{name}")
        return _fixed(name) if name != "X[bad]" else None

    assert registry.get("MA") is registry.get("MA") and seen == ["plain:MA"]
    assert registry.get("X[2]").name == "X[2]" and seen[-1] == "options:X[2]"
    assert registry.names() == ["MA", "X", "X[1]"]
    for unknown in ("Y", "MA[2]", "X[bad]"):  # MA takes no options: its factory is not asked
        with pytest.raises(ConfigError, match=r"unknown protocol .*; choose from MA, X, X\[1\]"):
            registry.get(unknown)
    assert "plain:MA[2]" not in seen and registry.find("Y") is None


def test_a_name_registered_twice_is_refused_but_a_reimported_factory_replaces_itself() -> None:
    registry = ProtocolRegistry(plugins=False)
    registry.add(Registration(("MA",), _fixed))
    registry.add(Registration(("MA",), _fixed))  # the same factory again (a module imported twice)
    assert registry.names() == ["MA"]
    with pytest.raises(ValueError, match="registered twice"):
        registry.add(Registration(("MA",), lambda name: _fixed(name)))


def test_plugins_named_in_the_environment_are_imported_before_a_lookup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "madrag_plugin_probe.py").write_text(
        "from madrag.protocols import register_protocol\n"
        "from madrag.protocols.trait_judge import TraitJudgeProtocol\n\n\n"
        "@register_protocol('Probe')\n"
        "def probe(name: str) -> TraitJudgeProtocol:\n"
        "    return TraitJudgeProtocol(name, debate=None, exemplars=False)\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "Probe" not in available()
    monkeypatch.setenv(PLUGINS_ENV, "madrag_plugin_probe")
    try:
        assert "Probe" in available() and get_protocol("Probe").name == "Probe"
    finally:
        REGISTRY.remove("Probe")
    monkeypatch.setenv(PLUGINS_ENV, "no_such_madrag_plugin")
    with pytest.raises(ConfigError, match=r"protocol plugin 'no_such_madrag_plugin' \(\$MADRAG_PLUGINS\) could not"):
        get_protocol("MADRAG")


def test_a_runs_templates_are_seed_000s_then_each_protocols_in_the_packaged_order() -> None:
    from madrag.agents.prompts import CONSENSUS_PROMPT_NAMES, PROMPT_NAMES, TRAINING_FREE_PROMPT_NAMES
    from madrag.pipeline.job import prompt_names

    assert prompt_names([get_protocol("MADRAG"), get_protocol("GEval")]) == list(PROMPT_NAMES)
    both = [*PROMPT_NAMES, *CONSENSUS_PROMPT_NAMES, *TRAINING_FREE_PROMPT_NAMES]  # as runs recorded them
    assert prompt_names([get_protocol("MTS"), get_protocol("CJ"), get_protocol("ConsensusMAD")]) == both
    assert prompt_names([get_protocol("SA")], with_source=True)[-1] == "source_block"
