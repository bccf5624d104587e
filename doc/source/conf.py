"""Sphinx configuration for the rllib-fork documentation.

Build with `bash ci/docs.sh` (warnings are errors). The API reference imports
the fork's modules through their upstream paths (`ray.rllib.offline...`), so
the build needs the fork installed and active in the Python that runs Sphinx.
"""

import os
import re

# -- Project -----------------------------------------------------------------

project = "rllib-fork"
author = "rllib-fork contributors"
copyright = "2026, rllib-fork contributors"
release = "0.1.0"
version = "0.1"

# -- General -----------------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "**/doc_code/README.md"]
# Docstrings write `name` for code, as upstream RLlib's do.
default_role = "code"
pygments_style = "sphinx"
language = "en"

# -- autodoc / napoleon ------------------------------------------------------

autodoc_default_options = {
    "members": True,
    "undoc-members": False,
    "show-inheritance": True,
    "member-order": "bysource",
}
autodoc_typehints = "signature"
autodoc_class_signature = "separated"
autodoc_inherit_docstrings = False
autosummary_generate = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# -- doctest -----------------------------------------------------------------

# The `.. testcode::` blocks in the fork's module docstrings run with
# `sphinx-build -b doctest` (see ci/docs.sh); the page's own examples are
# files under rllib/doc_code/ that pytest runs.
doctest_global_setup = "import os\nos.environ.setdefault('RAY_DEDUP_LOGS', '0')\n"

# -- intersphinx -------------------------------------------------------------

# Off by default: CI machines may have no internet, and a failed inventory
# fetch is a warning, which `-W` turns into an error. `DOCS_INTERSPHINX=1`
# links to Python, NumPy and gymnasium where their inventories are reachable.
if os.environ.get("DOCS_INTERSPHINX") == "1":
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "numpy": ("https://numpy.org/doc/stable", None),
        "gymnasium": ("https://gymnasium.farama.org", None),
    }
else:
    intersphinx_mapping = {}
intersphinx_timeout = 10

# -- HTML --------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = "rllib-fork"
html_static_path = ["_static"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"**": ["sidebar-nav-bs"]}
html_show_sourcelink = False

# -- Docstring normalization -------------------------------------------------

_PLURAL_AFTER_LITERAL = re.compile(r"(``[^`]+``|`[^`\s][^`]*`)(s|es)\b")


def _fix_plural_roles(app, what, name, obj, options, lines):
    """Lets "`Episode`s" (upstream RLlib's habit) parse as code plus "s".

    In reStructuredText an inline literal must be followed by whitespace or
    punctuation; an escaped space ("`Episode`\\ s") ends it and renders as
    nothing.
    """
    for i, line in enumerate(lines):
        lines[i] = _PLURAL_AFTER_LITERAL.sub(r"\1\\ \2", line)


def setup(app):
    app.connect("autodoc-process-docstring", _fix_plural_roles)
