/* The terminal side of `nb_NN --step`: prose re-wrapped to the terminal's width, and every
 * screenful followed by a prompt, so that a long cell never scrolls its own header away.
 *
 * The screen is the terminal's (TIOCGWINSZ on stdout), else $LINES × $COLUMNS, else 24 × 80.
 * Prose is wrapped to the screen's width, at most 100 columns, never inside a word; a line is as
 * wide as its UTF-8 characters. A line longer than the screen (a table, a program's output) is
 * printed whole and counted as the rows the terminal folds it into. No prompt falls inside a
 * table. At the end of stdin a prompt is answered "go on". */
#ifndef KVL_NB_PAGER_H
#define KVL_NB_PAGER_H

#include <stddef.h>

typedef struct {
    size_t rows, cols;   /* the screen */
    size_t width;        /* prose is wrapped to this many columns */
    size_t used;         /* rows shown since the last prompt */
    int quit;            /* the reader typed q */
} nb_pager;

void nb_pager_init(nb_pager *p);

/* Print one line (no newline in it), prompting first when the screen is full. 0 once the reader
 * quit. */
int nb_pager_line(nb_pager *p, const char *line);

/* Print lines[n] together: a prompt first when they do not fit on what is left of the screen, and
 * none between them, so that a table is read whole (one taller than the screen comes whole after
 * its prompt). 0 once the reader quit. */
int nb_pager_block(nb_pager *p, const char *const *lines, size_t n);

/* Print a cell's output lines[n], its tables together (nb_pager_block): a table is a run of two or
 * more lines that each hold columns, two of their words a gap of two spaces apart. 0 once the
 * reader quit. */
int nb_pager_output(nb_pager *p, const char *const *lines, size_t n);

/* Print Markdown text lines[n] with its paragraphs and list items re-wrapped to p->width, its math
 * as text (tex_text.h): inline `$…$` kept on one line, display `$$…$$` centred on lines of its own
 * (broken before each top-level `=` when wider than the screen). A table (the run of lines that
 * start with `|`) is printed together; headings, fenced and indented code as they are. 0 once the
 * reader quit. */
int nb_pager_markdown(nb_pager *p, const char *const *lines, size_t n);

/* Ask "prompt" and wait for Enter: 1 to go on, 0 when the reader typed q. Starts a new screen. */
int nb_pager_wait(nb_pager *p, const char *prompt);

/* Columns a UTF-8 string takes: its characters, not its bytes. */
size_t nb_text_width(const char *s, size_t bytes);

#endif
