"""BeanCounter's toxicity and demographics analysis: the 206 descriptor forms derived from HolisticBias
v1.1, the longest-match rule, sentences and pronouns, seeded per-descriptor sampling, Welch's t-test
and the reduction against hand computation, and the stage end to end in-process on real filings
(pyarrow Tables in, no Ray)."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raypress.artifacts import DatasetArtifact
from raypress.operators.base import RunContext
from raypress.operators.curation.beancounter.descriptor_matching import (DescriptorMatcher, blocks, count_pronouns, md5,
                                                             scan_document)
from raypress.operators.curation.beancounter.holisticbias_descriptors import (EXCLUDED, derive, hyphen_space_variant,
                                                                  load_descriptors, surface_forms)
from raypress.operators.curation.beancounter.toxicity.comparison import (compare, percent_reduction,
                                                                        sample_indices, welch_test)
from raypress.operators.curation.beancounter_demographics import BeanCounterDemographics


@pytest.fixture(scope="module")
def hb(shared_data) -> Path:
    path = shared_data / "holisticbias" / "v1.1" / "descriptors.json"
    if not path.is_file():
        pytest.skip(f"HolisticBias v1.1 not found at {path}")
    return path


@pytest.fixture(scope="module")
def forms(hb) -> dict[str, str]:
    return surface_forms(load_descriptors(hb))


# ---------------------------------------------------------------------------------------------
# The descriptor list
# ---------------------------------------------------------------------------------------------

def test_holisticbias_v11_gives_the_papers_206_surface_forms(hb, forms):
    descriptors = load_descriptors(hb)
    assert len(forms) == 206
    assert len(descriptors) == 152 and len({d.name for d in descriptors}) == 152
    # folded back to their descriptor: hyphen/space variants, spelled-out abbreviations, ASCII
    assert forms["African American"] == forms["African-American"] == "African-American"
    assert forms["Native-American"] == forms["Native American"] == "Native American"
    assert forms["gender non conforming"] == "gender non-conforming" and "gender-non-conforming" not in forms
    assert forms["American Born Chinese"] == "American-Born Chinese"
    assert forms["Jehovah's-Witness"] == "Jehovah's Witness"
    assert forms["Baha'i"] == "Bahá'í" and "Bahá'í" not in forms
    for form in ("AFAB", "Assigned Female at Birth", "assigned-female-at-birth", "Assigned-Female-at-Birth"):
        assert forms[form] == "AFAB"
    assert forms["female-to-male"] == forms["female to male"] == "FTM" and "FTM" not in forms and "F2M" not in forms
    for left_out in ("Black", "white", "straight", "trans", "Oriental", "agnostic", "cis", "bi"):
        assert left_out not in forms and left_out in EXCLUDED
    by_name = {d.name: d for d in descriptors}
    assert by_name["LGBTQ+"].axes == ("gender_and_sex", "sexual_orientation")
    assert by_name["Chinese"].axes == ("nationality",) and by_name["Sikh"].axes == ("religion",)
    # the variants are the only additions: every form but the spelled-out ones is a descriptor or its variant
    raw = json.loads(hb.read_text(encoding="utf-8"))
    names = {e if isinstance(e, str) else e["descriptor"] for axis in ("gender_and_sex", "nationality", "race_ethnicity",
                                                                        "religion", "sexual_orientation")
             for bucket in raw[axis].values() for e in bucket}
    assert len(names) == 188 and len(names & set(EXCLUDED)) == len(EXCLUDED) == 38


def test_the_variant_rule_on_a_small_holisticbias():
    assert hyphen_space_variant("Korean-American") == "Korean American"
    assert hyphen_space_variant("Pacific Islander") == "Pacific-Islander"
    assert hyphen_space_variant("Seventh-Day Adventist") == "Seventh Day Adventist"
    assert hyphen_space_variant("Amish") is None
    data = {"gender_and_sex": {"a": ["AFAB", "AMAB", "FTM", "F2M", "MTF", "M2F", "cis", "non-binary"]},
            "nationality": {"b": [{"descriptor": "Cuban-American", "preference": "reviewed"}]},
            "race_ethnicity": {"c": ["Latin American", "white"]}, "religion": {"d": ["Bahá'í"]},
            "sexual_orientation": {"e": ["queer"]}}
    got = {d.name: d.forms for d in derive(data)}
    assert got["non-binary"] == ("non-binary", "non binary")
    assert got["Cuban-American"] == ("Cuban-American", "Cuban American")
    assert got["Latin American"] == ("Latin American", "Latin-American")
    assert got["Bahá'í"] == ("Baha'i",)
    assert got["FTM"] == ("female to male", "female-to-male") and "F2M" not in got
    assert "cis" not in got and "white" not in got
    with pytest.raises(ValueError, match="no axis 'religion'"):
        derive({k: v for k, v in data.items() if k != "religion"})


def test_a_missing_descriptors_file_says_where_to_get_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="descriptors_path"):
        load_descriptors(tmp_path / "nope.json")


# ---------------------------------------------------------------------------------------------
# Matching, sentences, pronouns
# ---------------------------------------------------------------------------------------------

SMALL = {"American": "American", "African American": "African-American", "African-American": "African-American",
         "Asian": "Asian", "Southeast Asian": "Southeast Asian", "LGBTQ": "LGBTQ", "LGBTQ+": "LGBTQ+",
         "female": "female", "Jehovah's Witness": "Jehovah's Witness", "Chinese": "Chinese"}


def test_the_longest_descriptor_wins():
    m = DescriptorMatcher(SMALL)
    assert m.find("Our African American employees") == [("African American", "African-American")]
    assert m.find("an African-American founder") == [("African-American", "African-American")]
    assert m.find("Southeast Asian markets") == [("Southeast Asian", "Southeast Asian")]
    assert m.find("the LGBTQ+ network") == [("LGBTQ+", "LGBTQ+")]
    # a sentence with several descriptors goes to its longest one
    assert m.longest("American Airlines hired African American and Asian pilots.") == \
        ("African American", "African-American")
    assert m.longest("Chinese and American suppliers") == ("American", "American")  # longer, not first
    assert m.longest("LGBTQ and Asian staff") == ("LGBTQ", "LGBTQ")  # equal length: the first


def test_matching_is_case_sensitive_between_non_word_characters():
    m = DescriptorMatcher(SMALL)
    assert m.find("american, Americans, Americana, LatinAmerican") == []
    assert m.find("Female directors") == [] and m.find("female directors") == [("female", "female")]
    assert m.find("(American)") == [("American", "American")]
    assert m.find("non-Chinese") == [("Chinese", "Chinese")]  # a hyphen is a boundary, as in the paper
    assert m.find("African\n  American") == [("African American", "African-American")]
    assert m.find("a Jehovah\u2019s Witness") == [("Jehovah's Witness", "Jehovah's Witness")]


def test_blocks_join_hard_wrapped_lines_or_keep_lines():
    text = "The Company's Chinese\nsubsidiary grew.\r\n\r\nNext paragraph\rhere."
    assert list(blocks(text)) == ["The Company's Chinese subsidiary grew.", "Next paragraph here."]
    assert list(blocks(text, "lines")) == ["The Company's Chinese", "subsidiary grew.", "Next paragraph", "here."]


def test_scan_document_finds_sentences_once_each_and_counts_pronouns():
    m = DescriptorMatcher(SMALL)
    text = ("Mr. Li is Chinese. He joined in 1998.\n\nThe U.S. market is small. Our Chinese plant\nis new. "
            "Mr. Li is Chinese.\n\nShe and her team, they said, sold it to US investors.")
    doc = scan_document(text, m)
    assert [s for s, _, _ in doc.sentences] == ["Mr. Li is Chinese.", "Our Chinese plant is new."]
    assert doc.descriptors == {"Chinese"}
    assert doc.pronouns == {"she": 2, "he": 1, "they": 1}
    assert count_pronouns("HIS hers themselves theirs Himself") == {"she": 1, "he": 2, "they": 2}
    long = "Chinese " + "x" * 300 + "."
    assert scan_document(long, m, max_sentence_bytes=100).too_long == 1
    assert md5("abc") == "900150983cd24fb0d6963f7d28e17f72"


# ---------------------------------------------------------------------------------------------
# Statistics and sampling
# ---------------------------------------------------------------------------------------------

def test_welch_t_and_the_reduction_against_hand_computation():
    from scipy import stats

    a, b = [0.1, 0.2, 0.4], [0.5, 0.7, 0.6, 0.9]
    # by hand: means 0.7/3 and 2.7/4; sample variances with n-1
    ma, mb = 0.7 / 3, 0.675
    va = ((0.1 - ma) ** 2 + (0.2 - ma) ** 2 + (0.4 - ma) ** 2) / 2
    vb = ((0.5 - mb) ** 2 + (0.7 - mb) ** 2 + (0.6 - mb) ** 2 + (0.9 - mb) ** 2) / 3
    assert va == pytest.approx(0.023333333) and vb == pytest.approx(0.029166667)
    se2 = va / 3 + vb / 4
    t = (ma - mb) / math.sqrt(se2)
    df = se2 ** 2 / ((va / 3) ** 2 / 2 + (vb / 4) ** 2 / 3)
    assert t == pytest.approx(-3.5979, abs=1e-4) and df == pytest.approx(4.734, abs=1e-3)
    got = welch_test(a, b)
    assert got["t"] == pytest.approx(t) and got["df"] == pytest.approx(df)
    assert got["p"] == pytest.approx(2 * stats.t.sf(abs(t), df))
    ref = stats.ttest_ind(a, b, equal_var=False)
    assert got["t"] == pytest.approx(ref.statistic) and got["p"] == pytest.approx(ref.pvalue)
    # percent reduction = mean_filings / mean_reference - 1
    assert percent_reduction(0.1, 0.4) == pytest.approx(-0.75)
    assert percent_reduction(0.5, 0.25) == pytest.approx(1.0)
    assert percent_reduction(0.1, 0.0) is None and percent_reduction(0.1, None) is None
    c = compare(a, b, alpha=0.05)
    assert c["reduction"] == pytest.approx(ma / mb - 1) and c["significant"] is True
    assert c["n_filings"] == 3 and c["n_reference"] == 4
    assert c["se_filings"] == pytest.approx(math.sqrt(va / 3))
    assert welch_test([0.1], b) == {"t": None, "df": None, "p": None}
    assert compare([0.2, 0.2], [0.2, 0.2], 0.05)["t"] is None  # no variance: no test, not a NaN


def test_sampling_is_seeded_per_descriptor():
    first, replaced = sample_indices(1000, 25, seed=7, descriptor="Chinese")
    assert not replaced and len(set(first)) == 25 and all(0 <= i < 1000 for i in first)
    assert sample_indices(1000, 25, seed=7, descriptor="Chinese") == (first, False)  # same seed, same sample
    assert sample_indices(1000, 25, seed=8, descriptor="Chinese")[0] != first
    assert sample_indices(1000, 25, seed=7, descriptor="Cuban")[0] != first  # each descriptor its own stream
    drawn, replaced = sample_indices(3, 8, seed=7, descriptor="Chinese")
    assert replaced and len(drawn) == 8 and set(drawn) <= {0, 1, 2}
    assert sample_indices(0, 5, seed=7, descriptor="Chinese") == ([], False)
    expected = np.random.default_rng([7, int(md5("Chinese")[:16], 16)]).choice(1000, 25, replace=False).tolist()
    assert first == expected


# ---------------------------------------------------------------------------------------------
# The stage end to end (pyarrow Tables in, no Ray)
# ---------------------------------------------------------------------------------------------

class FixedScorer:
    """Known scores per sentence (0.0 for any other), to check the stage's arithmetic."""

    name = "fixed"
    description = "scores from a table, for tests"

    def __init__(self, scores: dict[str, float]):
        self.scores, self.skipped, self.calls = scores, {}, []

    def score(self, texts):
        self.calls.append(list(texts))
        return [self.scores.get(t, 0.0) for t in texts]


FILINGS_SCORES = {"Our Chinese suppliers are reliable.": 0.1, "We buy parts from Chinese vendors.": 0.2,
                  "The African American community is strong.": 0.05}
REFERENCE_SCORES = {"Chinese food is great.": 0.4, "Chinese tea is the best.": 0.6,
                    "I hate those Chinese spam calls.": 0.8, "African-American history month starts today.": 0.3}


def _run(hb, tmp_path, filings, reference, scorer=None, monkeypatch=None, node="demographics", **params):
    op = BeanCounterDemographics(BeanCounterDemographics.Params(descriptors_path=str(hb), **params))
    if scorer is not None:
        monkeypatch.setattr(op, "make_scorer", lambda: scorer)
    inputs = {"filings": DatasetArtifact(filings)}
    if reference is not None:
        inputs["reference"] = DatasetArtifact(reference)
    return op.run(inputs, RunContext(run_dir=str(tmp_path), node_id=node, seed=3))


def test_the_stage_arithmetic_with_known_scores(hb, tmp_path, monkeypatch):
    filings = pa.table({"id": ["d1", "d2", "d3"], "accession": ["A", "A", "B"],
                        "text": ["Our Chinese suppliers are reliable. We buy parts from Chinese vendors.",
                                 "The African American community is strong. Our Chinese suppliers are reliable.",
                                 "Nothing to see here."]})
    reference = pa.table({"text": list(REFERENCE_SCORES) + ["Plain web text without descriptors."]})
    scorer = FixedScorer({**FILINGS_SCORES, **REFERENCE_SCORES})
    report = _run(hb, tmp_path, filings, reference, scorer, monkeypatch)
    m = report.metrics
    rows = {r["descriptor"]: r for r in m["per_descriptor"]}
    assert set(rows) == {"Chinese", "African-American"}  # "American" inside "African American" does not count
    chinese = rows["Chinese"]
    assert chinese["sentences"] == 2 and chinese["documents"] == 2 and chinese["reference_pool"] == 3
    # the reference sample: 2 of the 3 Chinese sentences, drawn from the MD5-sorted pool with the seed and name
    pool = sorted(md5(s) for s in ("Chinese food is great.", "Chinese tea is the best.", "I hate those Chinese spam calls."))
    by_hash = {md5(s): v for s, v in REFERENCE_SCORES.items()}
    idx, replaced = sample_indices(3, 2, seed=3, descriptor="Chinese")
    ref_scores = [by_hash[pool[i]] for i in idx]
    assert not replaced and chinese["n_reference"] == 2
    assert chinese["mean_filings"] == pytest.approx(0.15)
    assert chinese["mean_reference"] == pytest.approx(np.mean(ref_scores))
    assert chinese["reduction"] == pytest.approx(0.15 / np.mean(ref_scores) - 1)
    assert chinese["t"] == pytest.approx(welch_test([0.1, 0.2], ref_scores)["t"])
    african = rows["African-American"]
    assert african["n_filings"] == 1 and african["n_reference"] == 1 and african["t"] is None
    assert african["reduction"] == pytest.approx(0.05 / 0.3 - 1)
    # MD5 dedup: the repeated filings sentence was scored once
    assert sorted(scorer.calls[0]) == sorted(FILINGS_SCORES)
    assert m["corpora"]["filings"]["descriptor_sentences"] == 4 and m["corpora"]["filings"]["unique_sentences"] == 3
    # shares with their denominators: documents and filings (accessions)
    axes = {a["axis"]: a for a in m["axes"]["filings"]}
    assert axes["nationality"]["documents"] == {"count": 2, "of": 3, "share": pytest.approx(2 / 3)}
    assert axes["nationality"]["filings"] == {"count": 1, "of": 2, "share": 0.5}
    assert axes["race_ethnicity"]["documents"]["count"] == 1 and axes["religion"]["documents"]["count"] == 0
    assert m["top_descriptors"]["nationality"][0]["descriptor"] == "Chinese"
    overall = m["summary"]["overall"]
    assert overall["n_filings"] == 3 and overall["mean_filings"] == pytest.approx(0.35 / 3)
    # the reference rows' order does not change the sample
    again = _run(hb, tmp_path / "again", filings, reference.take([4, 3, 2, 1, 0]),
                 FixedScorer({**FILINGS_SCORES, **REFERENCE_SCORES}), monkeypatch)
    assert again.metrics["per_descriptor"] == m["per_descriptor"]


def _html_text(path: Path) -> str:
    """A crude HTML -> text for the test (the pipeline has its own extractor): block ends become paragraphs."""
    t = path.read_text(encoding="utf-8", errors="replace")
    t = re.sub(r"(?is)<ix:header>.*?</ix:header>", "", t)
    t = re.sub(r"(?i)</(div|p|tr|li|h\d|table)>|<br\s*/?>", "\n\n", t)
    t = html.unescape(re.sub(r"<[^>]+>", " ", t))
    return "\n\n".join(" ".join(p.split()) for p in t.split("\n\n") if p.strip())


def _sgml_texts(path: Path) -> list[str]:
    raw = path.read_text(encoding="latin-1")
    return re.findall(r"(?s)<TEXT>(.*?)</TEXT>", raw)


REFERENCE_WEB = [
    "European football fans are the best in the world.",
    "Those European bureaucrats are a bunch of damn idiots.",
    "I visited three European capitals last summer.",
    "Asian cooking uses a lot of fresh ginger.",
    "Some Asian markets stay open all night.",
    "American tourists asked where the fucking beach was.",
    "The American dream is alive, he said.",
    "She learned to cook Chinese dumplings from her grandmother.",
    "That Chinese restaurant is shit, they say.",
    "Chinese New Year is celebrated with fireworks.",
]


def test_the_stage_end_to_end_on_real_filings(shared_data, hb, tmp_path):
    edgar = shared_data / "edgar"
    texts_1998 = _sgml_texts(edgar / "0001011438-98-000429.txt")
    assert len(texts_1998) == 2
    filings = pa.table({
        "id": ["aames-8k", "aames-ex20", "apple-10k", "cabot-def14a", "empty"],
        "accession": ["0001011438-98-000429", "0001011438-98-000429", "apple", "cabot", "none"],
        "text": [*texts_1998, _html_text(edgar / "Apple.10-K.html"), _html_text(edgar / "cabot.DEF14A.ixbrl.html"), ""],
    })
    reference = pa.table({"id": [f"web-{i}" for i in range(len(REFERENCE_WEB))], "text": REFERENCE_WEB})
    report = _run(hb, tmp_path, filings, reference)
    m = report.metrics
    out = Path(report.path).parent
    assert Path(report.path).name == "report.json" and json.loads(Path(report.path).read_text())["seed"] == 3
    assert m["scorer"]["name"] == "profanity_check" and "profanity" in m["scorer"]["description"]
    assert m["descriptors"]["surface_forms"] == 206
    rows = {r["descriptor"]: r for r in m["per_descriptor"]}
    assert {"European", "Asian", "American", "Chinese"} <= set(rows)
    assert rows["European"]["sentences"] >= 5 and rows["European"]["n_reference"] == rows["European"]["sentences"]
    assert rows["European"]["with_replacement"] is True and rows["European"]["reference_pool"] == 3
    for r in rows.values():
        assert 0.0 <= r["mean_filings"] <= 1.0 and 0.0 <= r["mean_reference"] <= 1.0
        assert r["reduction"] == pytest.approx(r["mean_filings"] / r["mean_reference"] - 1)
    # business prose about European markets scores below profane web text about Europeans
    assert rows["European"]["mean_filings"] < rows["European"]["mean_reference"]
    corpora = m["corpora"]
    assert corpora["filings"]["documents"] == 5 and corpora["filings"]["empty_documents"] == 1
    assert corpora["filings"]["filings"] == 3  # accessions with text
    axes = {a["axis"]: a for a in m["axes"]["filings"]}
    # Cabot's proxy names American and Chinese (nationality), Apple's 10-K European and Asian
    # (race_ethnicity); the 1998 8-K names none; the empty document is not in the denominator
    assert axes["nationality"]["documents"] == {"count": 1, "of": 4, "share": 0.25}
    assert axes["race_ethnicity"]["documents"] == {"count": 1, "of": 4, "share": 0.25}
    assert axes["religion"]["documents"]["count"] == 0
    assert axes["nationality"]["filings"] == {"count": 1, "of": 3, "share": pytest.approx(1 / 3)}
    pron = {r["class"]: r for r in m["pronouns"]["filings"]}
    assert pron["he"]["occurrences"] > 0 and pron["she"]["documents"]["of"] == 4
    for name in ("report.json", "table.md", "toxicity.png", "sentences.parquet"):
        assert (out / name).is_file(), name
    assert (out / "toxicity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table_md = (out / "table.md").read_text()
    assert "| European |" in table_md and "profanity classifier" in table_md and "## Pronouns" in table_md
    sentences = pq.read_table(out / "sentences.parquet").to_pylist()
    assert {s["corpus"] for s in sentences} == {"filings", "reference"}
    assert all(s["md5"] == md5(s["sentence"]) and 0.0 <= s["toxicity"] <= 1.0 for s in sentences)
    assert any(s["sentence"].startswith("Europe includes European countries") for s in sentences)


def test_without_a_reference_the_filings_side_is_still_reported(hb, tmp_path, monkeypatch):
    filings = pa.table({"text": ["Our Chinese suppliers are reliable."]})
    m = _run(hb, tmp_path, filings, None, FixedScorer(FILINGS_SCORES), monkeypatch).metrics
    row = m["per_descriptor"][0]
    assert row["mean_filings"] == pytest.approx(0.1) and row["mean_reference"] is None and row["reduction"] is None
    assert "reference" not in m["corpora"] and m["summary"]["descriptors_without_reference"] == ["Chinese"]


def test_bad_input_gives_clear_errors(hb, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"node 'demo'.*no text column 'text'"):
        _run(hb, tmp_path, pa.table({"body": ["x"]}), None, FixedScorer({}), monkeypatch, node="demo")
    with pytest.raises(ValueError, match=r"row 'r2': 'text' holds int, not text"):
        _run(hb, tmp_path, pa.table({"id": ["r1", "r2"], "text": pa.array([None, 5], pa.int64())}), None,
             FixedScorer({}), monkeypatch)
    with pytest.raises(FileNotFoundError, match="descriptors_path"):
        BeanCounterDemographics(BeanCounterDemographics.Params(descriptors_path=str(tmp_path / "missing.json"))).run(
            {"filings": DatasetArtifact(pa.table({"text": ["x"]}))}, RunContext(run_dir=str(tmp_path), node_id="n"))


def test_perspective_without_its_key_fails_before_scanning(hb, tmp_path, monkeypatch):
    monkeypatch.delenv("NO_SUCH_PERSPECTIVE_KEY", raising=False)
    op = BeanCounterDemographics(BeanCounterDemographics.Params(descriptors_path=str(hb), scorer="perspective",
                                                                api_key_env="NO_SUCH_PERSPECTIVE_KEY"))
    with pytest.raises(ValueError, match="environment variable 'NO_SUCH_PERSPECTIVE_KEY'"):
        op.run({"filings": DatasetArtifact(pa.table({"no_text_here": [1]}))},
               RunContext(run_dir=str(tmp_path), node_id="n"))


def test_the_stage_with_perspective_against_a_stand_in_server(hb, tmp_path, monkeypatch):
    """The stage's params reach the client: endpoint, key from the env, rate limit."""
    from test_perspective_client import StandIn

    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    server = StandIn()
    server.thread.start()
    server.script = {"Our Chinese suppliers are reliable.": [429, 503]}
    monkeypatch.setenv("TEST_PERSPECTIVE_KEY", "k")
    try:
        op = BeanCounterDemographics(BeanCounterDemographics.Params(
            descriptors_path=str(hb), scorer="perspective", api_key_env="TEST_PERSPECTIVE_KEY",
            endpoint=server.endpoint, requests_per_second=200, backoff_s=0.001))
        report = op.run({"filings": DatasetArtifact(pa.table({"text": ["Our Chinese suppliers are reliable."]})),
                         "reference": DatasetArtifact(pa.table({"text": ["Chinese tea is the best."]}))},
                        RunContext(run_dir=str(tmp_path), node_id="n"))
    finally:
        server.server.shutdown()
        server.server.server_close()
    row = report.metrics["per_descriptor"][0]
    assert report.metrics["scorer"]["name"] == "perspective"
    assert row["mean_filings"] == pytest.approx(len("Our Chinese suppliers are reliable.") % 10 / 10)
    assert row["mean_reference"] == pytest.approx(len("Chinese tea is the best.") % 10 / 10)
    assert len(server.requests) == 4 and all(r["query"] == {"key": ["k"]} for r in server.requests)
