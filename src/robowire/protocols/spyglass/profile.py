"""What the header bytes mean: syntax types (wire), and semantic-type profiles (configuration).

This module sits beside `codec.py` (which re-exports its names): the profile is what turns a
semantic type into a packet class, so both the codec and the adapter read it.

SpyGlass has no fixed numbering of semantic types: each plugin is configured with the types it
accepts. A `SemanticProfile` says how robowire reads each one; the default is the convention of
the demo recording shipped with SpyGlass (10 neighbourhood, 20 data, 30 coordinates 2-D,
40 trajectory 3-D, everything else generic data by syntax type).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

import numpy as np
import numpy.typing as npt


class SyntaxType(IntEnum):
    """How the payload bytes are laid out (header byte 3)."""

    STD = 0
    UINT8_LIST = 1
    UINT16_LIST = 2
    INT16_LIST = 3
    UINT32_LIST = 4
    INT64_LIST = 5
    FLOAT_LIST = 6
    VARIABLE = 7


# -- semantic-type profile -------------------------------------------------------------------


class Interpretation(StrEnum):
    """What a semantic type means; each needs one syntax type (DATA takes any)."""

    NEIGHBORHOOD = "neighborhood"
    NODE_LINK = "node-link"
    COORDINATES_2D = "coordinates-2d"
    COORDINATES_3D = "coordinates-3d"
    TRAJECTORY_2D = "trajectory-2d"
    TRAJECTORY_3D = "trajectory-3d"
    DATA = "data"


REQUIRED_SYNTAX: dict[Interpretation, SyntaxType] = {
    Interpretation.NEIGHBORHOOD: SyntaxType.UINT16_LIST,
    Interpretation.NODE_LINK: SyntaxType.UINT16_LIST,
    Interpretation.COORDINATES_2D: SyntaxType.INT16_LIST,
    Interpretation.COORDINATES_3D: SyntaxType.INT16_LIST,
    Interpretation.TRAJECTORY_2D: SyntaxType.INT16_LIST,
    Interpretation.TRAJECTORY_3D: SyntaxType.INT16_LIST,
}


@dataclass(frozen=True, slots=True)
class SemanticRule:
    """Semantic types `first`..`last` (inclusive) mean `interpretation`.

    `name` and `unit` name the telemetry a DATA rule feeds (default `data.<semantic type>`).
    """

    first: int
    last: int
    interpretation: Interpretation
    name: str | None = None
    unit: str = "1"

    def __post_init__(self) -> None:
        if not 0 <= self.first <= self.last <= 255:
            raise ValueError(f"semantic type range {self.first}-{self.last} is not within 0-255")


# How a (semantic type, syntax type) pair's payload reads: as a plain list of numbers that is a
# neighbourhood or data (the columnar decoder reads those for many packets at once), or not.
PLAIN_NONE, PLAIN_NEIGHBORS, PLAIN_DATA = 0, 1, 2


@dataclass(frozen=True, slots=True)
class SemanticProfile:
    """Semantic type -> interpretation. Earlier rules win; types no rule names are DATA.

    A packet whose syntax type is not the one its interpretation needs (say a uint8 list on a
    neighbourhood semantic type) is read as generic data of its syntax type, as SpyGlass's own
    plugins ignore packets of the wrong class.
    """

    rules: tuple[SemanticRule, ...] = ()
    _table: tuple[Interpretation, ...] = field(init=False, repr=False, compare=False)
    _rules: tuple[SemanticRule | None, ...] = field(init=False, repr=False, compare=False)
    # [semantic type, syntax type] -> PLAIN_* : how the columnar decoder reads the payload
    _plain: npt.NDArray[np.uint8] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_type: list[SemanticRule | None] = [None] * 256
        for rule in reversed(self.rules):
            for code in range(rule.first, rule.last + 1):
                by_type[code] = rule
        table = tuple(r.interpretation if r else Interpretation.DATA for r in by_type)
        object.__setattr__(self, "_rules", tuple(by_type))
        object.__setattr__(self, "_table", table)
        plain = np.zeros((256, 8), dtype=np.uint8)  # PLAIN_NONE
        for code, meaning in enumerate(table):
            for syntax in range(SyntaxType.UINT8_LIST, SyntaxType.FLOAT_LIST + 1):
                if meaning is Interpretation.NEIGHBORHOOD and syntax == SyntaxType.UINT16_LIST:
                    plain[code, syntax] = PLAIN_NEIGHBORS
                elif meaning is Interpretation.DATA or REQUIRED_SYNTAX[meaning] != syntax:
                    plain[code, syntax] = PLAIN_DATA
        object.__setattr__(self, "_plain", plain)

    def interpretation(self, semantic_type: int) -> Interpretation:
        return self._table[semantic_type]

    def rule(self, semantic_type: int) -> SemanticRule | None:
        return self._rules[semantic_type]

    @classmethod
    def parse(cls, text: str) -> SemanticProfile:
        """From "10=neighborhood,20=data:temperature:Cel,112-113=trajectory-3d"."""
        rules: list[SemanticRule] = []
        for part in filter(None, (p.strip() for p in text.split(","))):
            try:
                span, _, meaning = part.partition("=")
                first, _, last = span.partition("-")
                kind, _, rest = meaning.partition(":")
                name, _, unit = rest.partition(":")
                rules.append(
                    SemanticRule(
                        int(first),
                        int(last or first),
                        Interpretation(kind.strip()),
                        name or None,
                        unit or "1",
                    )
                )
            except ValueError as exc:
                raise ValueError(f"bad semantic profile entry {part!r}: {exc}") from None
        return cls(tuple(rules))


# The semantic types of the demo recording (what the simulator sends and the sink serves).
NEIGHBORHOOD, DATA, COORDINATES, TRAJECTORY = 10, 20, 30, 40

DEFAULT_PROFILE = SemanticProfile(
    (
        SemanticRule(NEIGHBORHOOD, NEIGHBORHOOD, Interpretation.NEIGHBORHOOD),
        SemanticRule(DATA, DATA, Interpretation.DATA),
        SemanticRule(COORDINATES, COORDINATES, Interpretation.COORDINATES_2D),
        SemanticRule(TRAJECTORY, TRAJECTORY, Interpretation.TRAJECTORY_3D),
    )
)
