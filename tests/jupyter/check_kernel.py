"""Drives the notebooks' Jupyter kernel (notebooks_c/kernel/) as Jupyter does; test_course_jupyter runs it
with JUPYTER_PATH holding the kernelspec. Each mode exits 0, or 1 after a line saying what differs.

  check_kernel.py notebook NB.ipynb RENDER_MD   every cell through nbclient: each code cell's outputs are
                                                the ones NB.ipynb holds (nb_NN --cells, by nb_ipynb), and
                                                its text is in RENDER_MD
  check_kernel.py edit NB.ipynb                 after the whole notebook, a cell whose printf text changed
                                                shows the new text and not the old
  check_kernel.py cells                         cells sent with a cellId, as JupyterLab sends them: one
                                                is replaced by its id, a failing one reports and is not kept
"""
import copy
import sys

import nbformat
from jupyter_client.manager import start_new_kernel
from nbclient import NotebookClient

KERNEL = 'kvlineage-c'
MARK = 'EDITED '


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def shown(outputs):
    """outputs as (type, text or svg) pairs, the way nbformat and the kernel both give them"""
    return [(o.output_type, o.get('text') or o.get('data', {}).get('image/svg+xml') or o.get('traceback'))
            for o in outputs]


def run_notebook(path):
    """the notebook of path, every cell executed in order, and the notebook as it was read"""
    nb = nbformat.read(path, as_version=4)
    want = copy.deepcopy(nb)
    client = NotebookClient(nb, kernel_name=KERNEL, timeout=300)
    return client, nb, want


def notebook(path, render_path):
    client, nb, want = run_notebook(path)
    render = open(render_path).read()
    with client.setup_kernel():
        for i, cell in enumerate(nb.cells):
            client.execute_cell(cell, i)
            if cell.cell_type != 'code':
                continue
            got, expected = shown(cell.outputs), shown(want.cells[i].outputs)
            if got != expected:
                fail(f'{path} cell {i + 1}: the kernel showed {str(got)[:400]}\n'
                     f'nb_NN --cells gave {str(expected)[:400]}')
            for kind, text in got:
                if kind == 'stream' and text not in render:
                    fail(f'{path} cell {i + 1}: {render_path} lacks its output {text[:200]!r}')


def edit(path):
    client, nb, _ = run_notebook(path)
    with client.setup_kernel():
        for i, cell in enumerate(nb.cells):
            client.execute_cell(cell, i)
        i, cell = next((i, c) for i, c in enumerate(nb.cells)
                       if c.cell_type == 'code' and 'NB_CELL(' in c.source and 'printf("' in c.source)
        before = ''.join(t for kind, t in shown(cell.outputs) if kind == 'stream')
        cell.source = cell.source.replace('printf("', 'printf("' + MARK, 1)
        client.execute_cell(cell, i)
        after = ''.join(t for kind, t in shown(cell.outputs) if kind == 'stream')
        if MARK not in after or after.replace(MARK, '') != before:
            fail(f'{path} cell {i + 1}: edited, it showed {after[:300]!r}; before the edit {before[:300]!r}')


def execute(kc, code, cell_id):
    """code run with metadata cellId, as JupyterLab sends it: (status, text shown, error shown)"""
    content = {'code': code, 'silent': False, 'store_history': True, 'user_expressions': {},
               'allow_stdin': False, 'stop_on_error': False}
    msg = kc.session.msg('execute_request', content, metadata={'cellId': cell_id})
    kc.shell_channel.send(msg)
    text, error = '', ''
    while True:
        m = kc.get_iopub_msg(timeout=120)
        if m['parent_header'].get('msg_id') != msg['header']['msg_id']:
            continue
        if m['msg_type'] == 'stream':
            text += m['content']['text']
        elif m['msg_type'] == 'error':
            error += '\n'.join(m['content']['traceback'])
        elif m['msg_type'] == 'status' and m['content']['execution_state'] == 'idle':
            break
    reply = kc.get_shell_msg(timeout=120)
    while reply['parent_header'].get('msg_id') != msg['header']['msg_id']:
        reply = kc.get_shell_msg(timeout=120)
    return reply['content']['status'], text, error


def main_listing(*functions):
    runs = ', '.join(f'NB_RUN({f})' for f in functions)
    return ('int main(int argc, char **argv)\n{\n'
            f'    static const nb_cell cells[] = {{{runs}}};\n'
            '    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0], NULL);\n}')


def printing(function, text):
    return f'NB_CELL({function})\n{{\n    printf("{text}\\n");\n    return KVL_OK;\n}}'


def cells():
    km, kc = start_new_kernel(kernel_name=KERNEL)
    steps = [  # cellId, code, status, what it shows (text or error), what it must not show
        ('inc', '#include <stdio.h>\n#include "nb.h"', 'ok', '', None),
        ('one', printing('cell_one', 'first version'), 'ok', 'first version\n', None),
        # the same cell, its function renamed: the cellId alone says it replaces cell_one
        ('one', printing('cell_two', 'second version'), 'ok', 'second version\n', 'first'),
        # so a main that lists cell_one no longer compiles, and the compiler names the cell
        ('main', main_listing('cell_one'), 'error', 'cell 4:', None),
        ('bad', 'NB_CELL(cell_bad)\n{\n    return nb_expect(0, "a false claim");\n}', 'error',
         'a false claim', None),
        # the failed cell was not kept: the next cell's program runs without it
        ('three', printing('cell_three', 'third'), 'ok', 'third\n', 'second'),
        ('main', main_listing('cell_two', 'cell_three'), 'ok', '', None),
    ]
    try:
        for n, (cell_id, code, status, shows, hides) in enumerate(steps, 1):
            got, text, error = execute(kc, code, cell_id)
            seen = error if status == 'error' else text
            if got != status or shows not in seen or (status == 'ok' and text != shows) or \
                    (hides and hides in text + error):
                fail(f'cell {n} ({cell_id}): status {got}, showed {text[:300]!r}, error {error[:500]!r}; '
                     f'expected {status} showing {shows!r}')
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


if __name__ == '__main__':
    modes = {'notebook': notebook, 'edit': edit, 'cells': cells}
    if len(sys.argv) < 2 or sys.argv[1] not in modes:
        fail('usage: check_kernel.py notebook NB.ipynb RENDER_MD | edit NB.ipynb | cells')
    modes[sys.argv[1]](*sys.argv[2:])
