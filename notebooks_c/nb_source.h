/* nb_source: a notebook's C file read as jupytext "percent" cells.
 *
 * A line that starts with `// %%` opens a cell: `// %% [markdown]` a Markdown cell, any other
 * such line a code cell (text after the `%%` is the cell's title). Lines before the first marker
 * form a code cell when any of them is not blank. A Markdown cell's lines are comments: its text
 * is each line with the leading `// ` (or a bare `//`) removed. A code cell's text is its lines
 * as they are. Leading and trailing blank lines of a cell are dropped, as jupytext does.
 *
 * Line numbers are 1-based, as the compiler's __LINE__ counts them, so a cell function's
 * __LINE__ tells which cell holds it (nb.h). */
#ifndef KVL_NB_SOURCE_H
#define KVL_NB_SOURCE_H

#include <stddef.h>

typedef enum { NB_MARKDOWN, NB_CODE } nb_kind;

typedef struct {
    nb_kind kind;
    size_t marker;       /* line of the `// %%` marker (0 for an unmarked first cell) */
    size_t first, last;  /* lines of its text after trimming blanks; first > last when empty */
} nb_source_cell;

typedef struct {
    char path[1024];
    char **lines;        /* [n_lines + 1]; lines[i] is line i (1-based), without its newline */
    size_t n_lines;
    nb_source_cell *cells;
    size_t n_cells;
    char *text;          /* the file, split in place into lines */
} nb_source;

/* Read and split `path`. KVL_EIO if it cannot be read, KVL_ENOMEM; on failure *s is empty. */
int nb_source_read(nb_source *s, const char *path);
void nb_source_free(nb_source *s);

/* Index of the cell holding `line` (a marker line belongs to the cell it opens), or n_cells if
 * none. */
size_t nb_source_cell_of_line(const nb_source *s, size_t line);

/* Line `line` of cell c as the notebook shows it: Markdown without its comment prefix, code as
 * is. */
const char *nb_source_cell_line(const nb_source *s, const nb_source_cell *c, size_t line);

#endif
