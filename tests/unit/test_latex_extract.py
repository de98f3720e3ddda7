"""latex_to_interleaved's pure helpers and the op on hand-made rows (the real fixture is in test_arxiv.py)."""

from __future__ import annotations

import io

import pyarrow as pa
import pytest

from raypress.operators.curation.latex.cleaning import clean_latex, drop_environments
from raypress.operators.curation.latex.extract import normalise_text
from raypress.operators.curation.latex.figures import resolve_figure
from raypress.operators.curation.latex.macros import resolve_conditionals, strip_definitions
from raypress.operators.curation.latex.walk import document_pieces
from raypress.operators.curation.latex_to_interleaved import LatexToInterleaved
from raypress.operators.io.read_arxiv import FILE_TYPE
from raypress.operators.shared.latex_source import strip_comments


def png(width: int = 300, height: int = 200) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), (0, 128, 255)).save(buf, "PNG")
    return buf.getvalue()


def pdf(width_pt: float = 100, height_pt: float = 50, pages: int = 1) -> bytes:
    import pymupdf

    doc = pymupdf.open()
    for _ in range(pages):
        page = doc.new_page(width=width_pt, height=height_pt)
        page.draw_rect(pymupdf.Rect(10, 10, 40, 40), color=(1, 0, 0), fill=(1, 0, 0))
    return doc.tobytes()


def rows(*sources: tuple[str, dict[str, bytes]], main: str = "main.tex") -> pa.Table:
    """Rows as read_arxiv writes them: (tex, {path: bytes}) per source."""
    return pa.table({
        "id": [f"src{i}" for i in range(len(sources))],
        "url": [f"arxiv:000{i}" for i in range(len(sources))],
        "main_file": [main] * len(sources),
        "tex": [tex for tex, _ in sources],
        "files": pa.array([[{"path": p, "data": d} for p, d in files.items()] for _, files in sources],
                          pa.list_(FILE_TYPE)),
    })


def run(tex: str, files: dict[str, bytes] | None = None, **params) -> dict:
    op = LatexToInterleaved(LatexToInterleaved.Params(**params))
    return op.process_batch(rows((tex, files or {}))).to_pylist()[0]


def doc(body: str) -> str:
    return "\\documentclass{article}\n\\begin{document}\n" + body + "\n\\end{document}\n"


def text_of(body: str, parser: str = "texsoup", keep_math: bool = True) -> str:
    pieces, _ = document_pieces(clean_latex(doc(body)).body, keep_math, parser)
    return normalise_text("".join(p for p in pieces if isinstance(p, str)))


# -- pre-stripping -------------------------------------------------------------------------------


def test_comments_go_but_escaped_percent_stays():
    assert strip_comments("50\\% of it % gone\nnext") == "50\\% of it next"
    assert strip_comments("line\\\\% comment after a line break\nnext") == "line\\\\next"


def test_a_comment_eats_its_line_end_but_not_a_paragraph_break():
    assert strip_comments("hyphen%\n   ation") == "hyphenation"  # TeX joins the lines
    assert strip_comments("end of paragraph%\n\nnew one") == "end of paragraph\n\nnew one"
    assert strip_comments("a\n% whole line\n\nb") == "a\n\n\nb"


def test_iffalse_blocks_nest_and_else_branches_are_taken():
    src = "A \\iffalse B \\ifx\\a\\b C \\else D \\fi E \\else F \\fi G \\iftrue H \\else I \\fi J"
    assert resolve_conditionals(src).split() == ["A", "F", "G", "H", "J"]


def test_newif_switches_follow_their_setters():
    src = "\\newif\\ifdraft \\newif\\iffinal\\finaltrue x\\ifdraft DRAFT\\fi \\iffinal FINAL\\else NOTFINAL\\fi"
    assert resolve_conditionals(src).split() == ["x", "FINAL"]


def test_unpaired_conditionals_lose_only_their_token():
    assert resolve_conditionals("keep \\iffalse all of this").split() == ["keep", "all", "of", "this"]
    assert resolve_conditionals("stray \\fi and \\else here").split() == ["stray", "and", "here"]
    assert resolve_conditionals("$a \\iff b$ \\ifthenelse{x}{y}{z}") == "$a \\iff b$ \\ifthenelse{x}{y}{z}"


def test_drop_environments_counts_nesting_and_spares_an_unclosed_one():
    src = "a \\begin{table}x\\begin{table}y\\end{table}z\\end{table} b \\begin{tabular}{c} never closed"
    assert drop_environments(src, {"table", "tabular"}) == "a  b {c} never closed"


def test_zero_argument_macros_expand_and_definitions_disappear():
    src = ("\\newcommand{\\ours}{FooNet}\\def\\two#1#2{#1}\\newcommand\\wrap[1]{[#1]}"
           "\\renewcommand{\\section}{nope}\\newenvironment{box}{a}{b}")
    text, macros = strip_definitions(src)
    assert text == "" and macros == {"ours": "FooNet", "section": "nope"}
    assert text_of("\\newcommand{\\ours}{FooNet}\\ours{} beats \\ours.") == "FooNet beats FooNet."
    assert text_of("\\renewcommand{\\section}{nope}\\section{Kept}") == "Kept"


def test_preamble_goes_but_its_title_stays_and_the_tail_goes():
    tex = "\\documentclass{article}\\usepackage{x}\\title{A Great Paper}\\begin{document}Body.\\end{document}Tail"
    assert normalise_text("".join(p for p in document_pieces(clean_latex(tex).body)[0])) == "A Great Paper\n\nBody."


def test_verbatim_examples_cannot_end_the_document_early():
    body = "Before.\n\\begin{verbatim}\n\\end{document}\n\\end{verbatim}\nAfter. \\verb|a%b|"
    assert text_of(body) == "Before.\n\nAfter. a%b"


# -- text rules ----------------------------------------------------------------------------------


BODY = r"""
\section{Introduction}\label{sec:intro}
We study $x^2+1$ as in~\cite{knuth} and \citep[p.~3]{a,b}; see Fig.~\ref{f} and \eqref{e}.
\begin{equation} E = mc^2 \end{equation}
\vspace{2mm}\noindent{\bf Bold} \textit{italic} \href{http://x.org}{a link} \footnote{A note.}

\begin{table}[t]\begin{tabular}{cc} CELL & CELL \\ \end{tabular}\caption{Table cap}\end{table}
\begin{itemize}\item first \item[(b)] second\end{itemize}
Line one\\ line two.
\bibliographystyle{plain}\bibliography{refs}
\begin{thebibliography}{9}\bibitem{k} Knuth, TAOCP.\end{thebibliography}
"""
EXPECTED = ("Introduction\n\n"
            "We study $x^2+1$ as in and ; see Fig. and . \\begin{equation} E = mc^2 \\end{equation} "
            "Bold italic a link A note.\n\n"
            "first\n(b) second\nLine one\nline two.")


@pytest.mark.parametrize("parser", ["texsoup", "regex"])
def test_text_rules_are_the_same_for_both_parsers(parser):
    assert text_of(BODY, parser) == EXPECTED


def test_math_can_be_dropped():
    assert text_of("Energy $E=mc^2$ is \\[ x \\] conserved.", keep_math=False) == "Energy is conserved."


def test_texsoup_failure_falls_back_to_the_regex_walker():
    out = run(doc("Intro text. \\begin{itemize}\\item one \\end{enumerate} and $x$ \\cite{c} after."))
    assert out["latex_parser"] == "regex"
    assert out["texts"] == ["Intro text.\none\nand $x$ after."]


def test_accents_and_escapes_become_characters():
    assert text_of("Schr\\\"odinger, Erd\\H{o}s, \\v{C}ech, na\\\"{\\i}ve, 100\\%, A\\&B, a\\_b") == \
        "Schrödinger, Erdős, Čech, naïve, 100%, A&B, a_b"


# -- figures -------------------------------------------------------------------------------------


def test_resolve_figure_tries_extensions_graphicspath_and_stays_inside():
    files = {"fig/a.png": b"", "fig/b.PDF": b"", "img/c.jpg": b"", "d.eps": b"", "x.png": b""}
    assert resolve_figure("fig/a", "", [], files) == "fig/a.png"
    assert resolve_figure(" ./fig/a.png ", "", [], files) == "fig/a.png"
    assert resolve_figure("fig/b", "", [], files) == "fig/b.PDF"
    assert resolve_figure("c", "", ["img/"], files) == "img/c.jpg"
    assert resolve_figure("d", "", [], files) == "d.eps"
    assert resolve_figure("../x", "sub", [], files) == "x.png"  # inside the source, above the root
    assert resolve_figure("../../x", "sub", [], files) is None  # outside the source
    assert resolve_figure("missing", "", [], files) is None


def test_figures_get_header_metadata_and_graphicspath_works():
    body = "\\graphicspath{{figs/}}\\begin{document}A \\includegraphics[width=3cm]{plot} B\\end{document}"
    out = run(body, {"figs/plot.png": png(300, 200)})
    assert out["images"] == [None, "figs/plot.png", None]
    meta = out["image_metadata"][1]
    assert (meta["width"], meta["height"], meta["format"], meta["page"]) == (300, 200, "png", None)
    assert len(meta["sha256"]) == 64 and out["texts"] == ["A", None, "B"]


def test_pdf_figure_is_rendered_to_png_or_kept_as_pdf():
    files = {"f.pdf": pdf(100, 50)}
    rendered = run(doc("x \\includegraphics{f}"), files)
    meta = rendered["image_metadata"][1]
    assert (meta["width"], meta["height"], meta["format"]) == (200, 100, "png")  # 144 dpi = 2x points
    assert rendered["image_bytes"][1].startswith(b"\x89PNG")
    kept = run(doc("x \\includegraphics{f}"), files, render_pdf_figures=False)
    meta = kept["image_metadata"][1]
    assert (meta["width"], meta["height"], meta["format"]) == (None, None, "pdf")
    assert kept["image_bytes"][1] == files["f.pdf"]


def test_eps_is_kept_with_null_size():
    out = run(doc("x \\includegraphics{f.eps}"), {"f.eps": b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n"})
    assert out["images"][1] == "f.eps" and out["image_metadata"][1]["format"] == "eps"
    assert out["image_metadata"][1]["width"] is None


def test_unresolved_and_corrupt_figures_are_dropped_and_counted():
    files = {"bad.png": b"\x89PNG\r\n\x1a\n not really", "bad2.pdf": b"%PDF-1.4 broken", "ok.jpg": b""}
    out = run(doc("before \\includegraphics{nowhere} \\includegraphics{bad} \\includegraphics{bad2} after"), files)
    assert out["figures_unresolved"] == 1 and out["figures_unreadable"] == 2
    assert out["images"] == [None] and out["texts"] == ["before after"]  # the text around them is one position


# -- the op --------------------------------------------------------------------------------------


def test_batch_rows_stay_aligned_and_source_columns_go():
    table = rows((doc("first"), {}), (doc("second \\includegraphics{p}"), {"p.png": png()}))
    out = LatexToInterleaved(LatexToInterleaved.Params()).process_batch(table)
    assert out.num_rows == 2 and "tex" not in out.column_names and "files" not in out.column_names
    got = out.to_pylist()
    assert [r["texts"] for r in got] == [["first"], ["second", None]]
    assert [r["id"] for r in got] == ["src0", "src1"] and [r["url"] for r in got] == ["arxiv:0000", "arxiv:0001"]
    assert out.schema.field("figures_unresolved").type == pa.int32()
    kept = LatexToInterleaved(LatexToInterleaved.Params(keep_source=True)).process_batch(table)
    assert kept.column("tex").to_pylist() == table.column("tex").to_pylist()


def test_regex_parser_can_be_chosen_and_takes_over_long_bodies():
    out = run(doc("\\section{S} text"), parser="regex")
    assert out["latex_parser"] == "regex" and out["texts"] == ["S\n\ntext"]
    body = doc("\\section{S} " + "word " * 60)  # a body of ~315 characters
    assert run(body, texsoup_max_chars=200)["latex_parser"] == "regex"
    assert run(body, texsoup_max_chars=400)["latex_parser"] == "texsoup"


def test_empty_document_and_missing_source_raise_naming_the_file():
    with pytest.raises(ValueError, match="main.tex: no text or figures left"):
        run(doc("\\iffalse everything \\fi % and a comment"))
    table = rows((doc("x"), {})).set_column(3, "tex", pa.array([None], pa.string()))
    with pytest.raises(ValueError, match="src0: no LaTeX source"):
        LatexToInterleaved(LatexToInterleaved.Params()).process_batch(table)


@pytest.mark.parametrize("parser", ["texsoup", "regex"])
def test_groups_after_a_dropped_command_are_still_text(parser):
    body = "\\label{x} {\\bf kept} \\setlength{\\parskip}{3pt}{also} \\section{T} {\\em after} \\href{u}{link}"
    assert text_of(body, parser) == "kept also\n\nT\n\nafter link"


def test_old_figure_commands_and_protected_dots_resolve():
    files = {"a.eps": b"%!PS-Adobe-3.0 EPSF-3.0\n", "b.png": png(), "fig.v2.png": png()}
    out = run(doc("\\epsfig{file=a.eps,width=3cm} x \\psfig{figure=b,height=2in} y \\includegraphics{{fig.v2}.png}"),
              files)
    assert [i for i in out["images"] if i] == ["a.eps", "b.png", "fig.v2.png"]


def test_a_macro_after_a_line_break_is_expanded_but_a_line_break_is_not_a_macro():
    assert text_of("\\def\\ours{FooNet}a\\\\\\ours b \\ours") == "a\nFooNet b FooNet"
