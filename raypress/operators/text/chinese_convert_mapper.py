"""chinese_convert_mapper (Data-Juicer): convert between Simplified and Traditional Chinese (and
its Taiwan and Hong Kong standards) and Japanese Shinjitai, with OpenCC.

Data-Juicer pins ``opencc==1.1.9``; later OpenCC releases revised their dictionaries (1.4 turns
群贤毕至，少长咸集 into 少長咸集 where 1.1.9, and Data-Juicer's tests, give 少長鹹集), so the same pin
gives the same output.  Modes (OpenCC's configuration names): s2t, t2s, s2tw, tw2s, s2hk, hk2s,
s2twp / tw2sp (Taiwan standard with Taiwanese / Mainland idioms: 网络 <-> 網路), t2tw, tw2t,
hk2t, t2hk, t2jp, jp2t."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

from pydantic import Field

from raypress.operators.base import TextMapper, TextParams
from raypress.operators.registry import register

Mode = Literal["s2t", "t2s", "s2tw", "tw2s", "s2hk", "hk2s", "s2twp", "tw2sp", "t2tw", "tw2t", "hk2t", "t2hk",
               "t2jp", "jp2t"]


@lru_cache(maxsize=None)
def converter(mode: str) -> Any:
    """OpenCC's converter for ``mode`` (its dictionaries load once per process)."""
    import opencc

    return opencc.OpenCC(f"{mode}.json")


class ChineseConvertParams(TextParams):
    mode: Mode = Field(default="s2t", description="conversion: s2t Simplified->Traditional, t2s, s2tw/tw2s (Taiwan), "
                       "s2hk/hk2s (Hong Kong), s2twp/tw2sp (Taiwan with idioms), t2tw, tw2t, hk2t, t2hk, "
                       "t2jp/jp2t (Japanese Shinjitai)")


@register("chinese_convert_mapper", requires={"opencc": "text"})
class ChineseConvertMapper(TextMapper[ChineseConvertParams]):
    """Convert Chinese text between Simplified, Traditional (Taiwan, Hong Kong) and Japanese Kanji
    forms with OpenCC (Data-Juicer chinese_convert_mapper)."""

    # the converter is looked up per call, not kept: OpenCC objects do not pickle (Ray ships the op)
    def process_text(self, text: str) -> str:
        return converter(self.params.mode).convert(text)
