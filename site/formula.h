/* TeX in Markdown: $…$ inline, $$…$$ displayed. cmark would read a formula as Markdown (backslash
 * escapes eat "\{" and "\,", underscores become emphasis), so each formula is swapped for a plain-word
 * placeholder before cmark parses the text and swapped back, HTML-escaped, into the HTML it renders.
 *
 * A formula is found only outside code: fenced blocks and code spans pass through untouched, so
 * `$EXERCISE_TMP` stays shell. "$" opens inline math when the next character is not a space, and the
 * formula closes at the next "$" that follows no space and precedes no digit, within the paragraph
 * (no blank line between); a "$" that closes nothing is plain text.
 *
 * Each formula comes back as <span class="math inline">$…$</span> or <span class="math display">$$…$$
 * </span>, its delimiters kept: the site's script typesets every .math element with KaTeX, and one that
 * it did not typeset still shows its dollars, which the browser test looks for. */
#ifndef KVL_SITE_FORMULA_H
#define KVL_SITE_FORMULA_H

#include "site.h"

typedef struct {
    char **tex;     /* [n]: each formula with its delimiters */
    size_t n;
} site_math;

/* out = md with every formula replaced by a placeholder recorded in m. */
void site_math_protect(site_math *m, cmark_strbuf *out, const char *md);

/* out = html with every placeholder of m replaced by its formula's span. */
void site_math_restore(const site_math *m, cmark_strbuf *out, const char *html);

void site_math_free(site_math *m);

#endif
