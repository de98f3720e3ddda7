"""Data-Juicer's LaTeX mappers (remove_comments/expand_macro/remove_header/remove_bibliography_mapper).

Outputs are pinned on hand cases built from Data-Juicer's regexes and on Data-Juicer's own test
cases; where the ``regex`` package is installed (Data-Juicer runs its regexes with it), Data-Juicer's
code, reproduced below, is run on the same texts, on the arXiv test tree and on generated LaTeX."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.operators.base import OpKind
from raypress.operators.registry import get_op
from raypress.operators.text.expand_macro_mapper import ExpandMacroMapper
from raypress.operators.text.remove_bibliography_mapper import RemoveBibliographyMapper
from raypress.operators.text.remove_comments_mapper import RemoveCommentsMapper
from raypress.operators.text.remove_header_mapper import RemoveHeaderMapper

MAPPERS = {
    "remove_comments_mapper": RemoveCommentsMapper,
    "expand_macro_mapper": ExpandMacroMapper,
    "remove_header_mapper": RemoveHeaderMapper,
    "remove_bibliography_mapper": RemoveBibliographyMapper,
}


def run(cls, texts, **params):
    op = cls(cls.Params(**params))
    return op.process_batch(pa.table({"text": pa.array(texts, pa.string())})).column("text").to_pylist()


def one(cls, text, **params):
    return run(cls, [text], **params)[0]


@pytest.mark.parametrize("name", sorted(MAPPERS))
def test_registered_as_mapper(name):
    cls = get_op(name)
    assert cls is MAPPERS[name]
    assert cls.name == name and cls.kind is OpKind.MAPPER and cls.requires == {}
    assert cls(cls.Params()).columns_read() == ("text",)


def test_data_juicer_params_and_defaults():
    p = RemoveCommentsMapper.Params()
    assert (p.doc_type, p.inline, p.multiline) == ("tex", True, True)
    # reproduced_redpajama/redpajama-arxiv.yaml passes a list
    assert RemoveCommentsMapper.Params(doc_type=["md", "tex"]).doc_type == ["md", "tex"]
    assert RemoveHeaderMapper.Params().drop_no_head is True
    for cls in MAPPERS.values():
        with pytest.raises(ValidationError):
            cls.Params(no_such_param=1)


@pytest.mark.parametrize("cls", list(MAPPERS.values()))
def test_other_columns_nulls_and_text_key_survive(cls):
    table = pa.table({"id": ["a", "b"], "content": ["x % y", None], "text": ["\\section{S}%z", "t"]})
    out = cls(cls.Params(text_key="content")).process_batch(table)
    assert out.column_names == ["id", "content", "text"]
    assert out.column("content").to_pylist()[1] is None
    assert out.column("text").to_pylist() == ["\\section{S}%z", "t"]
    assert out.column("id").to_pylist() == ["a", "b"]


# -- remove_comments_mapper: [^\\]%.+$ (MULTILINE), then ^%.*\n? -----------------------------

COMMENT_CASES = [
    ("a % c\nb", "a\nb"),  # the character before '%' goes too
    ("100\\% sure % note", "100\\% sure"),  # \% is a percent sign
    ("a\\\\% c", "a\\\\% c"),  # TeX: a line break, then a comment; the regex sees '\' before '%'
    ("x%\ny", "x%\ny"),  # '.+': a bare '%' at a line end stays
    ("%head\nbody", "body"),  # at position 0 nothing precedes '%': the line pass removes it
    ("a\n%c\nb", "a\nb"),  # '[^\\]' matches the newline: the inline pass joins the lines
    ("a%%b\nc", "\nc"),
    ("%\n%\nx", "x"),
    ("no comment here", "no comment here"),
    ("", ""),
]


def test_remove_comments_cases():
    assert run(RemoveCommentsMapper, [t for t, _ in COMMENT_CASES]) == [want for _, want in COMMENT_CASES]


def test_remove_comments_inline_and_multiline_switches():
    text = "%top\na % c\n%d\ne"
    assert one(RemoveCommentsMapper, text) == "a\ne"
    assert one(RemoveCommentsMapper, text, inline=False) == "a % c\ne"
    assert one(RemoveCommentsMapper, text, multiline=False) == "%top\na\ne"
    assert one(RemoveCommentsMapper, text, inline=False, multiline=False) == text


def test_remove_comments_data_juicer_case():
    # Data-Juicer's test_remove_comments_mapper: every '%%' line goes, '\affiliation{%' stays.
    want = "".join(line for line in SIGCONF.splitlines(keepends=True) if not line.startswith("%"))
    assert "\\affiliation{%\n" in want
    assert one(RemoveCommentsMapper, SIGCONF, doc_type="tex", inline=True, multiline=True) == want


# -- expand_macro_mapper -----------------------------------------------------------------------

MACRO_CASES = [
    # the definition itself is rewritten; \Rb is another name; the follower character stays
    ("\\newcommand{\\R}{\\mathbb{R}}\n$x \\in \\R$, \\Rb.",
     "\\newcommand{\\mathbb{R}}{\\mathbb{R}}\n$x \\in \\mathbb{R}$, \\Rb."),
    # the follower is consumed: of two adjacent uses only the first expands; none at the very end
    ("\\def\\x{y}\n\\x\\x.", "\\defy{y}\ny\\x."),
    ("\\def\\x{y}\n\\x", "\\defy{y}\n\\x"),
    # the body is inserted literally: no escapes, no group references
    ("\\def\\e{é\\1}\n\\e ", "\\defé\\1{é\\1}\né\\1 "),
    # one definition per line, ending in '}': a trailing % or an argument count disables it
    ("\\newcommand{\\x}{y}%\n\\x ", "\\newcommand{\\x}{y}%\n\\x "),
    ("\\newcommand{\\x}[1]{#1}\n\\x{a}", "\\newcommand{\\x}[1]{#1}\n\\x{a}"),
    ("\\newcommand\\x{y}\n\\x ", "\\newcommand\\x{y}\n\\x "),  # no braces round the name
    # \def: spaces around the name; a later definition's body wins
    ("\\def \\x {y}\n\\x ", "\\def y {y}\ny "),
    ("\\newcommand{\\a}{1}\n\\def\\a{2}\n\\a ", "\\newcommand{2}{1}\n\\def2{2}\n2 "),
    # macros expand one after the other in definition order, so \b -> \c -> z
    ("\\newcommand{\\b}{\\c}\n\\newcommand{\\c}{z}\n\\b ", "\\newcommand{z}{z}\n\\newcommand{z}{z}\nz "),
    # Data-Juicer's regex package does not count U+001C as whitespace (re's \s does)
    ("\\def\x1c\\x{y}\n\\x ", "\\def\x1c\\x{y}\n\\x "),
    ("no macros", "no macros"),
]


def test_expand_macro_cases():
    assert run(ExpandMacroMapper, [t for t, _ in MACRO_CASES]) == [want for _, want in MACRO_CASES]


def test_expand_macro_data_juicer_case():
    # Data-Juicer's test_expand_macro_mapper: exactly two one-line, argument-less definitions
    # (\theHalgorithm and \alambic) expand; \newcommand\Zerocost and \cmark...% do not.
    want = ICML_PREAMBLE.replace(
        "\\newcommand{\\theHalgorithm}{\\arabic{algorithm}}",
        "\\newcommand{\\arabic{algorithm}}{\\arabic{algorithm}}",
    ).replace("\\def \\alambic {", "\\def \\includegraphics[height=1.52ex]{img/alembic-crop.pdf}\\xspace {")
    assert want != ICML_PREAMBLE
    assert one(ExpandMacroMapper, ICML_PREAMBLE) == want


# -- remove_header_mapper ----------------------------------------------------------------------

HEADER_CASES = [
    ("\\documentclass{a}\n\\begin{document}\n\\section{Intro}\nText", "\\section{Intro}\nText"),
    ("pre \\subsection*{S} mid \\chapter{C}", "\\subsection*{S} mid \\chapter{C}"),  # the first one
    ("pre\\section[short]{Long}x", "\\section[short]{Long}x"),
    ("pre\n\\part{a\nb}", "\\part{a\nb}"),  # DOTALL: a title over lines
    ("pre\\paragraph{P} text", "pre\\paragraph{P} text"),  # Data-Juicer's pattern lacks a '|' here
    ("pre\\paragraph{P}\\subparagraph{Q} t", "\\paragraph{P}\\subparagraph{Q} t"),
    ("pre\\sectionx{A}", "pre\\sectionx{A}"),
    ("pre \\section{never closed", "pre \\section{never closed"),
    ("\\section{S}", "\\section{S}"),
]


def test_remove_header_cases():
    assert run(RemoveHeaderMapper, [t for t, _ in HEADER_CASES]) == [want for _, want in HEADER_CASES]


@pytest.mark.parametrize("drop_no_head", [True, False])
def test_remove_header_keeps_texts_without_header_like_data_juicer(drop_no_head):
    # Data-Juicer sets text = "" and then `continue`s past the write-back: the text is kept whole.
    text = "\\begin{document}\nno header here\n\\end{document}"
    assert one(RemoveHeaderMapper, text, drop_no_head=drop_no_head) == text


def test_remove_header_data_juicer_case():
    want = SIGCONF[SIGCONF.index("\\section{Introduction}"):]
    assert one(RemoveHeaderMapper, SIGCONF) == want


# -- remove_bibliography_mapper ----------------------------------------------------------------

BIB_CASES = [
    ("body\\appendix more", "body"),
    ("a\\bibliographystyle{plain}\nb", "a\\bibliographystyle{plain}\nb"),
    ("a\\bibliography{refs", "a\\bibliography{refs"),  # no '}' after it
    ("a \\begin{References} b", "a \\begin{References} b"),
    ("a \\begin{REFERENCES} b", "a "),
    ("a\n\\begin{thebibliography}{9}\n\\bibitem{x} X\n\\end{thebibliography}\n", "a\n"),
    ("x\\bibliography{r}\n\\appendix y", "x"),  # the earliest one
    ("x\\bibliography{\n} y", "x"),
    # Data-Juicer's two test cases
    ("%%\n%% This is file `sample-sigconf.tex\\clearpage\n\\bibliographystyle{ACM-Reference-Format}\n"
     "\\bibliography{sample-base}\n\\end{document}\n\\endinput\n%%\n%% End of file `sample-sigconf.tex'.\n",
     "%%\n%% This is file `sample-sigconf.tex\\clearpage\n\\bibliographystyle{ACM-Reference-Format}\n"),
    ("%%\n%% This is file `sample-sigconf.tex\\clearpage\n\\begin{references}\n\\end{document}\n\\endinput\n%%\n"
     "%% End of file `sample-sigconf.tex'.\n",
     "%%\n%% This is file `sample-sigconf.tex\\clearpage\n"),
]


def test_remove_bibliography_cases():
    assert run(RemoveBibliographyMapper, [t for t, _ in BIB_CASES]) == [want for _, want in BIB_CASES]


# -- real LaTeX: the arXiv test tree (google-research/arxiv-latex-cleaner) -------------------------


@pytest.fixture(scope="module")
def arxiv_texts(shared_data: Path) -> dict[str, str]:
    """Its .tex files as they are, and the whole paper as MINT-1T's arXiv reader inlines it (the
    tarball is the input of pipelines/mint1t_arxiv.yaml)."""
    root = shared_data / "arxiv"
    if not (root / "tex.tar.gz").is_file():
        pytest.skip("arXiv fixture not in the shared data")
    from raypress.operators.io.read_arxiv import read_source

    texts = {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.tex"))}
    row = next(iter(read_source("tex.tar.gz", str(root / "tex.tar.gz"), "n"))).to_pylist()[0]
    texts["inlined"] = row["tex"]
    return texts


def test_remove_comments_on_the_arxiv_tree(arxiv_texts):
    texts = arxiv_texts
    out = run(RemoveCommentsMapper, list(texts.values()))
    main = out[list(texts).index("tex/main.tex")]
    assert "% Whole line comment" not in main and "Inline comment" not in main
    assert "This is a percent \\%." in main
    assert "\\includegraphics{images/im1_included.png}" in main
    assert "%\\includegraphics{images/im_not_included}" not in main
    for text in out:  # the inline pass joins comment lines to the line above, the line pass takes the rest
        assert not any(line.startswith("%") for line in text.split("\n"))


# -- Data-Juicer's own code, where its regex package is installed --------------------------------


def _data_juicer():
    """Data-Juicer's per-text code of the four ops (data_juicer/ops/mapper/, commit c07c2d7,
    Apache-2.0), with the ``regex`` package it uses.  Returns the four functions."""
    rx = pytest.importorskip("regex")

    def comments(text, inline=True, multiline=True):
        if inline:
            text = rx.sub(pattern=r"[^\\]%.+$", repl=r"", string=text, flags=rx.MULTILINE)
        if multiline:
            text = rx.sub(pattern=r"(?m)^%.*\n?", repl=r"", string=text, flags=rx.MULTILINE)
        return text

    def macros(text):
        found = {}
        for reg in (rx.compile(r"\\\bnewcommand\b\*?\{(\\[a-zA-Z0-9]+?)\}\{(.*?)\}$", flags=rx.MULTILINE),
                    rx.compile(r"\\def\s*(\\[a-zA-Z0-9]+?)\s*\{(.*?)\}$", flags=rx.MULTILINE)):
            for m in reg.finditer(text):
                found[m.group(1).encode("unicode-escape").decode("utf-8")] = \
                    m.group(2).encode("unicode-escape").decode("utf-8")
        for name, value in found.items():
            text = rx.sub(pattern=r"(" + name + r")" + r"([^a-zA-Z0-9])", repl=value + r"\2", string=text)
        return text

    header = (r"^(.*?)(" r"\\\bchapter\b\*?(?:\[(.*?)\])?\{(.*?)\}|" r"\\\bpart\b\*?(?:\[(.*?)\])?\{(.*?)\}|"
              r"\\\bsection\b\*?(?:\[(.*?)\])?\{(.*?)\}|" r"\\\bsubsection\b\*?(?:\[(.*?)\])?\{(.*?)\}|"
              r"\\\bsubsubsection\b\*?(?:\[(.*?)\])?\{(.*?)\}|" r"\\\bparagraph\b\*?(?:\[(.*?)\])?\{(.*?)\}"
              r"\\\bsubparagraph\b\*?(?:\[(.*?)\])?\{(.*?)\}" r")")

    def remove_header(text):
        if not rx.search(header, text, flags=rx.DOTALL):
            return text  # `continue`: the sample is not written back
        return rx.sub(pattern=header, repl=r"\2", string=text, flags=rx.DOTALL)

    bib = (r"(\\appendix|\\begin\{references\}|\\begin\{REFERENCES\}|\\begin\{thebibliography\}|"
           r"\\bibliography\{.*\}).*$")

    def remove_bibliography(text):
        return rx.sub(pattern=bib, repl=r"", string=text, flags=rx.DOTALL)

    return comments, macros, remove_header, remove_bibliography


def generated_latex(n: int, seed: int = 0) -> list[str]:
    """LaTeX-like texts mixing definitions, uses, headers, comments and bibliography commands."""
    rng = random.Random(seed)
    names = ["\\a", "\\ab", "\\R", "\\R2", "\\x1", "\\foo", "\\fo"]
    bodies = ["x", "\\mathbb{R}", "é–😀", "a\tb", "\\1", "\\g<0>", "", "{}", "}", "\\", "%", "\r", "\x1c", "a}b{c"]
    spaces = ["", " ", "\t", "\n", "\x1c"]
    pieces = ["\\section{A}", "\\section*{B}", "\\section[s]{C}", "\\paragraph{P}", "\\paragraph{P}\\subparagraph{Q}",
              "\\chapter{", "\\part[x", "\\sectionx{E}", "\\appendix", "\\bibliography{r}", "\\bibliography{",
              "\\begin{REFERENCES}", "text ", "%c\n", "a%b\n", "\\%", "\\\\%x", "\n", "%", "{", "}"]

    def piece() -> str:
        kind = rng.random()
        name, body = rng.choice(names), "".join(rng.choice(bodies) for _ in range(rng.randint(0, 3)))
        if kind < 0.25:
            return rng.choice([f"\\newcommand{{{name}}}{{{body}}}", f"\\newcommand*{{{name}}}{{{body}}}",
                               f"\\def{rng.choice(spaces)}{name}{rng.choice(spaces)}{{{body}}}"]) + \
                rng.choice(["\n", "%\n", ""])
        if kind < 0.5:
            return name + rng.choice([" ", ".", "\\", "{", "x", "1", "\n", "", "é"])
        return rng.choice(pieces)

    return ["".join(piece() for _ in range(rng.randint(0, 14))) for _ in range(n)]


def assert_same_as_data_juicer(texts: list[str]) -> None:
    comments, macros, remove_header, remove_bibliography = _data_juicer()
    for switches in ({}, {"inline": False}, {"multiline": False}):
        assert run(RemoveCommentsMapper, texts, **switches) == [comments(t, **switches) for t in texts]
    assert run(ExpandMacroMapper, texts) == [macros(t) for t in texts]
    assert run(RemoveHeaderMapper, texts) == [remove_header(t) for t in texts]
    assert run(RemoveBibliographyMapper, texts) == [remove_bibliography(t) for t in texts]


def test_same_output_as_data_juicer_code_on_cases_and_generated_latex():
    texts = [t for cases in (COMMENT_CASES, MACRO_CASES, HEADER_CASES, BIB_CASES) for t, _ in cases]
    generated = generated_latex(3000)
    # the generated texts do exercise every op
    for cls in MAPPERS.values():
        assert sum(a != b for a, b in zip(run(cls, generated), generated)) > 300, cls.name
    assert_same_as_data_juicer([*texts, SIGCONF, ICML_PREAMBLE, *generated])


def test_same_output_as_data_juicer_code_on_the_arxiv_tree(arxiv_texts):
    assert_same_as_data_juicer(list(arxiv_texts.values()))


# -- Data-Juicer's test texts (tests/ops/mapper/, Apache-2.0), verbatim ----------------------------

SIGCONF = (
    '%%\n'
    "%% This is file `sample-sigconf.tex',\n"
    '%% The first command in your LaTeX source must be the \\documentclass command.\n'
    '\\documentclass[sigconf,review,anonymous]{acmart}\n'
    '%% NOTE that a single column version is required for \n'
    '%% submission and peer review. This can be done by changing\n'
    '\\input{math_commands.tex}\n'
    '%% end of the preamble, start of the body of the document source.\n'
    '\\begin{document}\n'
    '%% The "title" command has an optional parameter,\n'
    '\\title{Hierarchical Cross Contrastive Learning of Visual Representations}\n'
    '%%\n'
    '%% The "author" command and its associated commands are used to define\n'
    '%% the authors and their affiliations.\n'
    '\\author{Hesen Chen}\n'
    '\\affiliation{%\n'
    '  \\institution{Alibaba Group}\n'
    '  \\city{Beijing}\n'
    '  \\country{China}}\n'
    '\\email{hesen.chs@alibaba-inc.com}\n'
    '%% By default, the full list of authors will be used in the page\n'
    '\\begin{abstract}The rapid\n'
    '\\end{abstract}\n'
    '\\begin{CCSXML}\n'
    '\\ccsdesc[500]{Computing methodologies~Image representations}\n'
    '%% Keywords. The author(s) should pick words that accurately describe\n'
    '\\keywords{self-supervised,  ontrastive Learning, hierarchical projection, cross-level}\n'
    '%% page.\n'
    '\\begin{teaserfigure}\n'
    '\\end{teaserfigure}\n'
    '%% This command processes the author and affiliation and title\n'
    '\\maketitle\n'
    '\\section{Introduction}\n'
    '\\begin{itemize}\n'
    '\\end{itemize}\n'
    '\\section{Related Work}\n'
    '\\label{gen_inst} Self-supervised\n'
    '\\section{Method}\n'
    '\\label{method}In this section,\n'
    '\\subsection{Framework} kkk\n'
    '\\subsection{Cross Contrastive Loss}\n'
    'Since $\\sZ^n$ are extracted\n'
    '\\subsection{Implementation details}\n'
    '\\textbf{Image augmentations} We use\n'
    '\\textbf{Architecture} We use\n'
    '\\textbf{Optimization} We adapt \n'
    '\\section{Experiments}\n'
    '\\label{experiments}In this section\n'
    '\\subsection{Linear and Semi-Supervised Evaluations on ImageNet}\n'
    '\\textbf{Linear evaluation on ImageNet} We firs\n'
    '\\textbf{Semi-supervised learning on ImageNet} We simply\n'
    '\\subsection{Transfer to other datasets and tasks}\n'
    '\\textbf{Image classification with fixed features} We follow\n'
    '\\section{Ablations} We present\n'
    '\\subsection{Influence of hierarchical projection head and cross contrastive loss} get out\n'
    '\\subsection{Levels and depth of projector network}\n'
    '\\end{center}\n'
    "\\caption{\\label{figure3} \\textbf{Different way of cross-correlation on 3 level hierarchical projection head.} '=' denotes stop gradient.}\n"
    '\\end{figure}\n'
    '\\subsection{Analyze of} In this\n'
    '\\textbf{Similarity between} Using SimSiam\n'
    '\\textbf{Feature similarity} We extracted\n'
    '\\section{Conclusion}\n'
    'We propose HCCL\n'
    '\\clearpage\n'
    '\\bibliographystyle{ACM-Reference-Format}\n'
    '\\bibliography{sample-base}\n'
    '\\end{document}\n'
    '\\endinput\n'
    '%%\n'
    "%% End of file `sample-sigconf.tex'.\n"
)

ICML_PREAMBLE = (
    '\\documentclass{article}\n'
    '% Recommended, but optional, packages for figures and better typesetting:\n'
    '\\usepackage{microtype}\n'
    '\\usepackage{graphicx}\n'
    '\n'
    '% Attempt to make hyperref and algorithmic work together better:\n'
    '\\newcommand{\\theHalgorithm}{\\arabic{algorithm}}\n'
    '% For theorems and such\n'
    '\\usepackage{amsmath}\n'
    '\n'
    '%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%\n'
    '% THEOREMS\n'
    '%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%\n'
    '\\theoremstyle{plain}\n'
    '\\newtheorem{lemma}[theorem]{Lemma}\n'
    '\\newtheorem{corollary}[theorem]{Corollary}\n'
    '\\theoremstyle{definition}\n'
    '\n'
    '\\usepackage[textsize=small]{todonotes}\n'
    '\\setuptodonotes{inline}\n'
    '\n'
    '\\usepackage{makecell}\n'
    '\\newcommand{\\cmark}{\\ding{51}\\xspace}%\n'
    '\\newcommand{\\xmark}{\\ding{55}\\xspace}%\n'
    '\n'
    '\\def \\alambic {\\includegraphics[height=1.52ex]{img/alembic-crop.pdf}\\xspace}\n'
    '\n'
    '\\newcommand\\binke[1]{{\\color{blue} \\footnote{\\color{blue}binke: #1}} }\n'
    '\\newcommand\\Zerocost{Zero-cost}\n'
    '\\newcommand\\imagenet{ImageNet}\n'
    '\n'
    '\\begin{document}\n'
    '\n'
    '\\begin{abstract}\n'
    'The wide\n'
    '\\end{abstract}\n'
    '\\section{Introduction}\n'
    '\\label{introduction}\n'
    'The main contributions are summarized as follows:\n'
    '\\section{Background and Related Work}\\label{background}\n'
    '\\subsection{One-Shot NAS} In one-shot NAS\n'
    '\\section{PreNAS}\\label{method}In this\n'
    '\\subsection{One-Shot NAS with Preferred Learning}\n'
    'In the specialization stage, the optimal architectures under given  resource constraints can be directly obtained:\n'
    '\\begin{equation}\n'
    '\\widetilde{\\mathcal{A}}^* = \\widetilde{\\mathcal{A}} .\n'
    '\\end{equation}\n'
    '\\subsection{Zero-Cost Transformer Selector}\\label{sub:layerNorm}\n'
    '\\subsection{Performance Balancing} We discuss\n'
    '\\section{Experiments}\\label{experiments}\n'
    '\\subsection{Setup}\n'
    '\\subsection{Main Results}\\label{sec:sota}\n'
    '\\subsection{Analysis and Ablation study}\\label{ablation}\n'
    '\\begin{figure}[t]\n'
    '\\vskip 0.1in\n'
    '    \\centering\n'
    '    \\subfigure[Search spaces]{\\includegraphics[width=0.36\\linewidth]{img/search_space.pdf}\\label{fg:search_space:a}}%\n'
    '    \\hfil%\n'
    '    \\subfigure[Error distributions]{\\includegraphics[width=0.58\\linewidth]{img/cumulation.pdf}\\label{fg:search_space:b}}\n'
    '    \\caption{Model quality}\n'
    '\\vskip -0.1in\n'
    '\\end{figure}\n'
    '\\paragraph{Effect of Performance Balancing} During\n'
    '\\subsection{Transfer Learning Results}\n'
    '\\subsection{CNN Results} in terms of similar FLOPs.\n'
    '\\FloatBarrier\n'
    '\\section{Conclusion}\\label{conclusion} In this\n'
    '% Acknowledgements should only appear in the accepted version.\n'
    '\\bibliography{ref}\n'
    '\\bibliographystyle{icml2023}\n'
    '\\clearpage\n'
    '\\appendix\n'
    '\\onecolumn\n'
    '\\section{Statistical}\n'
    '\\label{appendix:snipAnalysis} We analyze\n'
    '\\section{The Greedy Algorithm}\n'
    '\\label{appendix:greedy}\n'
    '\\section{Regularization \\& Data Augmentation}\\label{appendix:aug}\n'
    '\\renewcommand{\\arraystretch}{1.2}\n'
    '\\end{document}\n'
)
