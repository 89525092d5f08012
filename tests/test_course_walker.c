/* The terminal walker of the notebooks (`nb_NN --step`): the text cells' math reaches the reader as
 * plain text (notebooks_c/tex_text.h), and no table is split by a screenful's prompt
 * (notebooks_c/pager.h).
 *
 * Every formula of every notebook's text cells is translated here, so that a formula added later
 * with a command the translator does not know fails this suite by notebook and line. A dozen of
 * them are checked against their reading written by hand. Every notebook is walked on a small
 * screen, and the pager is driven directly with a Markdown table, which the course's text cells do
 * not hold yet. */
#include "common.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nb_source.h"
#include "pager.h"
#include "tex_text.h"

#define OUT_CAP (1 << 21)

static char out[OUT_CAP], err[1 << 16];

/* notebooks_c/NN_name.c, sorted: names[0..n) as "NN_name" */
static size_t list_notebooks(char names[][64], size_t max)
{
    DIR *d = opendir(kvl_path("notebooks_c"));
    ck_assert_msg(d != NULL, "cannot list notebooks_c (set KVL_ROOT)");
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < max;) {
        const char *s = e->d_name;
        const size_t len = strlen(s);
        if (len > 5 && s[0] >= '0' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9' && s[2] == '_' &&
            !strcmp(s + len - 2, ".c"))
            snprintf(names[n++], 64, "%.*s", (int)(len - 2), s);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    ck_assert_uint_ge(n, 9);
    return n;
}

static size_t count(const char *s, size_t n, const char *what)
{
    size_t k = 0;
    for (const char *p = s; (p = strstr(p, what)) && p < s + n; p++) k++;
    return k;
}

/* Every formula of notebook `name`'s text cells: translated, with no TeX left in its text (a brace
 * only where the formula writes \{ or \}). Returns how many it found. */
static size_t check_formulas(const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.c", kvl_path("notebooks_c"), name);
    nb_source s;
    ck_assert_msg(nb_source_read(&s, path) == 0, "cannot read %s", path);
    size_t found = 0;
    for (size_t k = 0; k < s.n_cells; k++) {
        const nb_source_cell *c = &s.cells[k];
        if (c->kind != NB_MARKDOWN) continue;
        char text[1 << 16] = "";
        size_t used = 0, line_of[1 << 16];   /* line_of[i]: the source line of text[i] */
        for (size_t l = c->first; l <= c->last; l++) {
            const int n = snprintf(text + used, sizeof text - used, "%s\n", nb_source_cell_line(&s, c, l));
            ck_assert_msg(n > 0 && used + (size_t)n < sizeof text, "%s: a text cell over 64 KiB", name);
            for (size_t i = 0; i < (size_t)n; i++) line_of[used + i] = l;
            used += (size_t)n;
        }
        size_t len;
        int display;
        for (const char *m = text; (m = tex_text_find(m, &len, &display)); m += len, found++) {
            const size_t d = 1 + (size_t)display, line = line_of[m - text];
            const char *tex = m + d;
            const size_t tex_len = len - 2 * d;
            char got[4096];
            tex_text_error e;
            const size_t n = tex_text(got, sizeof got, tex, tex_len, &e);
            ck_assert_msg(n != (size_t)-1, "notebooks_c/%s.c:%zu: %s in $%.*s$", name, line, e.what, (int)tex_len, tex);
            ck_assert_msg(n < sizeof got, "notebooks_c/%s.c:%zu: a formula of %zu bytes of text", name, line, n);
            ck_assert_msg(!strchr(got, '\\') && !strchr(got, '$'), "notebooks_c/%s.c:%zu: TeX left in \"%s\"", name,
                          line, got);
            const int braces_kept = count(got, n, "{") == count(tex, tex_len, "\\{") &&
                                    count(got, n, "}") == count(tex, tex_len, "\\}");
            ck_assert_msg(braces_kept, "notebooks_c/%s.c:%zu: a TeX brace left in \"%s\"", name, line, got);
        }
    }
    nb_source_free(&s);
    return found;
}

START_TEST(test_every_formula_of_the_text_cells_reads_as_plain_text)
{
    char names[16][64];
    const size_t n = list_notebooks(names, 16);
    size_t formulas = 0;
    for (size_t i = 0; i < n; i++) formulas += check_formulas(names[i]);
    ck_assert_uint_ge(formulas, 400);   /* the course's text cells hold some 440 */
}
END_TEST

/* ---- readings written by hand ------------------------------------------------------------------- */

START_TEST(test_representative_formulas_read_as_written_by_hand)
{
    static const struct {
        const char *tex, *text;
    } cases[] = {
        /* 02: thin spaces, \tilde as a combining tilde, \mid, a word subscript, a letter one */
        {"[\\,\\tilde c \\mid \\tilde k\\,] = W_{DKV}\\, x_t,", "[c\u0303 | k\u0303] = W_DKV x\u209c,"},
        /* 03: the minus sign and \le with the formula's own spaces */
        {"t - W < j \\le t,", "t \u2212 W < j \u2264 t,"},
        /* 01: \frac with a sum below it, superscripts that need parentheses */
        {"p_{h,j} = \\frac{e^{s_{h,j}}}{\\sum_{i \\le n} e^{s_{h,i}}},",
         "p_(h,j) = e^(s_(h,j))/(\u03a3_(i \u2264 n) e^(s_(h,i))),"},
        /* 01: \sqrt of one term, a fraction whose numerator is not one */
        {"s_{h,j} = \\frac{q_h \\cdot k_{j,g(h)}}{\\sqrt{D_h}},",
         "s_(h,j) = (q\u2095 \u00b7 k_(j,g(h)))/\u221aD\u2095,"},
        /* 01: \text, \times, Unicode subscripts kv and h */
        {"\\text{bytes/token} = L \\times 2 H_{kv} D_h \\times b",
         "bytes/token = L \u00d7 2 H\u2096\u1d65 D\u2095 \u00d7 b"},
        /* 02: \tfrac beside a sum gets its parentheses; \sqrt of more than one term too */
        {"\\mathrm{RMSNorm}(x) = g \\odot x / \\sqrt{\\tfrac{1}{n} \\sum_i x_i^2 + \\epsilon}",
         "RMSNorm(x) = g \u2299 x / \u221a((1/n) \u03a3\u1d62 x\u1d62\u00b2 + \u03b5)"},
        /* 02: superscript h and \top as Unicode, \hat as a combining circumflex */
        {"\\hat q_h = W_{UK}^{h\\top} q^C_h,", "q\u0302\u2095 = W_UK\u02b0\u1d40 q^C\u2095,"},
        /* 05: (-1)^s, \left( \right), \quad, a fraction beside a term */
        {"x = (-1)^s \\, 2^{1-b} \\, \\frac{m}{2^M} \\quad (e = 0,\\ \\text{subnormal}).",
         "x = (\u22121)\u02e2 2\u00b9\u207b\u1d47 (m/2\u1d39)  (e = 0, subnormal)."},
        /* 05: \lfloor \rfloor, \log_2, \max_i, a superscript with no Unicode form */
        {"s = 2^{\\,\\lfloor \\log_2 \\max_i |x_i| \\rfloor - 2},",
         "s = 2^(\u230alog\u2082 max\u1d62 |x\u1d62|\u230b \u2212 2),"},
        /* 07: escaped braces stay, \mathcal, \setminus-free set, \varnothing */
        {"\\{k \\in \\mathcal{K} : k > E\\} = \\varnothing.", "{k \u2208 \U0001d4a6 : k > E} = \u2205."},
        /* 09: \lceil \rceil nested, \left\lceil, \big( */
        {"\\left\\lceil \\frac{\\lceil T / M_\\ell \\rceil}{P} \\right\\rceil P "
         "\\,\\big(R_\\ell + R_{\\text{key},\\ell}\\big)",
         "\u2308\u2308T / M_\u2113\u2309/P\u2309 P (R_\u2113 + R_(key,\u2113))"},
        /* 03: \bmod, \mathrm with a subscript */
        {"\\mathrm{slot}(t) = t \\bmod W .", "slot(t) = t mod W."},
        /* 04: \mathbb with a superscript that keeps its subscript */
        {"k^I_s = \\mathrm{LayerNorm}(W_{IK}\\, x_s) \\in \\mathbb{R}^{D_I},",
         "k\u1d35\u209b = LayerNorm(W_IK x\u209b) \u2208 \u211d^(D_I),"},
        /* 04: \approx, \lVert \rVert, a number before × */
        {"\\lVert \\mathrm{RMSNorm}(v) \\rVert_2 = \\sqrt{512} \\approx 22.627",
         "\u2016RMSNorm(v)\u2016\u2082 = \u221a512 \u2248 22.627"},
        /* 09: \lceil and a unary \pm */
        {"\\lceil H_{kv} / t \\rceil, \\pm 448", "\u2308H\u2096\u1d65 / t\u2309, \u00b1448"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char got[1024];
        tex_text_error e;
        const size_t n = tex_text(got, sizeof got, cases[i].tex, strlen(cases[i].tex), &e);
        ck_assert_msg(n != (size_t)-1, "$%s$: %s", cases[i].tex, e.what);
        ck_assert_msg(!strcmp(got, cases[i].text), "$%s$ reads \"%s\", not \"%s\"", cases[i].tex, got, cases[i].text);
    }
}
END_TEST

/* What the translator cannot read is refused by name, never passed on half translated. */
START_TEST(test_an_unknown_command_or_a_broken_brace_is_refused_by_name)
{
    static const struct {
        const char *tex, *what;
    } cases[] = {
        {"a \\unknownthing b", "\\unknownthing"}, {"x_{t", "unbalanced {"},  {"x}", "unbalanced }"},
        {"a & b", "&"},                           {"\\frac{1}", "argument"},  {"\\tilde{ab}", "more than one"},
        {"\\sqrt[3]{x}", "index"},                {"\\mathcal{x}", "capital"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char got[256];
        tex_text_error e;
        ck_assert_msg(tex_text(got, sizeof got, cases[i].tex, strlen(cases[i].tex), &e) == (size_t)-1,
                      "$%s$ was read as \"%s\"", cases[i].tex, got);
        ck_assert_msg(strstr(e.what, cases[i].what) != NULL, "$%s$: \"%s\" does not name %s", cases[i].tex, e.what,
                      cases[i].what);
    }
}
END_TEST

/* ---- the walk ------------------------------------------------------------------------------------ */

static int is_prompt(const char *l)
{
    return !strncmp(l, "-- more:", 8) || !strncmp(l, "-- Enter:", 9);
}

/* A table row the walker must not split: a Markdown table's row in a text cell, or, in a cell's
 * output, a line whose words stand in columns (two of them a gap of two spaces apart). */
static int table_row(const char *l, size_t len, int prose)
{
    if (prose) return len && l[0] == '|';
    size_t i = strspn(l, " ");
    for (; i + 2 < len; i++)
        if (l[i] == ' ' && l[i + 1] == ' ' && l[i + 2 + strspn(l + i + 2, " ")] != '\n') return 1;
    return 0;
}

/* l[0..len) with its `code` spans blanked, into buf. */
static void without_code(char *buf, const char *l, size_t len)
{
    int code = 0;
    for (size_t i = 0; i < len; i++) {
        code ^= l[i] == '`';
        buf[i] = code || l[i] == '`' ? ' ' : l[i];
    }
    buf[len] = '\0';
}

/* Walk notebook NN on a 60 × 12 screen: no prompt between two rows of one table, and no `$` or
 * backslash command in a text cell's prose (outside code). */
static void check_walk(const char *number)
{
    static char enters[1 << 14];
    memset(enters, '\n', sizeof enters - 1);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "COLUMNS=60 LINES=12 nb_%s --step", number);
    ck_assert_msg(kvl_run(cmd, enters, out, OUT_CAP, err, sizeof err) == 0, "%s failed: %.300s", cmd, err);
    int prose = 0, listing = 0, fenced = 0, last_row = 0, prompt_after_row = 0;
    size_t line_no = 0;
    for (char *l = out, *nl; *l; l = nl + 1) {
        nl = strchr(l, '\n');
        if (!nl) break;
        const size_t len = (size_t)(nl - l);
        line_no++;
        if (is_prompt(l)) {
            prompt_after_row = last_row;
            continue;
        }
        if (!strncmp(l, "==== cell", 9)) {
            prose = strstr(l, ", text (") && strstr(l, ", text (") < nl;
            listing = !prose;   /* a code cell's source, then its output */
        } else if (!strncmp(l, "---- output ----", 16)) {
            listing = 0;
        }
        const int row = !listing && table_row(l, len, prose);
        ck_assert_msg(!(row && prompt_after_row), "%s: a prompt splits the table at line %zu: %.*s", cmd, line_no,
                      (int)len, l);
        last_row = row;
        prompt_after_row = 0;
        if (prose && !strncmp(l, "```", 3)) fenced = !fenced;
        if (!prose || fenced || l[0] == '<') continue;
        char text[8192];
        without_code(text, l, len < sizeof text ? len : sizeof text - 1);
        const char *bs = strchr(text, '\\');
        ck_assert_msg(!strchr(text, '$') && !(bs && ((bs[1] | 32) >= 'a' && (bs[1] | 32) <= 'z')),
                      "%s: TeX reaches the reader at line %zu: %.*s", cmd, line_no, (int)len, l);
    }
}

START_TEST(test_the_walk_splits_no_table_and_shows_no_tex)
{
    char names[16][64];
    const size_t n = list_notebooks(names, 16);
    for (size_t i = 0; i < n; i++) {
        char number[3] = {names[i][0], names[i][1], '\0'};
        check_walk(number);
    }
}
END_TEST

/* The pager itself on a Markdown table that does not fit what is left of a 30 × 8 screen, and on one
 * taller than the screen: each is printed whole after a prompt. */
START_TEST(test_the_pager_prompts_before_a_markdown_table_not_inside_it)
{
    char in_path[] = "/tmp/kvl_walker_in_XXXXXX", out_path[] = "/tmp/kvl_walker_out_XXXXXX";
    const int in_fd = mkstemp(in_path), out_fd = mkstemp(out_path);
    ck_assert(in_fd >= 0 && out_fd >= 0);
    ck_assert(write(in_fd, "\n\n\n\n\n\n", 6) == 6);
    close(in_fd);
    close(out_fd);
    ck_assert(freopen(in_path, "r", stdin) && freopen(out_path, "w", stdout));
    setenv("LINES", "8", 1);
    setenv("COLUMNS", "30", 1);
    static const char *const md[] = {
        "# one", "# two", "# three", "# four",                             /* 4 of 7 rows */
        "| a | b |", "|---|---|", "| 1 | 2 |", "| 3 | 4 |",                  /* 4 rows: not here */
        "",
        "| x |", "|---|", "| 1 |", "| 2 |", "| 3 |", "| 4 |", "| 5 |", "| 6 |", "| 7 |",   /* 9 rows */
        "# after",
    };
    nb_pager p;
    nb_pager_init(&p);
    ck_assert(nb_pager_markdown(&p, md, sizeof md / sizeof *md));
    fflush(stdout);
    char *got = kvl_read_text(out_path);
    unlink(in_path);
    unlink(out_path);
    ck_assert(got != NULL);
    static const char want[] = "# one\n# two\n# three\n# four\n-- more: Enter, q: quit -- \n"
                               "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\n-- more: Enter, q: quit -- \n"
                               "| x |\n|---|\n| 1 |\n| 2 |\n| 3 |\n| 4 |\n| 5 |\n| 6 |\n| 7 |\n"
                               "-- more: Enter, q: quit -- \n# after\n";
    ck_assert_msg(!strcmp(got, want), "the pager printed:\n%s", got);
    free(got);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("course_walker");
    TCase *tex = tcase_create("tex");
    tcase_add_test(tex, test_every_formula_of_the_text_cells_reads_as_plain_text);
    tcase_add_test(tex, test_representative_formulas_read_as_written_by_hand);
    tcase_add_test(tex, test_an_unknown_command_or_a_broken_brace_is_refused_by_name);
    suite_add_tcase(s, tex);
    TCase *walk = tcase_create("walk");
    tcase_set_timeout(walk, KVL_TEST_TIMEOUT);
    tcase_add_test(walk, test_the_walk_splits_no_table_and_shows_no_tex);
    tcase_add_test(walk, test_the_pager_prompts_before_a_markdown_table_not_inside_it);
    suite_add_tcase(s, walk);
    return s;
}
