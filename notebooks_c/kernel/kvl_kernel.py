"""kvlineage-c: a Jupyter kernel that runs the course's C notebooks (notebooks_c/NN_name.c) cell
by cell.

A C program keeps no state between runs, so the kernel keeps the code cells it has run, in order,
and makes each execution one whole program: every stored cell after a `#line 1 "cell N"` directive
(so that the compiler names the cell and its line), compiled and linked as `make` builds nb_NN (the
line `make notebook-flags` prints), then run with --cells (nb.h). Every NB_CELL function stored so
far runs, in order, so what the earlier cells compute is there; only the output of the current
cell's functions is shown, text as a stream and each figure as image/svg+xml. A cell that defines
main (a notebook's last) is compiled as written; otherwise the kernel writes a main that lists the
stored NB_CELL functions. A cell without one (includes, helpers) is compiled to check it and shows
nothing.

Executing a cell again replaces its stored version: the cell is the stored one with the same cellId
(JupyterLab and VS Code send it), or one that defines a name it defines, or the same text; else it
is appended. A cell that fails (a compile error, a failed cell function, a timeout) is not stored.

    python3 kvl_kernel.py install PREFIX [MAKE_ARGS]

installs the kernelspec under PREFIX (for JUPYTER_PATH=PREFIX/share/jupyter), run by this python;
MAKE_ARGS name the build, e.g. "BUILD=build/san SAN=1". Jupyter starts the kernel with KVL_ROOT (the
project) and KVL_MAKE_ARGS set (kernel.json). The project's libraries are built and read once per
kernel: restart it after changing them.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

NAME = 'kvlineage-c'
RUN_SECONDS = 60  # a notebook runs in well under a second; a cell that loops is stopped
HERE = os.path.dirname(os.path.abspath(__file__))

MAIN = '''#line 1 "the kernel's main"
#include "nb.h"
int main(int argc, char **argv)
{{
    static const nb_cell cells[] = {{{runs}}};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0], nb_every_figure);
}}
'''

# ---- the names a cell defines at file scope ------------------------------------------------------


def without_comments_and_strings(code):
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                  lambda m: '""' if m.group(0)[0] in '"\'' else ' ', code, flags=re.S)


def declarations(text):
    """File-scope declarations: (text, is_function), each ending at its ';' or its body's '}'."""
    out, depth, start, body = [], 0, 0, False
    for i, ch in enumerate(text):
        if ch in '([{':
            if depth == 0 and ch == '{':
                body = text[start:i].rstrip().endswith(')')
            depth += 1
        elif ch in ')]}':
            depth = max(depth - 1, 0)
            if depth == 0 and ch == '}' and body:
                out.append((text[start:i + 1], True))
                start, body = i + 1, False
        elif ch == ';' and depth == 0:
            out.append((text[start:i], False))
            start = i + 1
    return out


def flattened(decl):
    """decl with every bracket emptied: 'double x[N][D] = {1, 2}' -> 'double x[][] = {}'."""
    while True:
        flat = re.sub(r'\([^()]*\)|\[[^\[\]]*\]|\{[^{}]*\}',
                      lambda m: m.group(0)[0] + m.group(0)[-1], decl)
        if flat == decl:
            return flat
        decl = flat


def top_level_names(code):
    """NB_CELL functions, functions, macros, enumerators, typedefs, tags and variables."""
    text = without_comments_and_strings(code)
    names = set(re.findall(r'^\s*#\s*define\s+(\w+)', text, re.M))
    names.update(re.findall(r'\bNB_CELL\s*\(\s*(\w+)', text))
    for decl, is_function in declarations(re.sub(r'^\s*#.*', '', text, flags=re.M)):
        # (*name)(...) declares name
        flat = flattened(re.sub(r'\(\s*\*\s*(\w+)\s*\)', r' \1', decl))
        if is_function:
            names.update(re.findall(r'(\w+)\s*\(', flat)[:1])
            continue
        for inner in re.findall(r'\benum\s*\w*\s*\{([^{}]*)\}', decl):
            names.update(re.findall(r'(?:^|,)\s*(\w+)', inner))
        for part in flat.split(','):
            words = re.findall(r'\w+', re.sub(r'[(\[{][)\]}]', ' ', part.split('=')[0]))
            if words and words[-1] not in ('enum', 'struct', 'union'):
                names.add(words[-1])
    return {n for n in names if re.match(r'[A-Za-z_]', n)} - {'NB_CELL'}


class Cell:
    def __init__(self, code, cell_id, label):
        self.code, self.cell_id, self.label = code, cell_id, label
        self.names = top_level_names(code)
        self.functions = re.findall(r'\bNB_CELL\s*\(\s*(\w+)', without_comments_and_strings(code))

    def same_as(self, other):
        return bool((self.cell_id and self.cell_id == other.cell_id) or self.names & other.names
                    or self.code == other.code)


def stored_with(cells, cell):
    """cells with cell in place of the ones it is (at the first one's place), else appended."""
    at = next((i for i, c in enumerate(cells) if cell.same_as(c)), len(cells))
    return [c for c in cells[:at] if not cell.same_as(c)] + [cell] + \
           [c for c in cells[at:] if not cell.same_as(c)]


# ---- the program ---------------------------------------------------------------------------------


def program_text(cells, cell):
    """The stored cells as one program; main as the current cell writes it, else the kernel's."""
    if 'main' in cell.names:
        return ''.join(f'#line 1 "{c.label}"\n{c.code}\n' for c in cells)
    text = ''.join(f'#line 1 "{c.label}"\n{c.code}\n' for c in cells if 'main' not in c.names)
    functions = [f for c in cells if 'main' not in c.names for f in c.functions]
    runs = ', '.join(f'NB_RUN({f})' for f in functions)
    return text + (MAIN.format(runs=runs) if functions else '')


def outputs_of(stream, functions):
    """The outputs the cell functions named in `functions` printed in a --cells stream (nb.h), in
    order: ('text', text) and ('svg', name, svg). The stream may end inside a cell that failed."""
    outs, current, svg, text = [], None, None, ''
    for line in re.findall(r'[^\n]*\n|[^\n]+$', stream):
        if not line.startswith('%%kvl '):
            text += line
            continue
        text = text[:-1] if text.endswith('\n') else text  # the newline before a marker is its own
        marker = line.split()
        if marker[1] == 'cell':
            current = marker[3]
        elif current in functions and marker[1] == '/svg':
            outs.append(('svg', svg, text))
        elif current in functions and text:
            outs.append(('text', text))
        svg = marker[2] if marker[1] == 'svg' else None
        current = None if marker[1] == '/cell' else current
        text = ''
    if current in functions and text:
        outs.append(('text', text))
    return outs


class CellError(Exception):
    """A cell that failed: the message, and what the cell's functions printed before it."""

    def __init__(self, message, outputs=()):
        super().__init__(message)
        self.message, self.outputs = message.rstrip('\n'), list(outputs)


class Builder:
    """Compiles and runs a notebook's program in a temporary folder, as `make` builds nb_NN."""

    def __init__(self, root, make_args):
        self.root, self.make_args = root, make_args
        self.dir = tempfile.TemporaryDirectory(prefix='kvl_kernel_')
        self.cc = self.link = None
        self.env = dict(os.environ, KVL_ROOT=root)

    def read_flags(self):
        env = {k: v for k, v in self.env.items() if k not in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL')}
        make = subprocess.run(['make', '-s', '--no-print-directory', *shlex.split(self.make_args),
                               'notebook-flags'], cwd=self.root, env=env, capture_output=True,
                              text=True)
        lines = dict(line.split(': ', 1) for line in make.stdout.splitlines()
                     if line.startswith(('cc: ', 'link: ')))
        if make.returncode != 0 or len(lines) != 2:
            raise CellError(f'make notebook-flags failed in {self.root}:\n{make.stderr}')
        # The program stands in a temporary folder, not beside the notebooks' headers; and cells run
        # before the ones that use their helpers, so a static left unused is no error here.
        self.cc = shlex.split(lines['cc']) + ['-iquote', os.path.join(self.root, 'notebooks_c'),
                                              '-Wno-unused-function', '-Wno-unused-variable']
        self.link = shlex.split(lines['link'])

    def run(self, cells, cell):
        """The current cell's outputs, after building and running the program of cells."""
        if self.cc is None:
            self.read_flags()
        source = os.path.join(self.dir.name, 'notebook.c')
        with open(source, 'w') as f:
            f.write(program_text(cells, cell))
        runs = cell.functions or 'main' in cell.names
        exe = os.path.join(self.dir.name, 'notebook')
        cc = self.cc + ([source] + self.link + ['-o', exe] if runs
                        else ['-c', source, '-o', exe + '.o'])
        built = subprocess.run(cc, cwd=self.root, env=self.env, capture_output=True, text=True)
        if built.returncode != 0:
            raise CellError(built.stderr)
        if not runs:
            return []
        try:
            ran = subprocess.run([exe, '--cells'], cwd=self.root, env=self.env, capture_output=True,
                                 text=True, timeout=RUN_SECONDS)
        except subprocess.TimeoutExpired:
            raise CellError(f'the program ran past {RUN_SECONDS} s and was stopped')
        outs = outputs_of(ran.stdout, cell.functions)
        if ran.returncode != 0:
            raise CellError(ran.stderr or f'the program exited {ran.returncode}', outs)
        return outs


# ---- the kernel ----------------------------------------------------------------------------------

def make_kernel_class():
    from ipykernel.kernelbase import Kernel

    class KvlKernel(Kernel):
        implementation = NAME
        implementation_version = '1'
        banner = 'kvlineage C notebooks: each cell is compiled with the cells before it and run'
        language_info = {'name': 'c', 'mimetype': 'text/x-csrc', 'file_extension': '.c'}

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.cells = []
            root = os.environ.get('KVL_ROOT') or os.path.dirname(os.path.dirname(HERE))
            self.builder = Builder(root, os.environ.get('KVL_MAKE_ARGS', ''))

        def show(self, outs):
            for out in outs:
                if out[0] == 'text':
                    self.send_response(self.iopub_socket, 'stream',
                                       {'name': 'stdout', 'text': out[1]})
                else:
                    data = {'image/svg+xml': out[2], 'text/plain': f'<figure {out[1]}>'}
                    self.send_response(self.iopub_socket, 'display_data',
                                       {'data': data, 'metadata': {}})

        def do_execute(self, code, silent, store_history=True, user_expressions=None,
                       allow_stdin=False, *, cell_id=None):
            reply = {'status': 'ok', 'execution_count': self.execution_count, 'payload': [],
                     'user_expressions': {}}
            if not code.strip():
                return reply
            cell = Cell(code, cell_id, f'cell {self.execution_count}')
            cells = stored_with(self.cells, cell)
            try:
                outs = self.builder.run(cells, cell)
            except CellError as e:
                lines = e.message.split('\n')
                error = {'ename': 'CellError', 'evalue': lines[-1], 'traceback': lines}
                if not silent:
                    self.show(e.outputs)
                    self.send_response(self.iopub_socket, 'error', error)
                return dict(reply, status='error', **error)
            self.cells = cells
            if not silent:
                self.show(outs)
            return reply

        def do_shutdown(self, restart):
            self.builder.dir.cleanup()
            return {'status': 'ok', 'restart': restart}

    return KvlKernel


def install(prefix, make_args=''):
    """Install the kernelspec under prefix, run by this python, for the project this file is in."""
    from jupyter_client.kernelspec import KernelSpecManager
    with open(os.path.join(HERE, 'kernel.json')) as f:
        spec = json.load(f)
    root = os.path.dirname(os.path.dirname(HERE))
    fill = {'@PYTHON@': sys.executable, '@KERNEL@': os.path.abspath(__file__), '@ROOT@': root,
            '@MAKE_ARGS@': make_args}
    spec['argv'] = [fill.get(a, a) for a in spec['argv']]
    spec['env'] = {k: fill.get(v, v) for k, v in spec['env'].items()}
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, 'kernel.json'), 'w') as f:
            json.dump(spec, f, indent=1)
        return KernelSpecManager().install_kernel_spec(d, NAME, prefix=prefix)


if __name__ == '__main__':
    if sys.argv[1:2] == ['install'] and len(sys.argv) in (3, 4):
        print(install(*sys.argv[2:]))
    else:
        from ipykernel.kernelapp import IPKernelApp
        IPKernelApp.launch_instance(kernel_class=make_kernel_class())
