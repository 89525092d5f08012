#include "tex_text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { PIECE_CAP = 1024, FORMULA_CAP = 8192, MAX_DEPTH = 32 };

/* ---- the text being written ------------------------------------------------------------------ */

typedef struct {
    char *buf;
    size_t cap, len;
    int after_open;      /* the last thing written opened a delimiter: no space after it */
    int overflow;
} text_out;

static void emit_n(text_out *o, const char *s, size_t n)
{
    if (o->len + n + 1 > o->cap) {
        o->overflow = 1;
        return;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
    o->after_open = 0;
}

static void emit(text_out *o, const char *s)
{
    emit_n(o, s, strlen(s));
}

static void trim_end(text_out *o)
{
    while (o->len && o->buf[o->len - 1] == ' ') o->buf[--o->len] = '\0';
}

/* One space for a run of the formula's spaces; none at the start, twice, or after an opening
 * delimiter. */
static void emit_space(text_out *o)
{
    if (o->len && o->buf[o->len - 1] != ' ' && !o->after_open) emit(o, " ");
}

static void emit_open(text_out *o, const char *s)
{
    emit(o, s);
    o->after_open = 1;
}

static void emit_close(text_out *o, const char *s)
{
    trim_end(o);
    emit(o, s);
}

static text_out piece(char *buf, size_t cap)
{
    buf[0] = '\0';
    return (text_out){.buf = buf, .cap = cap};
}

/* Bytes of the UTF-8 character that starts with byte c. */
static size_t char_bytes(unsigned char c)
{
    return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
}

/* ---- the commands ---------------------------------------------------------------------------- */

typedef enum {
    SYM,      /* a symbol: its text */
    OPEN,     /* an opening delimiter */
    CLOSE,    /* a closing delimiter */
    THIN,     /* \, \; \: \!: nothing */
    SPACE,    /* `\ `: one space */
    WIDE,     /* \quad, \qquad: text is the spaces */
    TEXT,     /* \text{…}: the argument's characters as they are */
    PLAIN,    /* \mathrm{…}: the argument read as math, in no other font */
    ACCENT,   /* \tilde{x}: text is the combining mark put after the one character */
    FRAC,
    SQRT,
    SIZED,    /* \left, \right, \big…: the delimiter that follows */
    CAL,      /* \mathcal{K}: script capitals */
    BB,       /* \mathbb{R}: double-struck capitals */
} command_kind;

typedef struct {
    const char *name;
    command_kind kind;
    const char *text;
    int op;   /* an operator, relation or punctuation: no term for a fraction to stand beside */
} command;

static const command commands[] = {
    {"alpha", SYM, "α", 0}, {"beta", SYM, "β", 0}, {"gamma", SYM, "γ", 0}, {"delta", SYM, "δ", 0},
    {"epsilon", SYM, "ε", 0}, {"varepsilon", SYM, "ε", 0}, {"zeta", SYM, "ζ", 0},
    {"eta", SYM, "η", 0}, {"theta", SYM, "θ", 0}, {"iota", SYM, "ι", 0}, {"kappa", SYM, "κ", 0},
    {"lambda", SYM, "λ", 0}, {"mu", SYM, "μ", 0}, {"nu", SYM, "ν", 0}, {"xi", SYM, "ξ", 0},
    {"pi", SYM, "π", 0}, {"rho", SYM, "ρ", 0}, {"sigma", SYM, "σ", 0}, {"tau", SYM, "τ", 0},
    {"phi", SYM, "φ", 0}, {"varphi", SYM, "φ", 0}, {"chi", SYM, "χ", 0}, {"psi", SYM, "ψ", 0},
    {"omega", SYM, "ω", 0}, {"Gamma", SYM, "Γ", 0}, {"Delta", SYM, "Δ", 0},
    {"Theta", SYM, "Θ", 0}, {"Lambda", SYM, "Λ", 0}, {"Pi", SYM, "Π", 0}, {"Sigma", SYM, "Σ", 0},
    {"Phi", SYM, "Φ", 0}, {"Psi", SYM, "Ψ", 0}, {"Omega", SYM, "Ω", 0},
    {"ell", SYM, "ℓ", 0}, {"infty", SYM, "∞", 0}, {"top", SYM, "⊤", 0},
    {"varnothing", SYM, "∅", 0}, {"emptyset", SYM, "∅", 0}, {"partial", SYM, "∂", 0},
    {"sum", SYM, "Σ", 0}, {"prod", SYM, "∏", 0}, {"int", SYM, "∫", 0},
    {"max", SYM, "max", 0}, {"min", SYM, "min", 0}, {"log", SYM, "log", 0}, {"ln", SYM, "ln", 0},
    {"exp", SYM, "exp", 0}, {"arg", SYM, "arg", 0},
    {"dots", SYM, "…", 0}, {"ldots", SYM, "…", 0}, {"cdots", SYM, "⋯", 0},
    {"cdot", SYM, "·", 1}, {"times", SYM, "×", 1}, {"pm", SYM, "±", 1}, {"mp", SYM, "∓", 1},
    {"odot", SYM, "⊙", 1}, {"otimes", SYM, "⊗", 1}, {"oplus", SYM, "⊕", 1}, {"div", SYM, "÷", 1},
    {"setminus", SYM, "∖", 1}, {"circ", SYM, "∘", 1}, {"ast", SYM, "∗", 1}, {"bmod", SYM, "mod", 1},
    {"le", SYM, "≤", 1}, {"leq", SYM, "≤", 1}, {"ge", SYM, "≥", 1}, {"geq", SYM, "≥", 1},
    {"ne", SYM, "≠", 1}, {"neq", SYM, "≠", 1}, {"approx", SYM, "≈", 1}, {"sim", SYM, "∼", 1},
    {"equiv", SYM, "≡", 1}, {"propto", SYM, "∝", 1}, {"ll", SYM, "≪", 1}, {"gg", SYM, "≫", 1},
    {"in", SYM, "∈", 1}, {"notin", SYM, "∉", 1}, {"subset", SYM, "⊂", 1},
    {"subseteq", SYM, "⊆", 1}, {"supset", SYM, "⊃", 1}, {"supseteq", SYM, "⊇", 1},
    {"to", SYM, "→", 1}, {"rightarrow", SYM, "→", 1}, {"leftarrow", SYM, "←", 1},
    {"mapsto", SYM, "↦", 1}, {"mid", SYM, "|", 1},
    {"%", SYM, "%", 0}, {"_", SYM, "_", 0}, {"#", SYM, "#", 0}, {"&", SYM, "&", 0},
    {"$", SYM, "$", 0},
    {"lfloor", OPEN, "⌊", 0}, {"lceil", OPEN, "⌈", 0}, {"langle", OPEN, "⟨", 0},
    {"lVert", OPEN, "‖", 0}, {"lvert", OPEN, "|", 0}, {"{", OPEN, "{", 0},
    {"rfloor", CLOSE, "⌋", 1}, {"rceil", CLOSE, "⌉", 1}, {"rangle", CLOSE, "⟩", 1},
    {"rVert", CLOSE, "‖", 1}, {"rvert", CLOSE, "|", 1}, {"}", CLOSE, "}", 1},
    {"Vert", SYM, "‖", 0}, {"vert", SYM, "|", 0}, {"|", SYM, "‖", 0},
    {",", THIN, "", 0}, {";", THIN, "", 0}, {":", THIN, "", 0}, {"!", THIN, "", 0},
    {" ", SPACE, " ", 0}, {"quad", WIDE, "  ", 1}, {"qquad", WIDE, "    ", 1},
    {"text", TEXT, "", 0}, {"textrm", TEXT, "", 0}, {"mbox", TEXT, "", 0},
    {"mathrm", PLAIN, "", 0}, {"operatorname", PLAIN, "", 0}, {"mathit", PLAIN, "", 0},
    {"mathbf", PLAIN, "", 0}, {"mathsf", PLAIN, "", 0}, {"boldsymbol", PLAIN, "", 0},
    {"tilde", ACCENT, "\xcc\x83", 0}, {"hat", ACCENT, "\xcc\x82", 0},
    {"bar", ACCENT, "\xcc\x84", 0}, {"dot", ACCENT, "\xcc\x87", 0},
    {"vec", ACCENT, "\xe2\x83\x97", 0},
    {"frac", FRAC, "", 0}, {"tfrac", FRAC, "", 0}, {"dfrac", FRAC, "", 0},
    {"sqrt", SQRT, "", 0},
    {"left", SIZED, "(", 0}, {"right", SIZED, ")", 1}, {"big", SIZED, "", 0},
    {"Big", SIZED, "", 0}, {"bigg", SIZED, "", 0}, {"Bigg", SIZED, "", 0},
    {"bigl", SIZED, "(", 0}, {"bigr", SIZED, ")", 1}, {"Bigl", SIZED, "(", 0},
    {"Bigr", SIZED, ")", 1},
    {"mathcal", CAL, "", 0}, {"mathbb", BB, "", 0},
};

static const command *find_command(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strlen(commands[i].name) == n && !memcmp(commands[i].name, name, n))
            return &commands[i];
    return NULL;
}

/* ---- sub- and superscript characters --------------------------------------------------------- */

typedef struct {
    const char *from, *to;
} char_map;

static const char_map subscripts[] = {
    {"0", "₀"}, {"1", "₁"}, {"2", "₂"}, {"3", "₃"}, {"4", "₄"}, {"5", "₅"}, {"6", "₆"},
    {"7", "₇"}, {"8", "₈"}, {"9", "₉"}, {"+", "₊"}, {"−", "₋"}, {"=", "₌"}, {"(", "₍"},
    {")", "₎"}, {"a", "ₐ"}, {"e", "ₑ"}, {"h", "ₕ"}, {"i", "ᵢ"}, {"j", "ⱼ"}, {"k", "ₖ"},
    {"l", "ₗ"}, {"m", "ₘ"}, {"n", "ₙ"}, {"o", "ₒ"}, {"p", "ₚ"}, {"r", "ᵣ"}, {"s", "ₛ"},
    {"t", "ₜ"}, {"u", "ᵤ"}, {"v", "ᵥ"}, {"x", "ₓ"}, {"β", "ᵦ"}, {"γ", "ᵧ"}, {"ρ", "ᵨ"},
    {"φ", "ᵩ"}, {"χ", "ᵪ"}, {NULL, NULL},
};

static const char_map superscripts[] = {
    {"0", "⁰"}, {"1", "¹"}, {"2", "²"}, {"3", "³"}, {"4", "⁴"}, {"5", "⁵"}, {"6", "⁶"},
    {"7", "⁷"}, {"8", "⁸"}, {"9", "⁹"}, {"+", "⁺"}, {"−", "⁻"}, {"=", "⁼"}, {"(", "⁽"},
    {")", "⁾"}, {"a", "ᵃ"}, {"b", "ᵇ"}, {"c", "ᶜ"}, {"d", "ᵈ"}, {"e", "ᵉ"}, {"f", "ᶠ"},
    {"g", "ᵍ"}, {"h", "ʰ"}, {"i", "ⁱ"}, {"j", "ʲ"}, {"k", "ᵏ"}, {"l", "ˡ"}, {"m", "ᵐ"},
    {"n", "ⁿ"}, {"o", "ᵒ"}, {"p", "ᵖ"}, {"r", "ʳ"}, {"s", "ˢ"}, {"t", "ᵗ"}, {"u", "ᵘ"},
    {"v", "ᵛ"}, {"w", "ʷ"}, {"x", "ˣ"}, {"y", "ʸ"}, {"z", "ᶻ"}, {"A", "ᴬ"}, {"B", "ᴮ"},
    {"D", "ᴰ"}, {"E", "ᴱ"}, {"G", "ᴳ"}, {"H", "ᴴ"}, {"I", "ᴵ"}, {"J", "ᴶ"}, {"K", "ᴷ"},
    {"L", "ᴸ"}, {"M", "ᴹ"}, {"N", "ᴺ"}, {"O", "ᴼ"}, {"P", "ᴾ"}, {"R", "ᴿ"}, {"T", "ᵀ"},
    {"U", "ᵁ"}, {"V", "ⱽ"}, {"W", "ᵂ"}, {"⊤", "ᵀ"}, {"α", "ᵅ"}, {"β", "ᵝ"}, {"γ", "ᵞ"},
    {"δ", "ᵟ"}, {"ε", "ᵋ"}, {"θ", "ᶿ"}, {"φ", "ᵠ"}, {"χ", "ᵡ"}, {NULL, NULL},
};

static const char *mapped(const char_map *m, const char *c, size_t n)
{
    for (; m->from; m++)
        if (strlen(m->from) == n && !memcmp(m->from, c, n)) return m->to;
    return NULL;
}

static int is_letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* A run of three letters is a word (main, nope, sink): it stays legible as _word. */
static int holds_word(const char *s)
{
    size_t run = 0;
    for (; *s; s++)
        if ((run = is_letter(*s) ? run + 1 : 0) >= 3) return 1;
    return 0;
}

/* s in script characters from m, into o; 0 when one of its characters has none. */
static int emit_mapped(text_out *o, const char_map *m, const char *s)
{
    char buf[PIECE_CAP * 2];
    text_out t = piece(buf, sizeof buf);
    for (size_t n; *s; s += n) {
        n = char_bytes((unsigned char)*s);
        if (*s == ' ') continue;   /* 2^{k - M} is 2ᵏ⁻ᴹ as 2^{k-M} is */
        const char *to = mapped(m, s, n);
        if (!to) return 0;
        emit(&t, to);
    }
    emit(o, buf);
    return 1;
}

static int alnum_word(const char *s)
{
    for (; *s; s++)
        if (!is_letter(*s) && !(*s >= '0' && *s <= '9')) return 0;
    return 1;
}

static void emit_script(text_out *o, int super, const char *s)
{
    trim_end(o);
    if (!holds_word(s) && emit_mapped(o, super ? superscripts : subscripts, s)) return;
    const char *mark = super ? "^" : "_";
    emit(o, mark);
    if (char_bytes((unsigned char)*s) == strlen(s) || alnum_word(s)) {
        emit(o, s);
        return;
    }
    emit(o, "(");
    emit(o, s);
    emit(o, ")");
}

/* ---- terms ----------------------------------------------------------------------------------- */

static int is_one_of(const char *c, size_t n, const char *const *set)
{
    for (; *set; set++)
        if (strlen(*set) == n && !memcmp(*set, c, n)) return 1;
    return 0;
}

static const char *const opening[] = {"(", "[", "{", "⌊", "⌈", "⟨", NULL};
static const char *const closing[] = {")", "]", "}", "⌋", "⌉", "⟩", NULL};
static const char *const operators[] = {"+", "−", "·", "×", "/", "=", "<", ">", "≤", "≥", "≈",
                                        "≠", "±", "∈", ",", "∗", "⊙", "|", NULL};

/* Whether s is one term: no space and no operator outside its brackets (x, 2ᴹ, ⌈T/M⌉, f(a + b)). */
static int one_term(const char *s)
{
    int depth = 0;
    for (size_t n; *s; s += n) {
        n = char_bytes((unsigned char)*s);
        if (is_one_of(s, n, opening)) depth++;
        else if (is_one_of(s, n, closing)) depth--;
        else if (depth == 0 && (*s == ' ' || is_one_of(s, n, operators))) return 0;
    }
    return 1;
}

/* Whether the text written so far ends in a term (not an operator, an opening or nothing). */
static int ends_in_term(const text_out *o)
{
    size_t end = o->len;
    while (end && o->buf[end - 1] == ' ') end--;
    if (!end) return 0;
    size_t start = end - 1;
    while (start && ((unsigned char)o->buf[start] & 0xc0) == 0x80) start--;
    static const char *const not_terms[] = {"=", "+", "−", "<", ">", "≤", "≥", "≠", "≈", "∼",
                                            "×", "·", "±", "⊙", "∈", "→", "⊆", "∖", ",", ";",
                                            ":", "(", "[", "{", "⌊", "⌈", "⟨", "/", "|", NULL};
    return !is_one_of(o->buf + start, end - start, not_terms);
}

/* A sign with no term before it is unary (−1, ±448): no space between it and its term. */
static void emit_sign(text_out *o, const char *s)
{
    const int unary = (!strcmp(s, "−") || !strcmp(s, "±") || !strcmp(s, "∓")) && !ends_in_term(o);
    emit(o, s);
    o->after_open = unary;
}

/* ---- reading --------------------------------------------------------------------------------- */

typedef struct {
    const char *start, *at, *end;
    tex_text_error *err;
    int failed;
} reader;

static int fail(reader *r, const char *fmt, ...)
{
    if (r->failed) return 0;
    r->failed = 1;
    r->err->at = (size_t)(r->at - r->start);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err->what, sizeof r->err->what, fmt, ap);
    va_end(ap);
    return 0;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void skip_spaces(reader *r)
{
    while (r->at < r->end && is_space(*r->at)) r->at++;
}

/* The command at r->at (a backslash): its name's bytes in *n, the reader past it. */
static const char *command_name(reader *r, size_t *n)
{
    const char *name = ++r->at;
    if (r->at < r->end && is_letter(*r->at))
        while (r->at < r->end && is_letter(*r->at)) r->at++;
    else if (r->at < r->end) r->at++;
    *n = (size_t)(r->at - name);
    return name;
}

/* Whether a term follows at r->at (past spaces and thin spaces), so that a fraction needs its
 * parentheses; the reader is left where it was. */
static int term_follows(const reader *r)
{
    reader peek = *r;
    for (;;) {
        skip_spaces(&peek);
        if (peek.at >= peek.end) return 0;
        if (*peek.at != '\\') return !strchr("}=+-<>,.;:)]|&/", *peek.at);
        size_t n;
        const char *name = command_name(&peek, &n);
        const command *c = find_command(name, n);
        if (!c) return 1;
        if (c->kind != THIN) return !c->op;
    }
}

static int read_list(reader *r, text_out *o, int depth, int in_group);
static int read_item(reader *r, text_out *o, int depth);

/* One argument: a braced group or a single item, into o. */
static int read_arg(reader *r, text_out *o, int depth)
{
    skip_spaces(r);
    if (r->at >= r->end || *r->at == '}') return fail(r, "a command without its argument");
    if (*r->at != '{') return read_item(r, o, depth);
    r->at++;
    return read_list(r, o, depth + 1, 1);
}

/* One argument into its own buffer, spaces trimmed. */
static int read_piece(reader *r, char *buf, size_t cap, int depth)
{
    text_out t = piece(buf, cap);
    if (!read_arg(r, &t, depth)) return 0;
    trim_end(&t);
    if (t.overflow) return fail(r, "a part longer than %zu bytes", cap);
    return 1;
}

static int read_script(reader *r, text_out *o, int super, int depth)
{
    char s[PIECE_CAP];
    if (!read_piece(r, s, sizeof s, depth)) return 0;
    if (!*s) return fail(r, "an empty %sscript", super ? "super" : "sub");
    emit_script(o, super, s);
    return 1;
}

static void emit_term(text_out *o, const char *s)
{
    if (one_term(s)) {
        emit(o, s);
        return;
    }
    emit(o, "(");
    emit(o, s);
    emit(o, ")");
}

static int read_frac(reader *r, text_out *o, int depth)
{
    char num[PIECE_CAP], den[PIECE_CAP], whole[2 * PIECE_CAP + 8];
    if (!read_piece(r, num, sizeof num, depth) || !read_piece(r, den, sizeof den, depth)) return 0;
    text_out w = piece(whole, sizeof whole);
    emit_term(&w, num);
    emit(&w, "/");
    emit_term(&w, den);
    if (ends_in_term(o) || term_follows(r)) {
        emit(o, "(");
        emit(o, whole);
        emit(o, ")");
    } else {
        emit(o, whole);
    }
    return 1;
}

static int read_sqrt(reader *r, text_out *o, int depth)
{
    skip_spaces(r);
    if (r->at < r->end && *r->at == '[') return fail(r, "\\sqrt with an index");
    char arg[PIECE_CAP];
    if (!read_piece(r, arg, sizeof arg, depth)) return 0;
    emit(o, "√");
    emit_term(o, arg);
    return 1;
}

static int read_text(reader *r, text_out *o)
{
    skip_spaces(r);
    if (r->at >= r->end || *r->at != '{') return fail(r, "\\text without {…}");
    int depth = 0;
    for (r->at++; r->at < r->end; r->at++) {
        const char c = *r->at;
        if (c == '{') depth++;
        else if (c == '}' && depth-- == 0) {
            r->at++;
            return 1;
        } else if (c == '\\' || c == '$') return fail(r, "a %c inside \\text", c);
        else if (is_space(c)) emit_space(o);
        else emit_n(o, &c, 1);
    }
    return fail(r, "unbalanced {");
}

static int read_accent(reader *r, text_out *o, const command *c, int depth)
{
    char arg[PIECE_CAP];
    if (!read_piece(r, arg, sizeof arg, depth)) return 0;
    if (!*arg || char_bytes((unsigned char)*arg) != strlen(arg))
        return fail(r, "\\%s over more than one character", c->name);
    emit(o, arg);
    emit(o, c->text);
    return 1;
}

/* \mathcal{G}, \mathbb{R}: capitals only. Letterlike Symbols holds the ones the Mathematical
 * Alphanumeric block leaves out. */
static int read_letters(reader *r, text_out *o, const command *c, int depth)
{
    static const char *const letters[2][26] = {
        {"𝒜", "ℬ", "𝒞", "𝒟", "ℰ", "ℱ", "𝒢", "ℋ", "ℐ", "𝒥", "𝒦", "ℒ", "ℳ",
         "𝒩", "𝒪", "𝒫", "𝒬", "ℛ", "𝒮", "𝒯", "𝒰", "𝒱", "𝒲", "𝒳", "𝒴", "𝒵"},
        {"𝔸", "𝔹", "ℂ", "𝔻", "𝔼", "𝔽", "𝔾", "ℍ", "𝕀", "𝕁", "𝕂", "𝕃", "𝕄",
         "ℕ", "𝕆", "ℙ", "ℚ", "ℝ", "𝕊", "𝕋", "𝕌", "𝕍", "𝕎", "𝕏", "𝕐", "ℤ"}};
    char arg[PIECE_CAP];
    skip_spaces(r);
    const char *at = r->at;
    text_out t = piece(arg, sizeof arg);
    if (!read_arg(r, &t, depth)) return 0;
    for (const char *s = arg; *s; s++) {
        if (*s < 'A' || *s > 'Z') {
            r->at = at;
            return fail(r, "\\%s of something other than capital letters", c->name);
        }
        emit(o, letters[c->kind != CAL][*s - 'A']);
    }
    return 1;
}

/* \left( … \right): the delimiter after the command, an opening one after \left and \bigl, a
 * closing one after \right and \bigr. */
static int read_sized(reader *r, text_out *o, const command *c)
{
    skip_spaces(r);
    if (r->at >= r->end) return fail(r, "\\%s without a delimiter", c->name);
    const char *text = NULL;
    command_kind as = SYM;
    static const char delimiters[] = "()[]|/.";
    const char *delimiter = *r->at ? strchr(delimiters, *r->at) : NULL;
    if (delimiter) {
        static const char *const plain[] = {"(", ")", "[", "]", "|", "/", ""};
        text = plain[delimiter - delimiters];
        as = strchr("([", *r->at) ? OPEN : strchr(")]", *r->at) ? CLOSE : SYM;
        r->at++;
    } else if (*r->at == '\\') {
        size_t n;
        const char *name = command_name(r, &n);
        const command *d = find_command(name, n);
        const int bar = d && (!strcmp(d->text, "‖") || !strcmp(d->text, "|"));
        if (!d || (d->kind != OPEN && d->kind != CLOSE && !bar))
            return fail(r, "\\%s before \\%.*s, which is no delimiter", c->name, (int)n, name);
        text = d->text;
        as = d->kind;
    } else {
        return fail(r, "\\%s before %c, which is no delimiter", c->name, *r->at);
    }
    if (as == SYM && *c->text) as = *c->text == '(' ? OPEN : CLOSE;
    if (as == OPEN) emit_open(o, text);
    else if (as == CLOSE) emit_close(o, text);
    else emit(o, text);
    return 1;
}

static int read_command(reader *r, text_out *o, int depth)
{
    size_t n;
    const char *name = command_name(r, &n);
    const command *c = find_command(name, n);
    if (!c) {
        r->at = name - 1;
        return fail(r, "unknown command \\%.*s", (int)n, name);
    }
    switch (c->kind) {
    case SYM: emit_sign(o, c->text); return 1;
    case OPEN: emit_open(o, c->text); return 1;
    case CLOSE: emit_close(o, c->text); return 1;
    case THIN:
    case SPACE: emit_space(o); return 1;
    case WIDE:
        trim_end(o);
        emit(o, c->text);
        return 1;
    case TEXT: return read_text(r, o);
    case PLAIN: return read_arg(r, o, depth);
    case ACCENT: return read_accent(r, o, c, depth);
    case FRAC: return read_frac(r, o, depth);
    case SQRT: return read_sqrt(r, o, depth);
    case SIZED: return read_sized(r, o, c);
    case CAL:
    case BB: return read_letters(r, o, c, depth);
    }
    return fail(r, "unknown command \\%.*s", (int)n, name);
}

/* One token: a character, a command with its arguments, a script or a group. */
static int read_item(reader *r, text_out *o, int depth)
{
    if (depth >= MAX_DEPTH) return fail(r, "groups nested deeper than %d", MAX_DEPTH);
    const char c = *r->at;
    if (is_space(c)) {
        skip_spaces(r);
        emit_space(o);
        return 1;
    }
    if (c == '\\') return read_command(r, o, depth);
    if (c == '{') {
        r->at++;
        return read_list(r, o, depth + 1, 1);
    }
    if (c == '}') return fail(r, "unbalanced }");
    if (c == '$' || c == '&' || c == '%' || c == '#')
        return fail(r, "a %c, which this translator does not read", c);
    r->at++;
    if (c == '_' || c == '^') return read_script(r, o, c == '^', depth + 1);
    if (c == '~') emit_space(o);
    else if (c == '-') emit_sign(o, "−");
    else if (c == '\'') emit(o, "′");
    else if (c == '(' || c == '[') emit_open(o, c == '(' ? "(" : "[");
    else if (c == ')' || c == ']') emit_close(o, c == ')' ? ")" : "]");
    else if (c == ',' || c == ';' || c == '.') emit_close(o, c == ',' ? "," : c == ';' ? ";" : ".");
    else {
        const size_t n = char_bytes((unsigned char)c);
        if (r->at - 1 + n > r->end) return fail(r, "a cut UTF-8 character");
        emit_n(o, r->at - 1, n);
        r->at += n - 1;
    }
    return 1;
}

/* Items up to the end, or up to the `}` that closes the group when in_group. */
static int read_list(reader *r, text_out *o, int depth, int in_group)
{
    while (r->at < r->end) {
        if (*r->at == '}' && in_group) {
            r->at++;
            return 1;
        }
        if (!read_item(r, o, depth)) return 0;
    }
    return in_group ? fail(r, "unbalanced {") : 1;
}

size_t tex_text(char *out, size_t cap, const char *tex, size_t n, tex_text_error *err)
{
    static _Thread_local char buf[FORMULA_CAP];
    text_out o = piece(buf, sizeof buf);
    reader r = {.start = tex, .at = tex, .end = tex + n, .err = err};
    *err = (tex_text_error){0};
    if (read_list(&r, &o, 0, 0)) {
        trim_end(&o);
        if (o.overflow) fail(&r, "a formula longer than %d bytes of text", FORMULA_CAP);
    }
    if (r.failed) {
        if (cap) out[0] = '\0';
        return (size_t)-1;
    }
    if (cap) snprintf(out, cap, "%s", buf);
    return o.len;
}

/* ---- finding the math in Markdown ------------------------------------------------------------ */

/* Past the code span that opens at s (a run of backticks), or s past its run when none closes
 * it. */
static const char *past_code(const char *s)
{
    size_t run = strspn(s, "`");
    for (const char *q = s + run; (q = strchr(q, '`'));) {
        const size_t k = strspn(q, "`");
        if (k == run) return q + k;
        q += k;
    }
    return s + run;
}

/* The closing delimiter of a span whose text starts at s, or NULL. */
static const char *closing_dollar(const char *s, int display)
{
    for (; *s; s++) {
        if (*s == '\\' && s[1]) s++;
        else if (*s == '$' && (!display || s[1] == '$')) return s;
    }
    return NULL;
}

const char *tex_text_find(const char *s, size_t *len, int *display)
{
    while (*s) {
        if (*s == '\\' && s[1]) s += 2;
        else if (*s == '`') s = past_code(s);
        else if (*s != '$') s++;
        else {
            *display = s[1] == '$';
            const char *close = closing_dollar(s + 1 + *display, *display);
            if (!close) return NULL;
            *len = (size_t)(close - s) + 1 + (size_t)*display;
            return s;
        }
    }
    return NULL;
}
