#!/usr/bin/env python3
"""The site's browser test (make test, where Chromium is).

    check_site.py --site build/site --shots build/site-shots [--kvsite build/bin/kvsite]

First, with --kvsite, the generator's refusals: a chapter file missing, a link to nothing, a bad
flag; each must exit 2 with one line on stderr naming what was wrong and nothing on stdout.

Then every page of the site is loaded from disk in headless Chromium, at 1280 and at 390 pixels wide,
and must show: no console error (a failed load, a script error, a formula KaTeX refused), every image
loaded (naturalWidth > 0), every formula typeset (each .math element holds KaTeX's output and no "$"
is left in the text outside code), no sideways scroll (the document no wider than the window), and
every link into the site resolving, to a file that exists and, with a #fragment, to an id on that page.
Screenshots of the index and a chapter at 1280 px and of that chapter at 390 px go to --shots.

Selenium drives Chromium through chromedriver (Debian's python3-selenium and chromium-driver): its
browser log is Chromium's console, failed loads included, which is what the test must catch.
Exit status 0 when every check passes, 1 otherwise, each failure on one line.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

WIDTHS = (1280, 390)

# What one page shows, measured in the page after load (returned to Python as a dict).
PROBE = r"""
const root = document.documentElement;
const images = Array.from(document.images).map(i => ({src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0}));
const links = Array.from(document.querySelectorAll('a[href]')).map(a => ({href: a.getAttribute('href'), url: a.href}));
const ids = Array.from(document.querySelectorAll('[id]')).map(e => e.id);
const untypeset = Array.from(document.querySelectorAll('.math')).filter(m => !m.querySelector('.katex'))
    .map(m => m.textContent.slice(0, 60));
const dollars = [];
const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {acceptNode: n =>
    n.parentElement.closest('pre, code, script, style, .katex') ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
for (let n; (n = walk.nextNode());) if (n.textContent.includes('$')) dollars.push(n.textContent.trim().slice(0, 60));
let wide = [];
if (root.scrollWidth > root.clientWidth) {
  for (const e of document.body.querySelectorAll('*')) {
    const r = e.getBoundingClientRect();
    if (r.right > root.clientWidth + 1 && !e.parentElement.closest('pre, table, .katex-display')) {
      const name = e.tagName.toLowerCase() + (e.className ? '.' + String(e.className).split(' ')[0] : '');
      wide.push(name + ' ' + Math.round(r.right) + 'px');
      if (wide.length >= 3) break;
    }
  }
}
const nb = document.querySelector('section.notebook');
const chapter = {solutions: document.querySelectorAll('details.solution').length,
                 notebook: nb ? nb.querySelectorAll('pre code[class*="language-c"]').length : 0,
                 outputs: nb ? nb.querySelectorAll('pre code.language-text, img').length : 0};
return {images, links, ids, untypeset, dollars, scroll: root.scrollWidth, width: root.clientWidth, wide, chapter};
"""


def refusals(kvsite, root):
    """The generator on bad input: exit 2, one stderr line naming the file, nothing on stdout."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, 'root')
        # the project's sources and texts, which the chapters link; not its builds
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns('build*', '.git', '.venv', '*.o'))
        nb = os.path.join(copy, 'notebooks')
        os.mkdir(nb)

        def run(name, args, expect):
            p = subprocess.run([kvsite] + args, env=dict(os.environ, KVL_ROOT=copy), capture_output=True, text=True)
            lines = p.stderr.splitlines()
            if p.returncode != 2 or p.stdout or len(lines) != 1 or expect not in lines[0]:
                failures.append(f'kvsite, {name}: exit {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr!r}; '
                                f'expected exit 2 and one line naming {expect}')

        out = os.path.join(tmp, 'out')
        run('a bad flag', ['--pages', 'x'], '--pages')
        os.remove(os.path.join(copy, 'chapters', '03_swa', 'exercises.md'))
        run('a missing exercises.md', ['--notebooks', 'notebooks', '--out', out], 'chapters/03_swa/exercises.md')
        shutil.copy(os.path.join(root, 'chapters', '03_swa', 'exercises.md'), os.path.join(copy, 'chapters', '03_swa'))
        with open(os.path.join(copy, 'chapters', '02_mla', 'README.md'), 'a') as f:
            f.write('\nSee [a chapter not there](../NN_name/README.md).\n')
        run('a link to nothing', ['--notebooks', 'notebooks', '--out', out], 'chapters/02_mla/README.md: link to ../NN_name/README.md')
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


def screenshots(driver, site, shots, chapter):
    """What a student sees: the index, the chapter's notebook (code, output, formulas, a figure) at
    1280 px, and the chapter's opening at 390 px."""
    for page, fragment, width, height, name in (('index.html', '', 1280, 1800, 'index-1280.png'),
                                                 (chapter, '#notebook', 1280, 1800, 'chapter-1280.png'),
                                                 (chapter, '', 390, 1600, 'chapter-390.png')):
        set_width(driver, width, height)
        driver.get('file://' + urllib.parse.quote(os.path.abspath(os.path.join(site, page))) + fragment)
        driver.save_screenshot(os.path.join(shots, name))
    driver.get_log('browser')


def check_pages(driver, site, shots):
    failures = []
    pages = sorted(os.path.relpath(os.path.join(d, f), site) for d, _, fs in os.walk(site) for f in fs if f.endswith('.html'))
    ids, anchors = {}, []
    chapters = [p for p in pages if p[:2].isdigit()]
    chapter = chapters[1] if len(chapters) > 1 else chapters[0] if chapters else 'index.html'
    for width in WIDTHS:
        set_width(driver, width)
        for page in pages:
            path = os.path.join(site, page)
            driver.get('file://' + urllib.parse.quote(os.path.abspath(path)))
            seen = driver.execute_script(PROBE)
            where = f'{page} at {width}px'
            for e in driver.get_log('browser'):
                if e['level'] == 'SEVERE':
                    failures.append(f'{where}: console error: {e["message"]}')
            failures += [f'{where}: image not loaded: {i["src"]}' for i in seen['images'] if not i['ok']]
            failures += [f'{where}: formula not typeset: {t}' for t in seen['untypeset']]
            failures += [f'{where}: a raw $ in the text: {t}' for t in seen['dollars']]
            if seen['scroll'] > seen['width']:
                failures.append(f'{where}: scrolls sideways ({seen["scroll"]} px in {seen["width"]}): {", ".join(seen["wide"])}')
            if page[:2].isdigit():
                c = seen['chapter']
                if not c['solutions']:
                    failures.append(f'{where}: no exercise with its solution folded')
                if not seen['images']:
                    failures.append(f'{where}: no figure')
                if c['notebook'] and not c['outputs']:
                    failures.append(f'{where}: the notebook shows no output')
            if page == 'index.html':
                missing = set(chapters) - {l['href'].split('#')[0] for l in seen['links']}
                failures += [f'{where}: the course map does not link {m}' for m in sorted(missing)]
            ids[os.path.abspath(path)] = set(seen['ids'])
            for link in seen['links']:
                url = urllib.parse.urlsplit(link['url'])
                if url.scheme != 'file':
                    continue
                target = urllib.parse.unquote(url.path)
                if not os.path.abspath(target).startswith(os.path.abspath(site) + os.sep):
                    failures.append(f'{where}: link {link["href"]} leaves the site')
                elif not os.path.isfile(target):
                    failures.append(f'{where}: link {link["href"]}: no such file')
                elif url.fragment:
                    anchors.append((where, link['href'], os.path.abspath(target), urllib.parse.unquote(url.fragment)))
    screenshots(driver, site, shots, chapter)
    for where, href, target, fragment in anchors:
        if target.endswith('.html') and fragment not in ids.get(target, set()):
            failures.append(f'{where}: link {href}: no id "{fragment}" on that page')
    return pages, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--site', required=True)
    ap.add_argument('--shots', required=True)
    ap.add_argument('--kvsite')
    args = ap.parse_args()
    root = os.environ.get('KVL_ROOT', os.getcwd())
    failures = refusals(args.kvsite, root) if args.kvsite else []
    chromium, chromedriver = shutil.which('chromium'), shutil.which('chromedriver')
    if not chromium or not chromedriver:
        print('site: browser test skipped: chromium or chromedriver not found')
        return 1 if failures else 0
    os.makedirs(args.shots, exist_ok=True)
    if not os.path.isfile(os.path.join(args.site, 'index.html')):
        failures.append(f'{args.site}/index.html: no such file (make site)')
        pages = []
    else:
        driver = browser(chromium, chromedriver)
        try:
            pages, more = check_pages(driver, args.site, args.shots)
            failures += more
        finally:
            driver.quit()
    for f in failures:
        print('site: ' + f)
    print(f'site: {len(pages)} pages at {" and ".join(map(str, WIDTHS))} px, {len(failures)} failures; '
          f'screenshots in {args.shots}/')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
