#!/usr/bin/env python3
"""The course as a Sphinx source tree: `make site` stages it here, then builds it with site/conf.py.

    stage.py --notebooks DIR --out DIR --repo URL --programs "NAME ..."

reads the project under $KVL_ROOT (else the working directory): README.md's table of chapters (their
order), each chapter's README.md, exercises.md and solutions.md (each solution folded under its
exercise), figures, DIR/NN_name.ipynb (the notebooks `make notebooks` writes, outputs stored),
notebooks_c/NN_name.c, chapters/SOURCES.md, DISAGREEMENTS.md, GLOSSARY.md and the bench pages
(tests/bench/README.md and results/); and writes them as MyST pages under --out:

    index.md                  README.md's opening and the sections a student reads
    NN_name/index.md          the chapter's text
    NN_name/NN_name.ipynb     its notebook, a link to its .c source first, figures by reference
    NN_name/exercises.md      its exercises, each followed by its solution folded
    sources.md, disagreements.md, glossary.md, bench/

Links between these pages become links between the staged files (Sphinx resolves them); a link to
any other file of the project goes to URL/blob/main/PATH (a folder: URL/tree/main/PATH). The check
blocks of the solutions are shown as a reader pastes them: programs from build/bin, the harness's
"$EXERCISE_TMP" folder as /tmp.

Exit status 0; 2 for bad input (a missing file, a link to nothing in the project, a README.md
without its table of chapters), after one line on stderr naming the file; nothing on stdout.
"""

import argparse
import json
import os
import posixpath
import re
import shutil
import sys

# The README's sections a student reads on the index, in its order; the rest is for who builds it.
INDEX_SECTIONS = (
    'The course',
    'What you will learn',
    'Before you start',
    'One chapter at a time',
    'Two commands',
)
TEXT_PAGES = (
    ('chapters/SOURCES.md', 'sources.md'),
    ('chapters/DISAGREEMENTS.md', 'disagreements.md'),
    ('chapters/GLOSSARY.md', 'glossary.md'),
)
IMAGE_EXT = ('.svg', '.png', '.jpg', '.gif')
FENCE = re.compile(r'^ {0,3}(`{3,}|~{3,})')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')
# [text](url "title") and ![alt](url): the url; <url> form too
INLINE_LINK = re.compile(r'(\]\()\s*<?([^)\s>]+)>?((?:\s+"[^"]*")?\))')
REF_DEF = re.compile(r'^( {0,3}\[[^\]]+\]:\s*)(\S+)(.*)$')
CODE_SPAN = re.compile(r'(`+)(?:.|\n)*?(?<!`)\1(?!`)')
# a command's position in a shell line, past any VAR=value, and the word there
SHELL_COMMAND = re.compile(r'((?:\|\||&&|[|;]|\$\(|^)\s*(?:[A-Za-z_]\w*=\S+\s+)*)([A-Za-z_][\w-]*)')


# What the site changes in the check blocks, said where the solutions' opening explains them.
SHOWN_AS_PASTED = (
    'On this site each check is shown as you paste it from the repository root: the programs by\n'
    'their path in `build/bin`, the empty folder as `/tmp`.'
)


class BadInput(Exception):
    """One line naming the file and what is wrong with it."""


def read(root, path):
    try:
        with open(os.path.join(root, path), encoding='utf-8') as f:
            return f.read()
    except OSError as e:
        raise BadInput(f'{path}: {e.strerror}') from None


def write(out, path, text):
    full = os.path.join(out, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, 'w', encoding='utf-8') as f:
        f.write(text)


def split_prose(line_text):
    """Pieces of one line: (is_code, text), code spans kept whole."""
    pieces, at = [], 0
    for m in CODE_SPAN.finditer(line_text):
        pieces.append((False, line_text[at : m.start()]))
        pieces.append((True, m.group(0)))
        at = m.end()
    pieces.append((False, line_text[at:]))
    return pieces


def lines_outside_fences(md):
    """Each line of md with whether it lies in a fenced code block (fence lines included)."""
    fence = None
    for line in md.split('\n'):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            yield line, True
        elif fence is not None:
            if (
                m
                and m.group(1)[0] == fence[0]
                and len(m.group(1)) >= len(fence)
                and not line.strip(fence[0] + ' ')
            ):
                fence = None
            yield line, True
        else:
            yield line, False


class Site:
    """The map from project files to staged pages, and the link rewriting it implies."""

    def __init__(self, root, notebooks, out, repo, programs):
        self.root, self.notebooks, self.out, self.repo = root, notebooks, out, repo.rstrip('/')
        self.programs = set(programs)
        self.chapters = []  # NN_name folders, in README's order
        self.pages = {}  # project path -> staged path
        self.copies = {}  # project path -> staged path, files copied as they are

    # ---- the course's map ------------------------------------------------------------------------
    def read_course(self):
        text = read(self.root, 'README.md')
        rows = chapter_rows(text)
        if rows is None:
            raise BadInput('README.md: no table of chapters (columns chapter, mechanism, time)')
        for row in rows:
            m = re.search(r'\]\(chapters/([^/)]+)/', row)
            if not m:
                raise BadInput(
                    'README.md: a row of the table of chapters links no chapters/NN_name/ folder'
                )
            self.chapters.append(m.group(1))
        self.pages['README.md'] = 'index.md'
        for d in self.chapters:
            for name in ('README.md', 'exercises.md', 'solutions.md'):
                read(self.root, f'chapters/{d}/{name}')  # named, if missing, before any output
            self.pages[f'chapters/{d}/README.md'] = f'{d}/index.md'
            self.pages[f'chapters/{d}/exercises.md'] = f'{d}/exercises.md'
            self.pages[f'chapters/{d}/solutions.md'] = f'{d}/exercises.md'
            if os.path.isfile(os.path.join(self.root, self.notebooks, d + '.ipynb')):
                self.pages[f'chapters/{d}/notebook.md'] = f'{d}/{d}.ipynb'
        for src, dst in TEXT_PAGES:
            self.pages[src] = dst
        self.pages['tests/bench/README.md'] = 'bench/index.md'
        for name in self.bench_results():
            self.pages[f'tests/bench/results/{name}'] = f'bench/results/{name}'

    def bench_results(self):
        folder = os.path.join(self.root, 'tests/bench/results')
        return (
            sorted(n for n in os.listdir(folder) if n.endswith('.md'))
            if os.path.isdir(folder)
            else []
        )

    # ---- links -----------------------------------------------------------------------------------
    def target(self, source, url):
        """Where url, written in the project file source, goes from source's staged page."""
        if re.match(r'^[A-Za-z][A-Za-z0-9+.-]*:', url) or url.startswith('#'):
            return url
        path, _, anchor = url.partition('#')
        project = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
        full = os.path.join(self.root, project)
        if project.startswith('..') or not os.path.exists(full):
            raise BadInput(f'{source}: link to {url}: no such file in the project')
        here = posixpath.dirname(self.pages[source])
        staged = self.pages.get(project)
        if staged is None and project.endswith(IMAGE_EXT) and os.path.isfile(full):
            staged = self.copies.setdefault(project, self.figure_place(project))
        if staged is None:
            kind = 'tree' if os.path.isdir(full) else 'blob'
            return f'{self.repo}/{kind}/main/{project}' + (f'#{anchor}' if anchor else '')
        rel = posixpath.relpath(staged, here)
        return rel + (f'#{anchor}' if anchor and not staged.endswith(IMAGE_EXT) else '')

    def figure_place(self, project):
        """chapters/NN/figures/x.svg -> NN/figures/x.svg; any other image under _files/."""
        m = re.match(r'chapters/([^/]+)/(.*)$', project)
        return (
            f'{m.group(1)}/{m.group(2)}'
            if m and m.group(1) in self.chapters
            else f'_files/{project}'
        )

    def rewrite(self, source, md):
        """md with every link outside code pointing where the site has it."""
        out = []
        for line, in_fence in lines_outside_fences(md):
            if in_fence:
                out.append(line)
                continue
            m = REF_DEF.match(line)
            if m:
                out.append(m.group(1) + self.target(source, m.group(2)) + m.group(3))
                continue
            out.append(
                ''.join(
                    (
                        p
                        if code
                        else INLINE_LINK.sub(
                            lambda k: k.group(1) + self.target(source, k.group(2)) + k.group(3), p
                        )
                    )
                    for code, p in split_prose(line)
                )
            )
        return '\n'.join(out)

    # ---- pages -----------------------------------------------------------------------------------
    def stage(self):
        self.stage_index()
        for d in self.chapters:
            self.stage_chapter(d)
        for src, dst in TEXT_PAGES:
            text = self.rewrite(src, read(self.root, src))
            write(self.out, dst, link_sources(text) if dst == 'sources.md' else text)
        self.stage_bench()
        for project, staged in self.copies.items():
            os.makedirs(os.path.dirname(os.path.join(self.out, staged)), exist_ok=True)
            shutil.copyfile(os.path.join(self.root, project), os.path.join(self.out, staged))

    def stage_index(self):
        text = read(self.root, 'README.md')
        parts = sections(text)
        body = [parts.get(None, '')] + [parts[s] for s in INDEX_SECTIONS if s in parts]
        toc = [f'{d}/index' for d in self.chapters] + [
            'sources',
            'disagreements',
            'glossary',
            'bench/index',
        ]
        md = self.rewrite('README.md', '\n'.join(body)) + toctree(toc, 'The course')
        write(self.out, 'index.md', md)

    def stage_chapter(self, d):
        text = self.rewrite(f'chapters/{d}/README.md', read(self.root, f'chapters/{d}/README.md'))
        nb = f'chapters/{d}/notebook.md' in self.pages
        write(self.out, f'{d}/index.md', text + toctree(([d] if nb else []) + ['exercises']))
        if nb:
            self.stage_notebook(d)
        exercises = self.rewrite(
            f'chapters/{d}/exercises.md', read(self.root, f'chapters/{d}/exercises.md')
        )
        solutions = self.rewrite(
            f'chapters/{d}/solutions.md', read(self.root, f'chapters/{d}/solutions.md')
        )
        write(
            self.out,
            f'{d}/exercises.md',
            fold_solutions(exercises, paste_able(solutions, self.programs)),
        )

    def stage_notebook(self, d):
        """The notebook as `make notebooks` wrote it, its .c source linked first, and each figure it
        draws referenced as the chapter's figure file it equals (one copy of each on the site)."""
        path = os.path.join(self.notebooks, d + '.ipynb')
        try:
            nb = json.loads(read(self.root, path))
        except json.JSONDecodeError as e:
            raise BadInput(f'{path}: not JSON ({e.msg}, line {e.lineno})') from None
        c_src = f'notebooks_c/{d}.c'
        read(self.root, c_src)
        figures = self.chapter_figures(d)
        for cell in nb.get('cells', []):
            for o in cell.get('outputs', []):
                svg = o.get('data', {}).get('image/svg+xml')
                if svg is None:
                    continue
                svg = ''.join(svg) if isinstance(svg, list) else svg
                name = figures.get(svg)
                if name is None:
                    raise BadInput(
                        f'{path}: a figure that is none of chapters/{d}/figures/ (make renders)'
                    )
                o['data'] = {'text/markdown': f'![{name}](figures/{name})'}
                self.copies.setdefault(f'chapters/{d}/figures/{name}', f'{d}/figures/{name}')
        shutil.copyfile(os.path.join(self.root, c_src), os.path.join(self.out, d, d + '.c'))
        download = {
            'cell_type': 'markdown',
            'id': 'download',
            'metadata': {},
            'source':
            # the .ipynb is the page's own source copy (Sphinx keeps one in _sources/)
            f'Download this notebook: <a class="download-ipynb" href="../_sources/{d}/{d}.ipynb" '
            f'download>{d}.ipynb</a> · its C source, {{download}}`{d}.c <{d}.c>`',
        }
        nb['cells'].insert(0, download)
        write(self.out, f'{d}/{d}.ipynb', json.dumps(nb, indent=1))

    def chapter_figures(self, d):
        folder = os.path.join(self.root, 'chapters', d, 'figures')
        found = {}
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if name.endswith('.svg'):
                with open(os.path.join(folder, name), encoding='utf-8') as f:
                    found[f.read()] = name
        return found

    def stage_bench(self):
        text = self.rewrite('tests/bench/README.md', read(self.root, 'tests/bench/README.md'))
        results = self.bench_results()
        write(self.out, 'bench/index.md', text + toctree([f'results/{n[:-3]}' for n in results]))
        for name in results:
            src = f'tests/bench/results/{name}'
            write(self.out, f'bench/results/{name}', self.rewrite(src, read(self.root, src)))


def chapter_rows(readme):
    """The rows of README's table whose header names chapter, mechanism and time; None if none."""
    lines = readme.split('\n')
    for k, line in enumerate(lines):
        cells = [c.strip().lower() for c in line.strip().strip('|').split('|')]
        if line.startswith('|') and {'chapter', 'mechanism', 'time'} <= set(cells):
            rows = []
            for row in lines[k + 2 :]:
                if not row.startswith('|'):
                    break
                rows.append(row)
            return rows
    return None


def sections(md):
    """{None: the text before the first second-level heading, title: that section's text}."""
    parts, title, buf = {}, None, []
    for line, in_fence in lines_outside_fences(md):
        m = None if in_fence else HEADING.match(line)
        if m and len(m.group(1)) == 2:
            parts[title] = '\n'.join(buf) + '\n'
            title, buf = m.group(2), []
        buf.append(line)
    parts[title] = '\n'.join(buf) + '\n'
    return parts


def toctree(docs, caption=None):
    opts = ':hidden:\n' + (f':caption: {caption}\n' if caption else '') + ':maxdepth: 1\n'
    return '\n\n```{toctree}\n' + opts + '\n' + '\n'.join(docs) + '\n```\n'


def headed_blocks(md):
    """md cut at its headings (outside code): [(level, title, text)], level 0 for the opening."""
    blocks = [[0, None, []]]
    for line, in_fence in lines_outside_fences(md):
        m = None if in_fence else HEADING.match(line)
        if m:
            blocks.append([len(m.group(1)), m.group(2), []])
        blocks[-1][2].append(line)
    return [(lv, t, '\n'.join(b)) for lv, t, b in blocks]


def fold(summary, body):
    return f'\n::::{{dropdown}} {summary}\n:class-container: solution\n\n{body.strip()}\n::::\n\n'


def fold_solutions(exercises, solutions):
    """Each exercise's section, then its solution folded (matched by the same heading text); the
    solutions' opening (how they are worked) folded after the exercises' own; any solution no
    exercise names, last. The page's title is the exercises' own."""
    ex = headed_blocks(exercises)
    sol = headed_blocks(solutions)
    sol_heads = [b for b in sol if b[0] > 1]
    level = sol_heads[0][0] if sol_heads else 0
    own = [b for b in sol_heads if b[0] == level]
    pre = (
        '\n'.join(b[2].split('\n', 1)[1] if b[0] == 1 else b[2] for b in sol[: sol.index(own[0])])
        if own
        else ''
    )
    bodies = {id(b): '\n'.join(x[2] for x in sol[sol.index(b) : next_at(sol, b)]) for b in own}
    used = set()
    out = [ex[0][2]]
    first = 1 if len(ex) > 1 and ex[1][0] == 1 else 0
    if first:
        out.append(ex[1][2])
    if pre.strip():
        out.append(fold('How the solutions are worked', pre + '\n\n' + SHOWN_AS_PASTED))
    k = first + 1
    while k < len(ex):
        lv, title, _ = ex[k]
        end = k + 1
        while end < len(ex) and ex[end][0] > lv:
            end += 1
        out.append('\n'.join(b[2] for b in ex[k:end]))
        match = next((b for b in own if id(b) not in used and b[1] == title), None)
        if match:
            used.add(id(match))
            out.append(fold('Solution', bodies[id(match)].split('\n', 1)[1]))
        k = end
    for b in own:
        if id(b) not in used:
            out.append(fold(f'Solution: {b[1]}', bodies[id(b)].split('\n', 1)[1]))
    return '\n'.join(out)


def next_at(blocks, b):
    """The index of the next block after b at b's level or above (the end of b's section)."""
    k = blocks.index(b) + 1
    while k < len(blocks) and (blocks[k][0] == 0 or blocks[k][0] > b[0]):
        k += 1
    return k


def paste_able(md, programs):
    """The check blocks as a reader runs them from the repository root: the harness's empty folder
    "$EXERCISE_TMP" shown as /tmp, each program of build/bin by its path, shown as sh."""
    out, fence = [], None
    for line, in_fence in lines_outside_fences(md):
        m = FENCE.match(line)
        if fence is None and m and line.strip()[len(m.group(1)) :].strip() in ('check', 'expect'):
            fence = line.strip()[len(m.group(1)) :].strip()
            out.append(line.replace(fence, 'sh' if fence == 'check' else 'text'))
            continue
        if fence and m:
            fence = None
        elif fence == 'check':
            line = re.sub(r'"\$EXERCISE_TMP"|\$EXERCISE_TMP\b|"\$\{EXERCISE_TMP\}"', '/tmp', line)
            line = re.sub(r'"(/tmp[^"\s$`]*)"', r'\1', line)
            line = SHELL_COMMAND.sub(
                lambda k: k.group(1)
                + ('build/bin/' if k.group(2) in programs else '')
                + k.group(2),
                line,
            )
        out.append(line)
    return '\n'.join(out)


def link_sources(md):
    """The sources page: each arXiv number and bare web address written in its tables, a link."""

    def linked(m):
        if m.group(1):
            return f'[arXiv:{m.group(1)}](https://arxiv.org/abs/{m.group(1)})'
        return f'[{m.group(2)}](https://{m.group(2)})'

    pattern = re.compile(
        r'arXiv:(\d{4}\.\d{4,5})'
        r'|(?<![\w/.\[(])((?:[a-z0-9-]+\.)+(?:com|org|io|co|ai)(?:/[\w.\-/]*[\w/])?)'
    )
    out = []
    for line, in_fence in lines_outside_fences(md):
        if not in_fence and line.startswith('|'):
            line = ''.join(p if code else pattern.sub(linked, p) for code, p in split_prose(line))
        out.append(line)
    return '\n'.join(out)


class Parser(argparse.ArgumentParser):
    def error(self, message):
        print(f'stage.py: {message}', file=sys.stderr)
        sys.exit(2)


def main():
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument('--notebooks', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--repo', required=True)
    ap.add_argument('--programs', required=True)
    args = ap.parse_args()
    root = os.environ.get('KVL_ROOT', os.getcwd())
    site = Site(root, args.notebooks, args.out, args.repo, args.programs.split())
    try:
        site.read_course()
        if os.path.exists(args.out):
            shutil.rmtree(args.out)
        site.stage()
    except BadInput as e:
        print(f'stage.py: {e}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
