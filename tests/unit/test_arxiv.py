"""read_arxiv on the real arXiv fixture (directory and e-print tarball) and on hostile sources;
then latex_to_interleaved on what it reads.  No Ray: the per-source reader runs directly."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.operators.curation.latex_to_interleaved import LatexToInterleaved
from raypress.operators.io.read_arxiv import ReadArxiv, expand_sources, read_source, source_url
from raypress.schema import DETAIL_COL, KIND_COL, REASON_COL, TOMBSTONE_COLS, strip_tombstone_columns

# What main.tex really includes, in document order (SOURCES.md: images/im*_included.*): four
# \includegraphics in main.tex (one split over lines by %-comments), ./images/im3 again, then
# im2 from the \input{figures/figure_included.tex}.
INCLUDED = [
    "images/im1_included.png",
    "images/im3_included.png",
    "images/im4_included.png",
    "images/im5_included.jpg",
    "images/im3_included.png",
    "images/im2_included.jpg",
]
DECOYS = ("im_not_included", "im4_not_included", "im5_not_included", "images/im1.png", "include/images")


def read_one(path: Path | str, **limits) -> dict:
    tables = list(read_source(str(path), str(Path(path).resolve()), node="sources", **limits))
    assert len(tables) == 1 and tables[0].num_rows == 1
    return tables[0].to_pylist()[0]


def extract(path: Path | str, **params) -> dict:
    tables = list(read_source(str(path), str(Path(path).resolve()), node="sources"))
    live = strip_tombstone_columns(tables[0])
    assert tables[0].column(KIND_COL).to_pylist() == [None], tables[0].column(DETAIL_COL).to_pylist()
    op = LatexToInterleaved(LatexToInterleaved.Params(**params))
    return op.process_batch(live).to_pylist()[0]


def write_tar(path: Path, members: dict[str, bytes], gz: bool = True) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buf.getvalue()) if gz else buf.getvalue())
    return path


def tombstone(row: dict) -> tuple[str, str]:
    assert row["_rp_kind"] == "error"
    return row[REASON_COL], row[DETAIL_COL]


@pytest.fixture(scope="module")
def arxiv(shared_data: Path) -> Path:
    root = shared_data / "arxiv"
    if not (root / "tex" / "main.tex").is_file():
        pytest.skip("arXiv fixture not in the shared data")
    return root


# -- the real fixture ----------------------------------------------------------------------------


def test_directory_and_tarball_give_the_same_document(arxiv):
    from_dir = extract(arxiv / "tex")
    from_tar = extract(arxiv / "tex.tar.gz")
    for column in ("main_file", "texts", "images", "image_bytes", "image_metadata", "figures_unresolved"):
        assert from_dir[column] == from_tar[column], column
    assert from_tar["source"] == "arxiv"
    assert from_tar["id"] == str(arxiv / "tex.tar.gz") and from_dir["id"] == str(arxiv / "tex")


def test_main_file_is_the_one_with_begin_document(arxiv):
    row = read_one(arxiv / "tex.tar.gz")
    assert row["main_file"] == "main.tex"  # the fixture has no \documentclass anywhere
    assert row["inputs_missing"] == 0


def test_input_is_inlined_and_the_commented_input_is_not(arxiv):
    tex = read_one(arxiv / "tex")["tex"]
    assert "\\input{figures/figure_included.tex}" not in tex
    assert tex.count("\\includegraphics{images/im2_included.jpg}") == 1  # figure_included.tex's body
    assert "% \\input{figures/figure_not_included.tex}" in tex  # left alone, comment and all
    assert "\\addplot{figures/data_not_included.txt}" not in tex  # figure_not_included.tex's body
    assert "child {node {left}}" in tex  # \input{figures/figure_included.tikz}: exact name, BOM dropped
    assert "\ufeff" not in tex


def test_included_images_in_document_order_and_no_decoys(arxiv):
    doc = extract(arxiv / "tex.tar.gz")
    assert [i for i in doc["images"] if i is not None] == INCLUDED
    assert not any(d in i for i in doc["images"] if i for d in DECOYS)
    assert doc["figures_unresolved"] == 0 and doc["figures_unreadable"] == 0
    metas = [m for m in doc["image_metadata"] if m]
    assert [(m["width"], m["height"], m["format"]) for m in metas] == [
        (600, 800, "png"), (600, 800, "png"), (600, 800, "png"), (1000, 200, "jpeg"), (600, 800, "png"),
        (1000, 200, "jpeg")]
    raw = (arxiv / "tex" / "images" / "im2_included.jpg").read_bytes()
    assert doc["image_bytes"][doc["images"].index("images/im2_included.jpg")] == raw


def test_texts_and_images_alternate_with_the_text_in_between(arxiv):
    doc = extract(arxiv / "tex")
    kinds = ["t" if t is not None else "i" for t in doc["texts"]]
    assert "".join(kinds) == "tiiiiiti"  # the tikz pictures after im2 leave no text
    assert doc["texts"][0] == "Text\n\nText\n\nThis is a percent %."


def test_comments_conditionals_and_the_tail_are_stripped(arxiv):
    text = "\n".join(t for t in extract(arxiv / "tex")["texts"] if t)
    for gone in ("Whole line comment", "Inline comment", "This is an environment comment",
                 "I shall be gone", "This should be ignored", "content after this line", "asdf",
                 "Test1", "Test3", "Test4", "data_included", "tikzsetnextfilename"):
        assert gone not in text, gone
    for kept in ("This is a percent %.", "Expect me (else block of iffalse)!", "Expect me (iftrue block)!",
                 "This is a custom environment that could be excluded.", "from this one.",
                 "hello test hello test hello test"):
        assert kept in text, kept
    assert "\\" not in text and "%" not in text.replace("percent %", "")


def test_arxiv_file_names_give_arxiv_urls():
    assert source_url("dl/2401.01234v2.tar.gz") == "arxiv:2401.01234v2"
    assert source_url("dl/hep-th9901001.gz") == "arxiv:hep-th/9901001"
    assert source_url("papers/my_paper") == "papers/my_paper"


# -- inlining guards -----------------------------------------------------------------------------


def test_input_cycle_terminates_with_a_note(tmp_path):
    (tmp_path / "main.tex").write_text("\\documentclass{article}\\begin{document}\nA \\input{a}\n\\end{document}\n")
    (tmp_path / "a.tex").write_text("in a \\input{b.tex}\n")
    (tmp_path / "b.tex").write_text("in b \\input{a}\n")
    row = read_one(tmp_path)
    assert row["tex"].count("in a") == 1 and row["tex"].count("in b") == 1
    assert "\\input{a} would be a cycle" in row["tex"]
    assert row["inputs_missing"] == 1


def test_self_input_and_depth_limit(tmp_path):
    (tmp_path / "main.tex").write_text("\\begin{document}\\input{l1}\\end{document}")
    for i in range(1, 6):
        (tmp_path / f"l{i}.tex").write_text(f"level{i} \\input{{l{i + 1}}}")
    row = read_one(tmp_path, max_input_depth=3)
    assert "level3" in row["tex"] and "level4" not in row["tex"]
    assert "deeper than max_input_depth=3" in row["tex"]


def test_missing_input_leaves_a_note_and_the_rest(tmp_path):
    main = "\\begin{document}\nbefore \\input{nowhere} after\n\\include{gone}\\end{document}"
    (tmp_path / "main.tex").write_text(main)
    row = read_one(tmp_path)
    assert row["inputs_missing"] == 2
    assert "\\input{nowhere} not found in the source" in row["tex"] and "after" in row["tex"]
    doc = extract(tmp_path)
    assert doc["texts"] == ["before after"]


def test_bare_input_and_input_relative_to_the_including_file(tmp_path):
    (tmp_path / "sec").mkdir()
    (tmp_path / "main.tex").write_text("\\begin{document}\\input sec/one \\end{document}")
    (tmp_path / "sec" / "one.tex").write_text("ONE \\input{two}")
    (tmp_path / "sec" / "two.tex").write_text("TWO")
    tex = read_one(tmp_path)["tex"]
    assert "ONE" in tex and "TWO" in tex


# -- main file choice ----------------------------------------------------------------------------


def test_documentclass_beats_begin_document_and_commented_markers_do_not_count(tmp_path):
    (tmp_path / "a.tex").write_text("% \\documentclass{article}\n\\begin{document}A\\end{document}")
    (tmp_path / "b.tex").write_text("\\documentclass{article}\n\\begin{document}B\\end{document}")
    assert read_one(tmp_path)["main_file"] == "b.tex"


def test_tie_goes_to_main_tex_then_the_shortest_path(tmp_path):
    body = "\\documentclass{article}\\begin{document}x\\end{document}"
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "main.tex").write_text(body)
    (tmp_path / "paper.tex").write_text(body)
    (tmp_path / "a_long_name.tex").write_text(body)
    assert read_one(tmp_path)["main_file"] == "sub/main.tex"
    (tmp_path / "sub" / "main.tex").unlink()
    assert read_one(tmp_path)["main_file"] == "paper.tex"


def test_tarball_with_a_leading_folder_resolves_from_the_main_files_folder(tmp_path):
    data = _png_bytes()
    tar = write_tar(tmp_path / "p.tar.gz", {
        "proj/main.tex": b"\\documentclass{x}\\begin{document}Hi \\input{s}\\includegraphics{fig}\\end{document}",
        "proj/s.tex": b"there",
        "proj/fig.png": data,
    })
    doc = extract(tar)
    assert doc["main_file"] == "proj/main.tex"
    assert doc["texts"][0] == "Hi there" and doc["images"][1] == "proj/fig.png"


def _png_bytes() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (200, 100), (255, 0, 0)).save(buf, "PNG")
    return buf.getvalue()


# -- bad sources ---------------------------------------------------------------------------------


def test_corrupt_and_truncated_tarballs_are_error_tombstones(tmp_path, arxiv):
    (tmp_path / "junk.tar.gz").write_bytes(b"\x1f\x8b\x08\x00garbage that is not deflate")
    reason, detail = tombstone(read_one(tmp_path / "junk.tar.gz"))
    assert reason == "unreadable_archive" and "gzip" in detail
    cut = (arxiv / "tex.tar.gz").read_bytes()
    (tmp_path / "cut.tar.gz").write_bytes(cut[: len(cut) // 2])
    assert tombstone(read_one(tmp_path / "cut.tar.gz"))[0] == "unreadable_archive"
    (tmp_path / "text.tar").write_bytes(b"\\documentclass{article} plain text, not a tar")
    reason, detail = tombstone(read_one(tmp_path / "text.tar"))
    assert reason == "unreadable_archive" and "not a tar archive" in detail


def test_tombstone_keeps_the_live_schema(tmp_path):
    (tmp_path / "bad.tgz").write_bytes(b"nope")
    table = next(read_source(str(tmp_path / "bad.tgz"), str(tmp_path / "bad.tgz"), node="sources"))
    assert table.column_names == ["id", "url", "main_file", "tex", "files", "inputs_missing", *TOMBSTONE_COLS]
    assert table.schema.field("files").type == pa.list_(pa.struct([("path", pa.string()), ("data", pa.binary())]))


def test_source_without_tex_is_a_no_main_file_tombstone(tmp_path):
    (tmp_path / "fig.png").write_bytes(_png_bytes())
    (tmp_path / "notes.txt").write_text("\\begin{document} not a .tex file")
    reason, detail = tombstone(read_one(tmp_path))
    assert reason == "no_main_file" and "0 .tex of 2 files" in detail
    tar = write_tar(tmp_path / "frag.tar.gz", {"a.tex": b"just a fragment, no document"})
    assert tombstone(read_one(tar))[0] == "no_main_file"


def test_unsafe_tar_members_are_ignored(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in {"../evil.tex": b"\\documentclass{a}\\begin{document}EVIL\\end{document}",
                           "/abs.tex": b"\\documentclass{a}\\begin{document}ABS\\end{document}",
                           "ok.tex": b"\\begin{document}OK\\end{document}"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("link.tex")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tar.addfile(link)
    (tmp_path / "t.tar").write_bytes(buf.getvalue())
    row = read_one(tmp_path / "t.tar")
    assert row["main_file"] == "ok.tex" and "EVIL" not in row["tex"]
    assert not (tmp_path.parent / "evil.tex").exists()


def test_oversized_source_is_refused(tmp_path):
    tar = write_tar(tmp_path / "big.tar.gz", {"main.tex": b"\\begin{document}" + b"x" * 5000 + b"\\end{document}"})
    reason, detail = tombstone(read_one(tar, max_source_bytes=1000))
    assert reason == "source_too_large" and "1000" in detail


def test_gzipped_single_tex_and_plain_tex_files(tmp_path):
    doc = b"\\documentclass{article}\\begin{document}Single file paper.\\end{document}"
    (tmp_path / "paper.gz").write_bytes(gzip.compress(doc))
    (tmp_path / "2401.00001").write_bytes(gzip.compress(doc))  # arXiv's extension-less e-print
    (tmp_path / "plain.tex").write_bytes(doc)
    assert read_one(tmp_path / "paper.gz")["main_file"] == "paper.tex"
    row = read_one(tmp_path / "2401.00001")
    assert row["main_file"] == "2401.00001.tex" and row["url"] == "arxiv:2401.00001"
    assert extract(tmp_path / "plain.tex")["texts"] == ["Single file paper."]


def test_invalid_utf8_falls_back_to_latin1(tmp_path):
    (tmp_path / "main.tex").write_bytes(b"\\begin{document}Caf\xe9 cr\xe8me \\input{u}\\end{document}")
    (tmp_path / "u.tex").write_bytes("naïve".encode("utf-8"))  # each file decodes on its own
    doc = extract(tmp_path)
    assert doc["texts"] == ["Café crème naïve"]


# -- globbing and params -------------------------------------------------------------------------


def test_expand_sources_matches_directories_and_files(arxiv):
    found = expand_sources([str(arxiv / "tex*")])
    assert found == [str(arxiv / "tex"), str(arxiv / "tex.tar.gz")]
    with pytest.raises(FileNotFoundError, match="no source"):
        expand_sources([str(arxiv / "nothing-*")])


def test_params_reject_unknown_keys_and_document_every_field():
    with pytest.raises(ValidationError):
        ReadArxiv.Params(paths=["x"], bogus=1)
    with pytest.raises(ValidationError):
        ReadArxiv.Params(paths=["x"], max_input_depth=0)
    for params in (ReadArxiv.Params, LatexToInterleaved.Params):
        assert all(f.description for f in params.model_fields.values())
    assert ReadArxiv.Params(paths="a/*.tar.gz").paths == ["a/*.tar.gz"]
