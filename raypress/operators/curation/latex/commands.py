"""What the LaTeX extractor knows of LaTeX's commands and environments, and how it treats each.

One table per treatment (dropped with their content, kept as math, made a paragraph, placing a
figure, a symbol...) and ``command_kind``, the single place that maps a command to its treatment:
the cleaning steps (macro expansion) and both walkers (TexSoup's and the regex one) ask it, so
the three never disagree on a command.
"""

from __future__ import annotations

PARA = "\n\n"
LINE = "\ue000"  # a hard line break that survives whitespace collapsing (private-use char)

# Environments whose content is not TeX to parse (code, examples, the comment package's text).
VERBATIM_ENVIRONMENTS = frozenset(
    {"comment", "verbatim", "verbatim*", "Verbatim", "BVerbatim", "lstlisting", "minted", "filecontents",
     "filecontents*"}
)
# Environments whose content is not prose (or not text at all): removed with their content.
DROP_ENVIRONMENTS = frozenset(
    {"comment", "table", "table*", "sidewaystable", "wraptable", "threeparttable", "tabular", "tabular*",
     "tabularx", "tabulary", "longtable", "supertabular", "tabu", "thebibliography", "tikzpicture",
     "pgfpicture", *VERBATIM_ENVIRONMENTS}
)
# Math environments: kept as their LaTeX source.
MATH_ENVIRONMENTS = frozenset(
    name + star
    for name in ("equation", "align", "gather", "multline", "flalign", "alignat", "eqnarray", "displaymath",
                 "math", "dmath")
    for star in ("", "*")
)
# Commands that place a figure: graphicx, and epsf/psfig as older arXiv papers use them.
FIGURE_COMMANDS = frozenset({"includegraphics", "epsfbox", "epsffile", "epsfig", "psfig"})
# Commands whose title-like argument becomes a paragraph of its own.
TITLE_COMMANDS = frozenset(
    {"title", "part", "chapter", "section", "subsection", "subsubsection", "paragraph", "subparagraph",
     "caption", "subcaption", "abstract"}
)
# Commands dropped together with all their arguments (references, layout, definitions, metadata).
DROP_COMMANDS = frozenset(
    {"label", "ref", "eqref", "autoref", "cref", "Cref", "pageref", "nameref", "vref", "nocite", "bibliography",
     "bibliographystyle", "printbibliography", "addbibresource", "bibitem", "vspace", "hspace", "vskip",
     "hskip", "kern", "setlength", "addtolength", "setcounter", "addtocounter", "stepcounter",
     "refstepcounter", "newcounter", "newcommand", "renewcommand", "providecommand", "newenvironment",
     "renewenvironment", "def", "gdef", "edef", "xdef", "let", "newtheorem", "theoremstyle", "usepackage",
     "RequirePackage", "documentclass", "input", "include", "includeonly", "graphicspath",
     "tikzsetnextfilename", "tikzset", "tikzexternalize", "usetikzlibrary", "pgfplotsset", "addplot",
     "color", "pagestyle", "thispagestyle", "pagenumbering", "hypersetup", "definecolor",
     "DeclareMathOperator", "captionsetup", "author", "affiliation", "affil", "address", "email", "thanks",
     "institute", "date", "orcid", "keywords", "includepdf", "phantom", "hphantom", "vphantom", "rule",
     "fontsize", "linespread", "setcitestyle", "crefname", "Crefname", "newif", "newlength"}
)
CITE_EXTRA = frozenset({"nocite", "parencite", "textcite", "autocite", "footcite", "fullcite", "smartcite",
                        "supercite"})
# Commands that take no argument: TexSoup still attaches a following group to them
# (``\centering {\small x}``), so their "arguments" are walked as ordinary text.
NO_ARG_COMMANDS = frozenset(
    {"centering", "raggedright", "raggedleft", "noindent", "indent", "maketitle", "tableofcontents",
     "listoffigures", "listoftables", "newpage", "clearpage", "cleardoublepage", "pagebreak", "appendix",
     "bigskip", "medskip", "smallskip", "vfill", "hfill", "protect", "xspace", "onecolumn", "twocolumn",
     "tiny", "scriptsize", "footnotesize", "small", "normalsize", "large", "Large", "LARGE", "huge", "Huge",
     "bf", "it", "em", "rm", "sf", "tt", "sc", "bfseries", "itshape", "mdseries", "upshape", "normalfont",
     "selectfont", "balance", "frontmatter", "mainmatter", "backmatter", "sloppy", "fussy", "and"}
)
# Commands whose last ``{}`` argument is the text (the others are a URL, a colour, a size...).
LAST_ARG_COMMANDS = frozenset(
    {"href", "textcolor", "colorbox", "fcolorbox", "resizebox", "scalebox", "rotatebox", "raisebox",
     "multicolumn", "multirow", "parbox", "foreignlanguage"}
)
# How many {} arguments the figure/title/drop/last-argument commands take (1 when not listed):
# parsers attach any group that follows a command, and ``\label{x} {\bf y}`` must keep "y".
ARITY = {
    "setcounter": 2, "addtocounter": 2, "setlength": 2, "addtolength": 2, "definecolor": 3, "newtheorem": 2,
    "crefname": 3, "Crefname": 3, "DeclareMathOperator": 2, "fontsize": 2, "linespread": 1, "textcolor": 2,
    "colorbox": 2, "fcolorbox": 3, "resizebox": 3, "scalebox": 2, "rotatebox": 2, "raisebox": 2, "href": 2,
    "multicolumn": 3, "multirow": 3, "parbox": 2, "foreignlanguage": 2, "newcommand": 2, "renewcommand": 2,
    "providecommand": 2, "newenvironment": 3, "renewenvironment": 3, "rule": 2, "bibitem": 1,
}
SYMBOLS = {
    "ldots": "...", "dots": "...", "textellipsis": "...", "LaTeX": "LaTeX", "TeX": "TeX", "LaTeXe": "LaTeX2e",
    "textbackslash": "\\", "ss": "ß", "ae": "æ", "AE": "Æ", "oe": "œ", "OE": "Œ", "o": "ø", "O": "Ø",
    "aa": "å", "AA": "Å", "l": "ł", "L": "Ł", "i": "ı", "textendash": "–", "textemdash": "—",
    "textasciitilde": "~", "textasciicircum": "^", "textunderscore": "_", "S": "§", "P": "¶",
    "copyright": "©", "textregistered": "®", "texttrademark": "™", "pounds": "£", "euro": "€",
    "textdegree": "°", "dag": "†", "ddag": "‡", "par": PARA, "newline": LINE, "linebreak": LINE,
    "item": LINE, "textbar": "|", "textless": "<", "textgreater": ">", "AmS": "AMS", "BibTeX": "BibTeX",
}
# ``\if...`` names that are commands with arguments (etoolbox, ifthen) or math, not conditionals.
NOT_CONDITIONALS = frozenset(
    {"iff", "ifthenelse", "ifdef", "ifundef", "ifcsdef", "ifcsundef", "ifdefmacro", "ifdefstring",
     "ifstrequal", "ifstrempty", "ifblank", "ifnumcomp", "ifboolexpr", "ifboolexpe", "ifbool", "iftoggle",
     "ifdefempty", "ifdefvoid", "ifcsvoid", "ifnumequal", "ifnumgreater", "ifnumless", "ifdimequal",
     "ifdimgreater", "ifdimless", "ifnumodd", "ifdefequal", "ifcsequal", "ifdefprotected", "ifdefparam"}
)
KNOWN_FALSE_CONDITIONALS = frozenset({"iffalse", "ifxetex", "ifluatex"})  # arXiv builds with (pdf)LaTeX


def command_kind(name: str) -> str:
    """How the walkers treat ``\\name``: figure | title | drop | noarg | lastarg | symbol | text."""
    base = name.rstrip("*")
    if base in FIGURE_COMMANDS:
        return "figure"
    if base in TITLE_COMMANDS:
        return "title"
    if base in DROP_COMMANDS or base in CITE_EXTRA or base.lower().startswith("cite"):
        return "drop"
    if base in SYMBOLS:
        return "symbol"
    if base in NO_ARG_COMMANDS:
        return "noarg"
    if base in LAST_ARG_COMMANDS:
        return "lastarg"
    return "text"
