"""Protocols found by name: the registry's families, the listed names and the errors for unknown ones."""

from __future__ import annotations

import pytest

from madrag.errors import ConfigError
from madrag.protocols import ABLATION, CONSENSUS_ABLATION, TRAINING_FREE, available, get_protocol
from madrag.protocols.base import ScoringProtocol
from madrag.protocols.debate import VARIANTS
from madrag.protocols.registry import ProtocolFamily, ProtocolRegistry
from madrag.protocols.trait_judge import TraitJudgeProtocol


def test_available_lists_seed_000_then_variants_then_consensus() -> None:
    fixed = [*ABLATION, *TRAINING_FREE]  # every family's fixed names first, then the listed parameterised ones
    assert available() == [*fixed, *(f"MADRAG[{v}]" for v in VARIANTS), *CONSENSUS_ABLATION, "CJ[rule=count]"]


def test_every_available_name_resolves_to_a_protocol_of_that_name() -> None:
    for name in available():
        protocol = get_protocol(name)
        assert isinstance(protocol, ScoringProtocol) and protocol.name == name
        assert protocol.describe()["name"] == name


def test_parameterised_names() -> None:
    mad = get_protocol("MAD[both_r1]")  # accepted, though only MADRAG's variants are listed
    assert mad.describe() == {"name": "MAD[both_r1]", "debate": "both_r1", "exemplars": False, "per_trait": True}
    assert get_protocol("MADRAG[skp_r2]").uses_bank
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


def test_a_registry_tries_fixed_names_then_each_family_parser_in_order() -> None:
    ma = TraitJudgeProtocol("MA", debate=None, exemplars=False)
    seen: list[str] = []

    def first(name: str) -> ScoringProtocol | None:
        seen.append(f"first:{name}")
        return None

    def second(name: str) -> ScoringProtocol | None:
        seen.append(f"second:{name}")
        return TraitJudgeProtocol(name, debate=None, exemplars=False) if name.startswith("X") else None

    registry = ProtocolRegistry(
        [ProtocolFamily(fixed={"MA": ma}, parse=first), ProtocolFamily(parse=second, listed=("X[1]",))]
    )
    assert registry.get("MA") is ma and seen == []
    assert registry.get("X[2]").name == "X[2]" and seen == ["first:X[2]", "second:X[2]"]
    assert registry.names() == ["MA", "X[1]"]
    with pytest.raises(ConfigError, match=r"unknown protocol 'Y'; choose from MA, X\[1\]"):
        registry.get("Y")


def test_a_name_registered_twice_is_refused() -> None:
    ma = TraitJudgeProtocol("MA", debate=None, exemplars=False)
    with pytest.raises(ValueError, match="registered twice"):
        ProtocolRegistry([ProtocolFamily(fixed={"MA": ma}), ProtocolFamily(fixed={"MA": ma})])
