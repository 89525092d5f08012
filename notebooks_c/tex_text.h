/* TeX math as plain Unicode text, for `nb_NN --step`: a terminal renders no LaTeX, so the walker
 * prints `$[\,\tilde c \mid \tilde k\,] = W_{DKV}\, x_t$` as `[c̃ | k̃] = W_DKV xₜ`.
 *
 * The text keeps the formula's own spaces (a run of them as one; none after an opening delimiter
 * or before a closing one) and reads:
 * - Greek letters, relations and operators as their Unicode symbols (\le ≤, \cdot ·, \times ×,
 *   \in ∈, \to →, \sum Σ, \dots …), `-` as the minus sign −, `'` as the prime ′;
 * - a sub- or superscript as Unicode sub/superscript characters where every character has one and
 *   it is not a word (xₜ, Hₖᵥ, 2ᵏ⁻ᴹ, W_UKʰᵀ); else `_x` / `^x` for one character or a word of
 *   letters and digits (W_DKV, p_sink), `_(…)` / `^(…)` otherwise (k_(t,g), e^(sᵢ));
 * - \frac{a}{b} as a/b, with parentheses around a part that is not one term ((a + b)/c), and
 *   around the whole fraction when a term stands right beside it (2 (m/2ᴹ), (1/n) Σᵢ); \sqrt as √;
 * - \text, \mathrm, \operatorname as their text, \mathcal and \mathbb as script and double-struck
 *   letters, \tilde and \hat as combining marks over one character;
 * - thin spaces (\, \; \: \!) dropped, `\ ` and ~ as one space, \quad and \qquad as 2 and 4;
 * - \left, \right and \big… as the delimiter they size (\left. as nothing).
 * A command outside that list, an unbalanced brace, an alignment `&` or a `$` is an error that
 * names it, so that no formula reaches the reader half translated. */
#ifndef KVL_NB_TEX_TEXT_H
#define KVL_NB_TEX_TEXT_H

#include <stddef.h>

typedef struct {
    size_t at;         /* byte of the formula where the translation stopped */
    char what[96];     /* "unknown command \foo", "unbalanced {" */
} tex_text_error;

/* Write formula tex[0..n) (without its $ delimiters) as text into out[cap], NUL-terminated and cut
 * to fit, as snprintf does. Returns the bytes the whole text takes, or (size_t)-1 with *err set
 * when the formula cannot be read (out then holds nothing useful). */
size_t tex_text(char *out, size_t cap, const char *tex, size_t n, tex_text_error *err);

/* The first math span of Markdown text s: `$$…$$` (*display = 1) or `$…$` (*display = 0), outside
 * `code` spans; a `\$` is a dollar sign. Returns its opening `$` and sets *len to the span's bytes
 * with both delimiters; NULL when s holds no closed span. */
const char *tex_text_find(const char *s, size_t *len, int *display);

#endif
