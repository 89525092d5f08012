#!/usr/bin/env python3
"""The site's browser test (make test, where Chromium is).

    check_site.py --site build/site --shots build/site-shots [--stage "PYTHON site/stage.py"]

First, with --stage, the staging script's refusals: a chapter file missing, a link to nothing, a bad
flag; each must exit 2 with one line on stderr naming what was wrong and nothing on stdout.

Then, on the files: no script, style or font comes from the network, and no file is shipped twice.
Then every page is loaded from disk in headless Chromium, at 1280 and at 390 pixels wide, and must
show: no console error or warning; every image loaded; every formula typeset at build time (KaTeX's
HTML in each .math, no "$" left outside code, no KaTeX or highlight.js script); code coloured by
Pygments, each block with a copy button; no sideways scroll; the sidebar of every chapter; the "on
this page" list of the page's sections; the link to the repository; each figure inside a link to its
own file and as wide as the column; each table scrolling in its own box with its first column sticky;
every link into the site resolving, to a file that exists and, with a #fragment, to an id on that
page. Every page is reachable from the index. Then, once: the search for "absorption" lists chapter 2;
dark mode follows the system and the switch changes it; in print, solutions are open and code wraps;
each notebook page shows its outputs under the cells that printed them and offers its .ipynb and its
.c source; an anchor lands in view; the sources page links every primary source it names; the
solutions' commands are the ones a reader pastes. Screenshots go to --shots.

Selenium drives Chromium through chromedriver (Debian's python3-selenium and chromium-driver): its
browser log is Chromium's console, failed loads included, which is what the test must catch.
Exit status 0 when every check passes, 1 otherwise, each failure on one line.
"""
import argparse
import collections
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

WIDTHS = (1280, 390)
REPO_URL = os.environ.get('KVL_REPO_URL', 'https://github.com/kvlineage/kvlineage')
SKIP_DIRS = ('_static', '_sources', '_downloads', '_images')

# What one page shows, measured in the page after load (returned to Python as a dict).
PROBE = r"""
const root = document.documentElement;
const article = document.querySelector('article.bd-article') || document.body;
const visible = e => !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
const shown = s => Array.from(document.querySelectorAll(s)).some(visible);
const images = Array.from(document.images).map(i => ({src: i.getAttribute('src'), url: i.src,
    ok: i.complete && i.naturalWidth > 0, width: i.getBoundingClientRect().width,
    link: i.closest('a[href]') ? i.closest('a[href]').href : null, inArticle: article.contains(i)}));
const links = Array.from(document.querySelectorAll('a[href]')).map(a => ({href: a.getAttribute('href'), url: a.href}));
const forms = Array.from(document.querySelectorAll('form[action]')).map(f => f.action);
const ids = Array.from(document.querySelectorAll('[id]')).map(e => e.id);
const maths = Array.from(article.querySelectorAll('.math'));
const untypeset = maths.filter(m => !m.querySelector('.katex')).map(m => m.textContent.slice(0, 60));
const dollars = [];
const walk = document.createTreeWalker(article, NodeFilter.SHOW_TEXT, {acceptNode: n =>
    n.parentElement.closest('pre, code, script, style, .katex') ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
for (let n; (n = walk.nextNode());) if (n.textContent.includes('$')) dollars.push(n.textContent.trim().slice(0, 60));
const scripts = Array.from(document.scripts).map(s => s.getAttribute('src') || '').filter(s => s);
let wide = [];
if (root.scrollWidth > root.clientWidth) {
  for (const e of document.body.querySelectorAll('*')) {
    const r = e.getBoundingClientRect();
    if (r.right > root.clientWidth + 1 && visible(e) && !e.closest('.skip-link') && !e.parentElement.closest('pre, table, .math, .pst-scrollable-table-container')) {
      wide.push(e.tagName.toLowerCase() + (e.className ? '.' + String(e.className).split(' ')[0] : '') + ' ' + Math.round(r.right) + 'px');
      if (wide.length >= 3) break;
    }
  }
}
const blocks = Array.from(article.querySelectorAll('div.highlight'));
const codes = {blocks: blocks.length,
               copy: blocks.filter(b => b.querySelector('button.copybtn')).length,
               pygments: blocks.filter(b => b.querySelector('pre span[class]')).length};
const nav = document.querySelector('.bd-sidebar-primary');
const sidebar = {links: nav ? Array.from(nav.querySelectorAll('a[href]')).map(a => a.href) : [],
                 shown: visible(nav) && nav.getBoundingClientRect().left >= 0 && nav.getBoundingClientRect().width > 100,
                 toggle: shown('.primary-toggle')};
const toc = document.querySelector('.bd-sidebar-secondary');
const sections = Array.from(article.querySelectorAll('section > h2')).map(h => h.parentElement.id).filter(i => i);
const onpage = {links: toc ? Array.from(toc.querySelectorAll('nav a[href^="#"]')).map(a => a.getAttribute('href').slice(1)) : [],
                shown: visible(toc) && toc.getBoundingClientRect().width > 100,
                toggle: shown('.secondary-toggle')};
const tables = Array.from(article.querySelectorAll('table')).map(t => {
  const box = t.parentElement, cell = t.querySelector('tr > :first-child');
  return {scrolls: ['auto', 'scroll'].includes(getComputedStyle(box).overflowX),
          sticky: cell ? getComputedStyle(cell).position === 'sticky' : false};
});
const box = e => { const b = e.closest('p, div, figure, section'), s = getComputedStyle(b);
  return b.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); };
images.forEach((im, k) => { im.column = box(document.images[k]); });
const repo = Array.from(document.querySelectorAll('a[href]')).some(a => a.href.replace(/\/$/, '') === arguments[0]);
return {images, links, forms, ids, untypeset, dollars, maths: maths.length, scripts, wide, codes, sidebar,
        sections, onpage, tables, repo, scroll: root.scrollWidth, width: root.clientWidth,
        solutions: document.querySelectorAll('details.solution').length};
"""


def refusals(stage, root):
    """The staging script on bad input: exit 2, one stderr line naming the file, nothing on stdout."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, 'root')
        # the project's sources and texts, which the chapters link; not its builds
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns('build*', '.git', '.venv', '*.o'))
        os.mkdir(os.path.join(copy, 'notebooks'))
        common = ['--notebooks', 'notebooks', '--out', os.path.join(tmp, 'out'), '--repo', REPO_URL,
                  '--programs', 'kvtable']

        def run(name, args, expect):
            p = subprocess.run(shlex.split(stage) + args, env=dict(os.environ, KVL_ROOT=copy), capture_output=True,
                               text=True)
            lines = p.stderr.splitlines()
            if p.returncode != 2 or p.stdout or len(lines) != 1 or expect not in lines[0]:
                failures.append(f'stage, {name}: exit {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr!r}; '
                                f'expected exit 2 and one line naming {expect}')

        run('a bad flag', common + ['--pages', 'x'], '--pages')
        os.remove(os.path.join(copy, 'chapters', '03_swa', 'exercises.md'))
        run('a missing exercises.md', common, 'chapters/03_swa/exercises.md')
        shutil.copy(os.path.join(root, 'chapters', '03_swa', 'exercises.md'), os.path.join(copy, 'chapters', '03_swa'))
        with open(os.path.join(copy, 'chapters', '02_mla', 'README.md'), 'a') as f:
            f.write('\nSee [a chapter not there](../NN_name/README.md).\n')
        run('a link to nothing', common, 'chapters/02_mla/README.md: link to ../NN_name/README.md')
    return failures


def files_checks(site):
    """Nothing from the network in any page's scripts, styles or fonts; no file shipped twice."""
    failures, seen = [], collections.defaultdict(list)
    remote = re.compile(r'<(?:script|link)\b[^>]*(?:src|href)="(https?:)?//[^"]*"[^>]*>|url\(\s*["\']?(?:https?:)?//')
    for d, _, fs in os.walk(site):
        for f in fs:
            path = os.path.join(d, f)
            rel = os.path.relpath(path, site)
            with open(path, 'rb') as h:
                data = h.read()
            if f.endswith(('.html', '.css')):
                for m in remote.finditer(data.decode('utf-8', 'replace')):
                    if 'rel="canonical"' not in m.group(0):
                        failures.append(f'{rel}: loads from the network: {m.group(0)[:120]}')
            if not f.endswith('.html') and len(data) > 512:
                seen[hashlib.sha1(data).hexdigest()].append(rel)
    failures += [f'shipped twice: {", ".join(sorted(v))}' for v in seen.values() if len(v) > 1]
    return failures


def browser(chromium, chromedriver):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    # --no-sandbox: CI runs as root, where Chromium's sandbox will not start
    for a in ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--hide-scrollbars'):
        options.add_argument(a)
    options.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
    return webdriver.Chrome(service=Service(chromedriver), options=options)


def set_width(driver, width, height=900):
    driver.execute_cdp_cmd('Emulation.setDeviceMetricsOverride',
                           {'width': width, 'height': height, 'deviceScaleFactor': 1, 'mobile': width < 600})


def media(driver, kind='', scheme='light'):
    driver.execute_cdp_cmd('Emulation.setEmulatedMedia',
                           {'media': kind, 'features': [{'name': 'prefers-color-scheme', 'value': scheme}]})


def url_of(site, page, fragment=''):
    return 'file://' + urllib.parse.quote(os.path.abspath(os.path.join(site, page))) + fragment


def load(driver, site, page, fragment=''):
    driver.get(url_of(site, page, fragment))
    # the theme and copybutton finish their work on DOMContentLoaded; give them that turn
    driver.execute_script('return document.readyState')
    time.sleep(0.05)


def console(driver, where):
    return [f'{where}: console {e["level"].lower()}: {e["message"]}' for e in driver.get_log('browser')
            if e['level'] in ('SEVERE', 'WARNING')]


def site_path(url):
    u = urllib.parse.urlsplit(url)
    return (os.path.abspath(urllib.parse.unquote(u.path)), urllib.parse.unquote(u.fragment)) if u.scheme == 'file' else None


def page_checks(site, page, width, seen, chapters):
    """The per-page properties of one loaded page."""
    where, f = f'{page} at {width}px', []
    f += [f'{where}: image not loaded: {i["src"]}' for i in seen['images'] if not i['ok']]
    f += [f'{where}: formula not typeset: {t}' for t in seen['untypeset']]
    f += [f'{where}: a raw $ in the text: {t}' for t in seen['dollars']]
    f += [f'{where}: a script typesets or colours in the browser: {s}' for s in seen['scripts']
          if re.search(r'katex|(?<!_)highlight(\.min)?\.js|hljs|mathjax', s, re.I)]
    if seen['scroll'] > seen['width']:
        f.append(f'{where}: scrolls sideways ({seen["scroll"]} px in {seen["width"]}): {", ".join(seen["wide"])}')
    c = seen['codes']
    if c['copy'] < c['blocks']:
        f.append(f'{where}: {c["blocks"] - c["copy"]} of {c["blocks"]} code blocks without a copy button')
    if c['pygments'] == 0 and c['blocks'] > 0 and not page.startswith('bench/'):
        f.append(f'{where}: no code block coloured by Pygments')
    in_nav = {site_path(u)[0] for u in seen['sidebar']['links'] if site_path(u)}
    f += [f'{where}: the sidebar does not list {d}' for d in chapters
          if os.path.abspath(os.path.join(site, d, 'index.html')) not in in_nav]
    if not (seen['sidebar']['shown'] if width >= 1200 else seen['sidebar']['toggle']):
        f.append(f'{where}: the sidebar is neither shown nor behind a button')
    missing = [s for s in seen['sections'] if s not in seen['onpage']['links']]
    if missing:
        f.append(f'{where}: "on this page" lacks {", ".join(missing[:3])}')
    if seen['sections'] and not (seen['onpage']['shown'] if width >= 1200 else seen['onpage']['toggle']):
        f.append(f'{where}: "on this page" is neither shown nor behind a button')
    if not seen['repo']:
        f.append(f'{where}: no link to the repository {REPO_URL}')
    for i in (i for i in seen['images'] if i['inArticle']):
        if not i['link'] or site_path(i['link']) is None or site_path(i['link'])[0] != site_path(i['url'])[0]:
            f.append(f'{where}: figure {i["src"]} does not open full size (link {i["link"]})')
        if i['width'] < min(0.95 * i['column'], 600):
            f.append(f'{where}: figure {i["src"]} drawn {round(i["width"])} px wide in a {round(i["column"])} px column')
    f += [f'{where}: a table that does not scroll in its own box' for t in seen['tables'] if not t['scrolls']]
    f += [f'{where}: a table whose first column is not sticky' for t in seen['tables'] if not t['sticky']]
    if re.match(r'\d\d_[^/]+/exercises\.html$', page) and not seen['solutions']:
        f.append(f'{where}: no exercise with its solution folded')
    return f


def link_checks(site, where, seen, ids, anchors, graph, page):
    f = []
    for url in [l['url'] for l in seen['links']] + seen['forms']:
        t = site_path(url)
        if t is None:
            continue
        target, fragment = t
        if not target.startswith(os.path.abspath(site) + os.sep):
            f.append(f'{where}: link {url} leaves the site')
        elif not os.path.isfile(target):
            f.append(f'{where}: link {url}: no such file')
        else:
            graph[page].add(os.path.relpath(target, site))
            if fragment:
                anchors.append((where, url, target, fragment))
    return f


def check_pages(driver, site, pages, chapters):
    failures, ids, anchors, graph = [], {}, [], collections.defaultdict(set)
    formulas = collections.Counter()
    for width in WIDTHS:
        set_width(driver, width)
        for page in pages:
            load(driver, site, page)
            seen = driver.execute_script(PROBE, REPO_URL)
            where = f'{page} at {width}px'
            failures += console(driver, where)
            failures += page_checks(site, page, width, seen, chapters)
            failures += link_checks(site, where, seen, ids, anchors, graph, page)
            ids[os.path.abspath(os.path.join(site, page))] = set(seen['ids'])
            formulas[width] += seen['maths']
        if not formulas[width]:
            failures.append(f'no formula on any page at {width}px')
    for where, url, target, fragment in anchors:
        if target.endswith('.html') and fragment not in ids.get(target, set()):
            failures.append(f'{where}: link {url}: no id "{fragment}" on that page')
    reached, todo = {'index.html'}, ['index.html']
    while todo:
        for t in graph[todo.pop()]:
            if t.endswith('.html') and t not in reached:
                reached.add(t)
                todo.append(t)
    failures += [f'{p}: built but not reachable from the index' for p in pages if p not in reached]
    return failures


def check_search(driver, site, shots):
    f = []
    for width in WIDTHS:
        set_width(driver, width)
        load(driver, site, 'search.html', '?q=absorption')
        found = []
        for _ in range(100):
            found = driver.execute_script(
                "return Array.from(document.querySelectorAll('#search-results li a')).map(a => a.href)")
            if found:
                break
            time.sleep(0.1)
        f += console(driver, f'search.html at {width}px')
        if not any('/02_mla/' in u for u in found):
            f.append(f'search.html?q=absorption at {width}px: chapter 2 not listed ({len(found)} results)')
        if width == 1280:
            driver.save_screenshot(os.path.join(shots, 'search-1280.png'))
    return f


def background_dark(driver):
    rgb = driver.execute_script("return getComputedStyle(document.body).backgroundColor")
    r, g, b = (int(x) for x in re.findall(r'\d+', rgb)[:3])
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255 < 0.3


def choose_mode(driver, mode):
    """Open the light/dark menu by its shown button and pick mode, as a reader clicks them."""
    from selenium.webdriver.common.by import By
    switch = [b for b in driver.find_elements(By.CSS_SELECTOR, '.theme-switch-button') if b.is_displayed()]
    if not switch:
        return False
    switch[0].click()
    items = [b for b in driver.find_elements(By.CSS_SELECTOR, f'.theme-change-button[data-mode="{mode}"]')
             if b.is_displayed()]
    if not items:
        return False
    items[0].click()
    return True


def check_dark(driver, site, page, shots):
    f = []
    for width in WIDTHS:
        set_width(driver, width)
        where = f'{page} at {width}px'
        for scheme in ('dark', 'light'):
            media(driver, scheme=scheme)
            load(driver, site, page)
            driver.execute_script("localStorage.removeItem('theme'); localStorage.removeItem('mode');")
            load(driver, site, page)
            if background_dark(driver) != (scheme == 'dark'):
                f.append(f'{where}: the system asks for {scheme}, the page is not')
            if scheme == 'dark' and width == 1280:
                driver.save_screenshot(os.path.join(shots, 'chapter-dark-1280.png'))
        # the switch: its menu opens and "Dark" turns the page dark while the system asks for light
        if not choose_mode(driver, 'dark'):
            f.append(f'{where}: no light/dark switch shown')
        elif not background_dark(driver):
            f.append(f'{where}: the switch set to dark leaves the page light')
        choose_mode(driver, 'auto')
        driver.execute_script("localStorage.removeItem('theme'); localStorage.removeItem('mode');")
        f += console(driver, where)
    media(driver)
    return f


def check_print(driver, site, page):
    f = []
    for width in WIDTHS:
        set_width(driver, width)
        load(driver, site, page)
        media(driver, 'print')
        seen = driver.execute_script("""
            const sol = Array.from(document.querySelectorAll('details.solution'));
            const closed = sol.filter(d => !d.open).filter(d => {
                const body = d.querySelector('summary').nextElementSibling; return !body || !body.checkVisibility(); }).length;
            const pres = Array.from(document.querySelectorAll('article pre'));
            const cut = pres.filter(p => p.scrollWidth > p.clientWidth + 1 || getComputedStyle(p).whiteSpace !== 'pre-wrap').length;
            return {solutions: sol.length, closed, pres: pres.length, cut};""")
        media(driver)
        where = f'{page} printed at {width}px'
        if not seen['solutions']:
            f.append(f'{where}: no solutions to print')
        if seen['closed']:
            f.append(f'{where}: {seen["closed"]} of {seen["solutions"]} solutions print closed')
        if seen['cut']:
            f.append(f'{where}: {seen["cut"]} of {seen["pres"]} code blocks print unwrapped')
    return f


def stream_text(output):
    t = output.get('text', '')
    return ''.join(t) if isinstance(t, list) else t


def check_notebooks(driver, site, root, chapters, notebooks):
    """Each notebook page: every output under the cell that printed it (the .ipynb is the oracle), and
    its .ipynb and .c source offered, each the file it names."""
    f = []
    set_width(driver, 1280)
    for d in chapters:
        source = os.path.join(notebooks, d + '.ipynb')
        page = f'{d}/{d}.html'
        if not os.path.isfile(source):
            continue
        if not os.path.isfile(os.path.join(site, page)):
            f.append(f'{page}: no page for {source}')
            continue
        load(driver, site, page)
        cells = driver.execute_script("""return Array.from(document.querySelectorAll('article div.cell')).map(c =>
            ({input: c.querySelector('.cell_input') ? c.querySelector('.cell_input').innerText : '',
              output: c.querySelector('.cell_output') ? c.querySelector('.cell_output').innerText : ''}))""")
        links = driver.execute_script("return Array.from(document.querySelectorAll('article a[href]')).map(a => a.href)")
        with open(source) as h:
            code = [c for c in json.load(h)['cells'] if c['cell_type'] == 'code']
        if len(cells) != len(code):
            f.append(f'{page}: {len(cells)} code cells shown, {source} has {len(code)}')
        for k, (cell, shown) in enumerate(zip(code, cells)):
            first = next((ln for o in cell.get('outputs', []) for ln in stream_text(o).splitlines() if ln.strip()), None)
            if first and first.strip() not in shown['output']:
                f.append(f'{page}: cell {k}: its output "{first.strip()[:40]}" is not under it')
        for name, oracle in ((d + '.ipynb', source), (d + '.c', os.path.join(root, 'notebooks_c', d + '.c'))):
            hit = [site_path(u)[0] for u in links if site_path(u) and u.split('#')[0].endswith('/' + name)]
            if not hit or not os.path.isfile(hit[0]):
                f.append(f'{page}: no download of {name}')
                continue
            with open(hit[0], 'rb') as a, open(oracle, 'rb') as b:
                same = json.load(a) if name.endswith('.ipynb') else a.read()
                want = json.load(b) if name.endswith('.ipynb') else b.read()
            if name.endswith('.ipynb'):
                same, want = [c.get('outputs') for c in same['cells']], [c.get('outputs') for c in want['cells']]
                same = [o for o in same if o is not None]
                want = [o for o in want if o is not None]
            if name.endswith('.c') and same != want:
                f.append(f'{page}: the {name} offered is not {oracle}')
            if name.endswith('.ipynb') and len(same) != len(want):
                f.append(f'{page}: the {name} offered does not hold the notebook\'s code cells')
        f += console(driver, page)
    return f


def check_anchor(driver, site):
    """A link to a glossary entry lands with the entry in view, below the header."""
    load(driver, site, 'glossary.html')
    target = driver.execute_script("return (document.querySelector('article section section') || {}).id")
    if not target:
        return ['glossary.html: no entry to land on']
    load(driver, site, 'glossary.html', '#' + target)
    top = driver.execute_script(f"return document.getElementById('{target}').getBoundingClientRect().top")
    return [] if 0 <= top < 300 else [f'glossary.html#{target}: lands {round(top)} px from the top']


def check_sources(driver, site, root):
    """Every arXiv paper and web address chapters/SOURCES.md names in its tables is a link on the sources page."""
    with open(os.path.join(root, 'chapters/SOURCES.md')) as h:
        rows = [ln for ln in h if ln.startswith('| **')]
    wanted = set()
    for row in rows:
        wanted |= {f'https://arxiv.org/abs/{a}' for a in re.findall(r'arXiv:(\d{4}\.\d{4,5})', row)}
        wanted |= {f'https://{w}' for w in re.findall(r'(?<![\w/.])((?:github\.com|huggingface\.co)/[\w.-]+/[\w.-]*\w)', row)}
    load(driver, site, 'sources.html')
    have = set(driver.execute_script("return Array.from(document.querySelectorAll('article a[href]')).map(a => a.href)"))
    f = [f'sources.html: no link to {w}' for w in sorted(wanted) if w not in have]
    if not wanted:
        f.append('sources.html: chapters/SOURCES.md names no source')
    return f


def check_commands(driver, site, root, chapters):
    """The solutions' commands as a reader pastes them from the repository root: no harness
    variable, and each of the project's programs (those in build/bin) by its path."""
    f = []
    bin_dir = os.path.join(root, 'build', 'bin')
    programs = set(os.listdir(bin_dir)) if os.path.isdir(bin_dir) else set()
    bare = re.compile(r'(?:^|\|\||&&|[|;]|\$\()\s*(?:[A-Za-z_]\w*=\S+\s+)*([A-Za-z_][\w-]*)')
    for d in chapters:
        load(driver, site, f'{d}/exercises.html')
        pres = driver.execute_script(
            "return Array.from(document.querySelectorAll('details.solution pre')).map(p => p.textContent)")
        for p in pres:
            if 'EXERCISE_TMP' in p:
                f.append(f'{d}/exercises.html: a command names the harness\'s folder: {p.strip()[:60]}')
            f += [f'{d}/exercises.html: {m} run by bare name: {ln.strip()[:60]}' for ln in p.splitlines()
                  for m in bare.findall(ln) if m in programs]
    return f


def screenshots(driver, site, shots, chapter):
    """What a student sees: the index, a chapter at 1280 px and at 390 px."""
    for page, width, height, name in (('index.html', 1280, 1400, 'index-1280.png'),
                                      (chapter, 1280, 1400, 'chapter-1280.png'),
                                      (chapter, 390, 1400, 'chapter-390.png')):
        set_width(driver, width, height)
        load(driver, site, page)
        driver.save_screenshot(os.path.join(shots, name))
    driver.get_log('browser')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--site', required=True)
    ap.add_argument('--shots', required=True)
    ap.add_argument('--stage')
    ap.add_argument('--notebooks', default='build/notebooks')
    args = ap.parse_args()
    root = os.environ.get('KVL_ROOT', os.getcwd())
    failures = refusals(args.stage, root) if args.stage else []
    chromium, chromedriver = shutil.which('chromium'), shutil.which('chromedriver')
    if not chromium or not chromedriver:
        print('site: browser test skipped: chromium or chromedriver not found')
        return 1 if failures else 0
    os.makedirs(args.shots, exist_ok=True)
    pages = []
    if not os.path.isfile(os.path.join(args.site, 'index.html')):
        failures.append(f'{args.site}/index.html: no such file (make site)')
    else:
        failures += files_checks(args.site)
        pages = sorted(os.path.relpath(os.path.join(d, f), args.site) for d, _, fs in os.walk(args.site)
                       for f in fs if f.endswith('.html') and not os.path.relpath(d, args.site).startswith(SKIP_DIRS))
        chapters = sorted({p.split('/')[0] for p in pages if re.match(r'\d\d_', p)})
        notebooks = os.path.join(root, args.notebooks)
        driver = browser(chromium, chromedriver)
        try:
            failures += check_pages(driver, args.site, pages, chapters)
            failures += check_search(driver, args.site, args.shots)
            failures += check_dark(driver, args.site, f'{chapters[2]}/index.html', args.shots)
            failures += check_print(driver, args.site, f'{chapters[2]}/exercises.html')
            failures += check_notebooks(driver, args.site, root, chapters, notebooks)
            failures += check_anchor(driver, args.site)
            failures += check_sources(driver, args.site, root)
            failures += check_commands(driver, args.site, root, chapters)
            screenshots(driver, args.site, args.shots, f'{chapters[2]}/index.html')
        finally:
            driver.quit()
    for f in failures:
        print('site: ' + f)
    print(f'site: {len(pages)} pages at {" and ".join(map(str, WIDTHS))} px, {len(failures)} failures; '
          f'screenshots in {args.shots}/')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
