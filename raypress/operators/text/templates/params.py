"""Parameter models that several text ops share, so their names, defaults and checks stay identical.

Data-Juicer's text filters repeat a few parameter groups (a ratio interval, a length interval,
the ``lang`` + ``tokenization`` pair, in tokenized_params); each op's own params subclass one of these.  ``TextParams``
(the ``text_key`` every text op takes) lives in ``raypress.operators.base`` and is re-exported here."""

from __future__ import annotations

import sys
from pydantic import Field

from raypress.operators.base import TextParams

__all__ = ["LengthParams", "RatioParams", "TextParams"]


# A closed interval on a ratio stat (character filters).  No docstring: it would become the
# description of the ops' param schema.
class RatioParams(TextParams):
    min_ratio: float = Field(default=0.0, description="keep samples whose ratio is >= min_ratio")
    max_ratio: float = Field(default=0.5, description="keep samples whose ratio is <= max_ratio")


# A closed interval on a length in characters (length filters); no docstring, as above.
class LengthParams(TextParams):
    min_len: int = Field(default=10, description="keep samples whose length is >= min_len")
    max_len: int = Field(default=sys.maxsize, description="keep samples whose length is <= max_len")
