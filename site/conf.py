"""Sphinx settings of the course's website, built by ``site/build.py`` (``make site``) from a staged copy of the
notebooks and READMEs. Nothing is executed: the pages show the committed outputs."""
from __future__ import annotations

import json
import os
import re

STAGE = json.loads(os.environ["DQN_COURSE_SITE"])  # what build.py staged: the repository address, the page list

project = "DQN Memory Course"
author = "the DQN Memory Course authors"
copyright = "the DQN Memory Course authors"
extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.autosummary", "sphinx.ext.napoleon"]
exclude_patterns = ["_build"]

# The notebooks as committed: their outputs are what a learner's run printed, so nothing runs here.
nb_execution_mode = "off"
nb_merge_streams = True
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath", "amsmath"]
# ref.python: a class the package re-exports (replay.MultiStreamMemory) has two names; either page is right.
suppress_warnings = ["myst.header", "misc.highlighting_failure", "ref.python"]

autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autosummary_generate = True

html_theme = "sphinx_book_theme"
html_title = project
html_static_path: list[str] = []
html_context = {"default_mode": "light"}  # the theme's light/dark switch starts from this
html_favicon = "favicon.svg"  # else browsers ask the server for a /favicon.ico it does not have
html_theme_options = {
    "repository_url": STAGE["repository"],
    "repository_branch": "main",
    "path_to_docs": "",  # the staged tree mirrors the repository: notebooks/NN_name.ipynb is that file
    "use_repository_button": True,
    "use_download_button": True,
    "launch_buttons": {"colab_url": "https://colab.research.google.com", "notebook_interface": "jupyterlab"},
    "show_toc_level": 2,
}


ABSOLUTE_VALUE = re.compile(r"(?<![\\|`])\|([^|`\n]+)\|(?![_|])")


def escape_absolute_values(app, what, name, obj, options, lines: list[str]) -> None:
    """Docstrings write |x| for an absolute value, which reStructuredText would read as a substitution."""
    lines[:] = [ABSOLUTE_VALUE.sub(r"\\|\1\\|", line) for line in lines]


def setup(app) -> None:
    app.connect("autodoc-process-docstring", escape_absolute_values)
