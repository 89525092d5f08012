"""Sphinx's configuration for the course's website: `make site` stages the pages (site/stage.py) and
builds them with this file. Everything the pages load is on the site itself: KaTeX's style and fonts
from Debian's libjs-katex, the formulas typeset at build time by Debian's katex under node, code
coloured at build time by Pygments; no script or style comes from the network."""

import os
import posixpath
import shutil

from docutils import nodes

project = 'kvlineage'
author = 'kvlineage'
copyright = 'kvlineage'
REPO_URL = os.environ.get('KVL_REPO_URL', 'https://github.com/kvlineage/kvlineage')
KATEX_DIR = os.environ.get('KVL_KATEX_DIR', '/usr/share/javascript/katex')

extensions = ['myst_nb', 'sphinx_copybutton', 'sphinx_design', 'sphinxcontrib.katex']
exclude_patterns = ['_build', '**.ipynb_checkpoints']
# the exercises pages go from their title (#) to each exercise (###), as the project writes them
suppress_warnings = ['myst.header']

# The notebooks are shown as `make notebooks` ran them: their stored outputs, nothing executed.
nb_execution_mode = 'off'
nb_merge_streams = True
# MyST as the project's Markdown is written: $…$ and $$…$$ formulas (a $ followed by a space or a
# closing $ followed by a digit is a dollar, as in "$5 and $6"), GitHub's heading anchors, tables.
myst_enable_extensions = ['dollarmath', 'colon_fence', 'attrs_inline']
myst_dollarmath_allow_space = False
myst_dollarmath_allow_digits = False
myst_heading_anchors = 4

# The formulas become HTML at build time (node runs Debian's katex); the page loads only its style.
katex_prerender = True
katex_js_path = os.environ.get('KVL_KATEX_JS', '/usr/share/nodejs/katex/dist/katex.min.js')
katex_css_path = 'katex/katex.min.css'

html_theme = 'sphinx_book_theme'
html_title = 'kvlineage: the course'
templates_path = [os.path.join(os.path.dirname(os.path.abspath(__file__)), 'templates')]
html_static_path = [os.path.join(os.path.dirname(os.path.abspath(__file__)), 'static')]
html_css_files = ['kvlineage.css']
html_sourcelink_suffix = ''
html_last_updated_fmt = None
html_use_index = False
# the search lists pages without fetching each for a summary, which file:// would refuse
html_show_search_summary = False
html_theme_options = {
    'repository_url': REPO_URL,
    'repository_branch': 'main',
    'path_to_docs': '',
    'use_repository_button': True,
    'use_download_button': True,
    'use_fullscreen_button': False,
    'home_page_in_toc': True,
    'show_toc_level': 2,
    'navigation_with_keys': False,
    'pygments_light_style': 'default',
    'pygments_dark_style': 'monokai',
}
pygments_style = 'default'
# light or dark as the reader's system asks, until the switch says otherwise
html_context = {'default_mode': 'auto'}


def katex_assets(app):
    """KaTeX's style and its fonts from Debian, under _static/katex/."""
    out = os.path.join(app.outdir, '_static', 'katex')
    fonts = os.path.join(KATEX_DIR, 'fonts')
    shutil.copytree(fonts, os.path.join(out, 'fonts'), dirs_exist_ok=True)
    shutil.copyfile(os.path.join(KATEX_DIR, 'katex.min.css'), os.path.join(out, 'katex.min.css'))


def figures_link_full_size(app, doctree, docname):
    """Each figure wrapped in a link to its own file, so that a tap opens it full size."""
    for image in list(doctree.findall(nodes.image)):
        if isinstance(image.parent, nodes.reference) or image['uri'] not in app.env.images:
            continue
        name = app.env.images[image['uri']][1]
        page = app.builder.get_target_uri(docname)
        href = posixpath.relpath(
            posixpath.join(app.builder.imagedir, name), posixpath.dirname(page) or '.'
        )
        link = nodes.reference('', '', refuri=href, classes=['figure-full'])
        image.replace_self(link)
        link.append(image)


def setup(app):
    app.connect('builder-inited', katex_assets)
    app.connect('doctree-resolved', figures_link_full_size)
