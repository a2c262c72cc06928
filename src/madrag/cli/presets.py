"""Protocol presets of ``madrag score --protocols NAME``: the protocol lists the papers score together, by name.

``score --protocols paper-ablation`` is what ``madrag ablate`` was and ``--protocols consensus-ablation`` what
``madrag ablate-consensus`` was (both old names still run it, as hidden aliases with that preset as their
default). ``-p/--protocol`` gives protocols one by one: given with a preset, they are added after it; given
alone, they replace the command's default. The preset's name is recorded in the run (``protocol_preset``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer
from rich.markup import escape

from madrag.errors import InputError
from madrag.protocols import ABLATION, CONSENSUS_ABLATION, TRAINING_FREE, available

TRANSCRIPT_VARIANTS = ("adv_r1", "adv_r2", "both_r1", "both_r2", "skp_r1", "skp_r2")
"""The transcript configurations of the MADRAG paper's Tables 7 and 8 (Adv., Both, Skp. x 1 and 2 rounds), in the
tables' row order."""


@dataclass(frozen=True)
class Preset:
    """A named list of protocols and where it comes from."""

    protocols: tuple[str, ...]
    about: str


PRESETS: dict[str, Preset] = {
    "paper-ablation": Preset(tuple(ABLATION), "the MADRAG paper's ablation, Tables 1, 2 and 9"),
    "transcript-variants": Preset(
        tuple(f"MADRAG[{v}]" for v in TRANSCRIPT_VARIANTS),
        "the MADRAG paper's transcript configurations, Tables 7 and 8",
    ),
    "consensus-ablation": Preset(
        tuple(CONSENSUS_ABLATION),
        "the consensus paper's judges, Tables 1-3, 8 and 9; its MAD judges run 4 rounds, -p NAME[rounds=N] others",
    ),
    "training-free": Preset(("MADRAG", *TRAINING_FREE), "MADRAG beside the other training-free scorers"),
}
"""Every preset, in the order ``--help`` lists them."""


def _listing() -> str:
    return "; ".join(f"{name}: {' '.join(p.protocols)} ({p.about})" for name, p in PRESETS.items())


PresetOpt = Annotated[
    str | None,
    typer.Option(
        "--protocols",
        metavar="PRESET",
        help=escape(f"A preset list of protocols - {_listing()}."),
        show_default=False,
    ),
]
ProtocolListOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--protocol",
        "-p",
        metavar="NAME",
        help=escape(
            f"Scoring protocol (repeat for several; after --protocols' list, or instead of the default): "
            f"{', '.join(available())}."
        ),
        show_default=False,
    ),
]


@dataclass(frozen=True)
class ChosenProtocols:
    """The protocols a scoring command runs and the preset they came from (None: given one by one)."""

    protocols: list[str]
    preset: str | None


def choose_protocols(preset: str | None, explicit: list[str] | None, default: str | list[str]) -> ChosenProtocols:
    """``--protocols`` and ``-p`` of a scoring command whose default is ``default`` (a preset's name or a list):
    the preset's protocols then the explicit ones; the explicit ones alone replace the default. A protocol
    named twice (in the preset and by ``-p``, or by two ``-p``) is an InputError."""
    if preset is not None and preset not in PRESETS:
        raise InputError(f"--protocols must be one of {', '.join(PRESETS)}; got {preset!r}")
    if preset is None and explicit:
        chosen = ChosenProtocols(list(explicit), None)
    else:
        name = preset if preset is not None else default if isinstance(default, str) else None
        base = list(PRESETS[name].protocols) if name is not None else list(default)
        chosen = ChosenProtocols([*base, *(explicit or [])], name)
    twice = sorted({p for p in chosen.protocols if chosen.protocols.count(p) > 1})
    if twice:
        listed = PRESETS[chosen.preset].protocols if chosen.preset is not None else ()
        where = f" (--protocols {chosen.preset} has it)" if any(p in listed for p in twice) else ""
        raise InputError(f"protocol {', '.join(twice)} given twice{where}: name each protocol once")
    return chosen
