"""token_count_mapper: the number of tokens and characters of each row's text.

Why: token counts are how corpora are sized and compared (BeanCounter reports its 159B tokens and
its duplicate-token shares per form type from these counts).  The tokenizer is a Hugging Face
``tokenizer.json`` given by path; without one, the GPT-NeoX-20B tokenizer shipped with raypress
(raypress/data/tokenizers, see its SOURCE.md) is used, so counting works offline.  Counts are
``len(tokenizer.encode(text, add_special_tokens=False).ids)``: no BOS/EOS added.  A null text counts
0 tokens and 0 characters.
"""

from __future__ import annotations

import gzip
from functools import lru_cache
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Mapper, TextParams
from raypress.operators.registry import register
from raypress.operators.shared.files import LocalFile

DEFAULT_TOKENIZER = Path(__file__).resolve().parents[2] / "data" / "tokenizers" / "gpt-neox-20b.json.gz"
ENCODE_BATCH = 256  # texts per encode_batch call: the Rust tokenizer's threads get work, memory stays small


class TokenCountParams(TextParams):
    tokenizer: LocalFile | None = Field(
        default=None, description="a Hugging Face tokenizer.json (or .json.gz); None: GPT-NeoX-20B, shipped")
    token_key: str = Field(default="n_token", description="column to write the token count to")
    char_key: str = Field(default="n_char", description="column to write the character count to")



@lru_cache(maxsize=2)
def load_tokenizer(path: str) -> Any:
    """A ``tokenizers.Tokenizer`` from a tokenizer.json, gzip-compressed or not."""
    from tokenizers import Tokenizer

    if path.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return Tokenizer.from_str(f.read())
    return Tokenizer.from_file(path)


def token_counts(tokenizer: Any, texts: list[str | None]) -> list[int]:
    """Tokens per text (0 for null or empty), encoded in batches."""
    out: list[int] = []
    for lo in range(0, len(texts), ENCODE_BATCH):
        chunk = [t or "" for t in texts[lo: lo + ENCODE_BATCH]]
        out.extend(len(e.ids) for e in tokenizer.encode_batch(chunk, add_special_tokens=False))
    return out


@register("token_count_mapper", requires={"tokenizers": "text"})
class TokenCountMapper(Mapper[TokenCountParams]):
    """Write ``n_token`` (tokenizer tokens) and ``n_char`` (code points) for each row's text."""

    def __init__(self, params: TokenCountParams, artifacts=None):
        super().__init__(params, artifacts)
        self.tokenizer = load_tokenizer(str(Path(params.tokenizer).expanduser() if params.tokenizer
                                            else DEFAULT_TOKENIZER))

    def columns_written(self) -> tuple[str, ...]:
        return (self.params.token_key, self.params.char_key)

    def process_batch(self, table: pa.Table) -> pa.Table:
        p = self.params
        texts = table.column(p.text_key).to_pylist()
        columns = {p.token_key: token_counts(self.tokenizer, texts), p.char_key: [len(t or "") for t in texts]}
        for name, values in columns.items():
            array = pa.array(values, pa.int64())
            i = table.schema.get_field_index(name)
            table = table.set_column(i, name, array) if i >= 0 else table.append_column(name, array)
        return table
