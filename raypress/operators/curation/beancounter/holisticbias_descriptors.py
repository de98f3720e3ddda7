"""BeanCounter's demographic descriptor list, derived in code from HolisticBias v1.1.

BeanCounter (Wang & Levy 2024) searched filings for 206 surface forms of the HolisticBias
descriptors of five axes: gender_and_sex, nationality, race_ethnicity, religion and
sexual_orientation.  Its list ships without a licence, so it is rebuilt here from HolisticBias's own
``descriptors.json`` (CC BY-SA 4.0, Smith et al. 2022) by these rules, applied in this order:

1. **Descriptors**: every descriptor string of the five axes (plain strings and the ``descriptor``
   of ``{"descriptor": ...}`` entries), once each; a descriptor listed under two axes (``LGBT``,
   ``LGBTQ``, ``LGBTQ+``, ``queer``: gender_and_sex and sexual_orientation) belongs to both.
2. **Left out** (``EXCLUDED``): descriptors the paper does not search.  Most are everyday words
   of business English whose other senses would swamp the demographic one ("Black", "white",
   "straight", "trans", "agnostic", ...), short forms and abbreviations (``cis``, ``enby``,
   ``FoC``, ...), dispreferred terms ("Oriental", "fruitcake"), and a few newer HolisticBias
   terms the paper's list does not have (its authors give no reason for those).
3. **Spelled out** (``SPELLED_OUT``): an abbreviation is (also) searched as its expansion, which
   folds back to the abbreviation: ``AFAB`` -> "Assigned Female at Birth" and "assigned female at
   birth" (title case is how an expansion is written beside its acronym, lower case how it runs in
   a sentence; these are the list's only case variants), ``FTM``/``F2M`` -> "female to male",
   ``MTF``/``M2F`` -> "male to female".
4. **ASCII**: accents are folded (NFKD, combining marks dropped), as EDGAR text is mostly ASCII:
   "Bahá'í" is searched as "Baha'i".
5. **Hyphen and space variants** (the paper notebook's rule): a form containing a hyphen also
   gets the form with every hyphen replaced by a space ("African-American" -> "African American",
   "gender non-conforming" -> "gender non conforming"); a form with spaces and no hyphen also gets
   the form with every space replaced by a hyphen ("Native American" -> "Native-American").

Of the 188 descriptors of the five axes, 38 are left out: the other 150 give one form each, 44 of
them a hyphen/space variant, and the spelled-out abbreviations 12 forms with their variants (to
AFAB, AMAB, FTM and MTF): 206 surface forms, each folded back to one of 152 descriptors.  Matching
is case-sensitive (``descriptor_matching``), as in the paper.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

AXES: tuple[str, ...] = ("gender_and_sex", "nationality", "race_ethnicity", "religion", "sexual_orientation")

# Where raypress ships HolisticBias v1.1 (CC BY-SA 4.0; see SOURCES.md beside it).
SHIPPED_DESCRIPTORS = Path(str(files("raypress") / "data" / "holisticbias" / "v1.1" / "descriptors.json"))

_EVERYDAY = "an everyday word in business English; its other senses would swamp the demographic one"
_SHORT = "a short form or abbreviation with other common meanings"
_DISPREFERRED = "a dispreferred term"
_NOT_IN_PAPER = "not in BeanCounter's list (no reason published)"

EXCLUDED: dict[str, str] = {
    "Black": _EVERYDAY, "white": _EVERYDAY, "straight": _EVERYDAY, "bi": _EVERYDAY, "pan": _EVERYDAY,
    "poly": _EVERYDAY, "ace": _EVERYDAY, "trans": _EVERYDAY, "stud": _EVERYDAY, "butch": _EVERYDAY,
    "macho": _EVERYDAY, "agnostic": _EVERYDAY, "fruity": _EVERYDAY,
    "cis": _SHORT, "hetero": _SHORT, "enby": _SHORT, "boi": _SHORT, "FoC": _SHORT, "MoC": _SHORT,
    "trans fem": _SHORT, "trans femme": _SHORT, "trans masc": _SHORT,
    "FTM": "an abbreviation, searched spelled out", "F2M": "an abbreviation, searched spelled out",
    "MTF": "an abbreviation, searched spelled out", "M2F": "an abbreviation, searched spelled out",
    "Oriental": _DISPREFERRED, "fruitcake": _DISPREFERRED, "hermaphrodite": _DISPREFERRED,
    "bigender": _NOT_IN_PAPER, "demiboy": _NOT_IN_PAPER, "demigirl": _NOT_IN_PAPER, "neutrois": _NOT_IN_PAPER,
    "two-spirit": _NOT_IN_PAPER, "endosex": _NOT_IN_PAPER, "humanist": _NOT_IN_PAPER,
    "born-again": _NOT_IN_PAPER, "Spiritualist": _NOT_IN_PAPER,
}

SPELLED_OUT: dict[str, tuple[str, ...]] = {
    "AFAB": ("Assigned Female at Birth", "assigned female at birth"),
    "AMAB": ("Assigned Male at Birth", "assigned male at birth"),
    "FTM": ("female to male",), "F2M": ("female to male",),
    "MTF": ("male to female",), "M2F": ("male to female",),
}


@dataclass(frozen=True)
class Descriptor:
    """One HolisticBias descriptor and the surface forms that fold back to it."""

    name: str
    axes: tuple[str, ...]
    forms: tuple[str, ...]


def ascii_fold(text: str) -> str:
    """Drop accents: NFKD, then remove combining marks ("Bahá'í" -> "Baha'i")."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def hyphen_space_variant(form: str) -> str | None:
    """The notebook's variant: hyphens -> spaces if the form has a hyphen, else spaces -> hyphens."""
    if "-" in form:
        return form.replace("-", " ")
    if " " in form:
        return form.replace(" ", "-")
    return None


def _descriptor_strings(data: dict, axis: str) -> list[str]:
    if axis not in data:
        raise ValueError(f"HolisticBias descriptors have no axis {axis!r} (they have {sorted(data)})")
    out = []
    for entries in data[axis].values():
        for entry in entries:
            out.append(entry if isinstance(entry, str) else entry["descriptor"])
    return out


def derive(data: dict) -> list[Descriptor]:
    """The descriptors of ``AXES`` with their surface forms, by the rules of this module's docstring."""
    axes_of: dict[str, list[str]] = {}
    for axis in AXES:
        for name in _descriptor_strings(data, axis):
            axes_of.setdefault(name, [])
            if axis not in axes_of[name]:
                axes_of[name].append(axis)
    bases: dict[str, list[str]] = {}  # descriptor -> its forms before variants, in order
    for name in axes_of:
        if name not in EXCLUDED:
            bases.setdefault(name, []).append(ascii_fold(name))
    for abbreviation, expansions in SPELLED_OUT.items():
        if abbreviation not in axes_of:
            raise ValueError(f"HolisticBias has no descriptor {abbreviation!r} to spell out")
        owner = next((a for a, e in SPELLED_OUT.items() if e == expansions), abbreviation)  # FTM and F2M share
        bases.setdefault(owner, []).extend(x for x in expansions if x not in bases.get(owner, []))
    owner_of: dict[str, str] = {}
    result = []
    for name, forms in bases.items():
        surface: list[str] = []
        for form in forms:
            for candidate in (form, hyphen_space_variant(form)):
                if candidate is None or candidate in surface:
                    continue
                if candidate in owner_of and owner_of[candidate] != name:
                    raise ValueError(f"surface form {candidate!r} folds to both {owner_of[candidate]!r} and {name!r}")
                owner_of[candidate] = name
                surface.append(candidate)
        result.append(Descriptor(name, tuple(axes_of[name]), tuple(surface)))
    return result


def load_descriptors(path: str | Path | None = None) -> list[Descriptor]:
    """Read HolisticBias v1.1 ``descriptors.json`` (default: the copy raypress ships) and derive."""
    file = Path(path) if path else SHIPPED_DESCRIPTORS
    if not file.is_file():
        raise FileNotFoundError(f"HolisticBias descriptors not found at {file}: give `descriptors_path` "
                                "(HolisticBias v1.1 holistic_bias/dataset/v1.1/descriptors.json)")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{file} is not JSON: {exc}") from exc
    return derive(data)


def surface_forms(descriptors: list[Descriptor]) -> dict[str, str]:
    """Surface form -> the descriptor it folds back to."""
    return {form: d.name for d in descriptors for form in d.forms}
