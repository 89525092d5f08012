/* The course's texts: chapters/NN_name/README.md and the top-level README's course map.
 *
 * Every chapter text has the course's sections and shows a figure that exists; every command it tells
 * the reader to run (lines of ```sh blocks, and inline code that starts with build/bin/, build/tests/
 * or make) exists and succeeds from the repository root (programs are run; make targets must exist;
 * chapter suites must be suites that `make test` runs in the same pass); every number the texts quote
 * from a program is what that program prints now; the top-level README links the chapters in order;
 * and the course's sources (chapters/ and notebooks_c/) read in 100 columns. A chapter text added later
 * (chapters/NN_name/README.md) is picked up by name, and its commands are run without an edit here. */
#include "common.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_CHAPTERS 16
#define MAX_COMMANDS 64
#define OUT_CAP (1 << 20)

static char out[OUT_CAP], err[OUT_CAP];

/* chapters/NN_name folders that hold a README.md (a chapter whose text is not written yet has only
 * programs), sorted */
static size_t list_chapters(char names[][64])
{
    const size_t n = kvl_list_chapters(names, MAX_CHAPTERS, "README.md");
    ck_assert_msg(n >= 6, "expected chapters 1-5 and 8, found %zu", n);
    return n;
}

static char *chapter_readme(const char *chapter)
{
    char rel[128];
    snprintf(rel, sizeof rel, "chapters/%s/README.md", chapter);
    char *text = kvl_read_text(kvl_path(rel));
    ck_assert_msg(text != NULL, "%s is missing", rel);
    return text;
}

/* ---- sections and figures ------------------------------------------------------------------------------ */

START_TEST(test_every_chapter_text_has_the_course_sections)
{
    static const char *const sections[] = {"\n## The cost it attacks\n", "\n## What it computes\n",
                                           "\n## What it stores per token\n", "\n## Run it\n",
                                           "\n## Check yourself\n", "\n## Exercises\n",
                                           "\n## Where the sources disagree\n"};
    char names[MAX_CHAPTERS][64];
    size_t n = list_chapters(names);
    for (size_t i = 0; i < n; i++) {
        char *text = chapter_readme(names[i]);
        for (size_t k = 0; k < sizeof sections / sizeof sections[0]; k++)
            ck_assert_msg(strstr(text, sections[k]) != NULL, "chapters/%s/README.md lacks the section \"%s\"", names[i],
                          sections[k] + 1);
        ck_assert_msg(strstr(text, "\n## Figure\n") || strstr(text, "\n## Figures\n"), "chapters/%s: no figure section",
                      names[i]);
        ck_assert_msg(strstr(text, "```sh\n") != NULL, "chapters/%s: no ```sh block of commands", names[i]);
        free(text);
    }
}
END_TEST

/* "Check yourself" is a numbered Markdown list: items 1, 2, ... each open a line, and no item's
 * number stands inside another item's text (a list re-wrapped as prose reads "... 2. Why ..."). */
START_TEST(test_check_yourself_is_a_list_of_questions)
{
    char names[MAX_CHAPTERS][64];
    size_t n = list_chapters(names);
    for (size_t i = 0; i < n; i++) {
        char *text = chapter_readme(names[i]);
        char *at = strstr(text, "\n## Check yourself\n");
        ck_assert_msg(at != NULL, "chapters/%s: no Check yourself", names[i]);
        char *end = strstr(at + 1, "\n## ");
        if (end) *end = 0;
        int items = 0;
        for (int k = 1; k < 100; k++) {
            char item[16];
            snprintf(item, sizeof item, "\n%d. ", k);
            if (!strstr(at, item)) break;
            items = k;
        }
        ck_assert_msg(items >= 2, "chapters/%s: Check yourself holds %d numbered items", names[i], items);
        for (int k = 2; k <= items + 1; k++) {
            char inside[16];
            snprintf(inside, sizeof inside, " %d. ", k);
            for (const char *p = strstr(at, inside); p; p = strstr(p + 1, inside))
                ck_assert_msg(!(p[-1] == '.' || p[-1] == '?' || p[-1] == ')'),
                              "chapters/%s: Check yourself item %d runs on inside the item before it: \"%.60s\"",
                              names[i], k, p > at + 20 ? p - 20 : p);
        }
        free(text);
    }
}
END_TEST

START_TEST(test_every_figure_a_chapter_shows_exists)
{
    char names[MAX_CHAPTERS][64];
    size_t n = list_chapters(names);
    for (size_t i = 0; i < n; i++) {
        char *text = chapter_readme(names[i]);
        size_t shown = 0;
        for (const char *p = strstr(text, "]("); p; p = strstr(p + 2, "](")) {
            const char *end = strchr(p + 2, ')');
            if (!end || end - p < 6 || strncmp(end - 4, ".svg", 4)) continue;
            char rel[256];
            snprintf(rel, sizeof rel, "chapters/%s/%.*s", names[i], (int)(end - p - 2), p + 2);
            ck_assert_msg(access(kvl_path(rel), R_OK) == 0, "chapters/%s/README.md shows %s, which does not exist",
                          names[i], rel);
            shown++;
        }
        ck_assert_msg(shown > 0, "chapters/%s/README.md shows no SVG figure", names[i]);
        free(text);
    }
}
END_TEST

/* ---- the commands -------------------------------------------------------------------------------------- */

typedef struct {
    char text[256];
} command;

static void add_command(command *cmds, size_t *n, const char *start, size_t len)
{
    while (len && isspace((unsigned char)start[len - 1])) len--;
    while (len && isspace((unsigned char)*start)) start++, len--;
    if (!len || *start == '#') return;
    for (size_t i = 0; i < *n; i++)
        if (strlen(cmds[i].text) == len && !strncmp(cmds[i].text, start, len)) return;
    ck_assert_msg(*n < MAX_COMMANDS, "too many commands in one chapter");
    snprintf(cmds[(*n)++].text, sizeof cmds[0].text, "%.*s", (int)len, start);
}

static int runnable(const char *s, size_t len)
{
    return (len >= 10 && !strncmp(s, "build/bin/", 10)) || (len >= 12 && !strncmp(s, "build/tests/", 12)) ||
           (len >= 4 && !strncmp(s, "make", 4) && (len == 4 || s[4] == ' '));
}

/* lines of ```sh blocks, and inline `code` that is a command */
static size_t extract_commands(command *cmds, const char *text)
{
    size_t n = 0;
    int in_sh = 0;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (!strncmp(line, "```", 3)) in_sh = !in_sh && !strncmp(line, "```sh", 5);
        else if (in_sh) add_command(cmds, &n, line, len);
        else
            for (const char *p = memchr(line, '`', len); p && p < line + len;) {
                const char *q = memchr(p + 1, '`', (size_t)(line + len - p - 1));
                if (!q) break;
                if (runnable(p + 1, (size_t)(q - p - 1))) add_command(cmds, &n, p + 1, (size_t)(q - p - 1));
                p = memchr(q + 1, '`', (size_t)(line + len - q - 1));
            }
        line = end ? end + 1 : line + len;
    }
    return n;
}

/* Each word after `make` must be a target the Makefile defines. */
/* 1 when the Makefile has a rule for target w: "w:" itself, or a pattern "PREFIX%:" that w extends. */
static int has_target(const char *makefile, const char *w)
{
    char rule[160];
    snprintf(rule, sizeof rule, "\n%.100s:", w);
    if (strstr(makefile, rule)) return 1;
    for (size_t k = strlen(w); k-- > 1;) {
        snprintf(rule, sizeof rule, "\n%.*s%%:", (int)k, w);
        if (strstr(makefile, rule)) return 1;
    }
    return 0;
}

static void check_make(const char *cmd, const char *chapter)
{
    char *makefile = kvl_read_text(kvl_path("Makefile")), words[256];
    ck_assert(makefile != NULL);
    snprintf(words, sizeof words, "%s", cmd + 4);
    for (char *w = strtok(words, " "); w; w = strtok(NULL, " "))
        if (!strchr(w, '='))   /* a variable: SOLUTION=1 */
            ck_assert_msg(has_target(makefile, w), "chapters/%s: `%s`: the Makefile has no target %s", chapter, cmd, w);
    free(makefile);
}

/* Run one command as the reader would from the repository root: programs from $KVL_BIN (kvl_run puts
 * it first on PATH), figures into a temporary folder instead of the tree. A chapter's test suite is
 * not run twice: `make test` runs every tests/test_*.c suite in this same pass and fails if one does,
 * so here the suite must be one of those, built beside the programs. */
static void run_command(const char *cmd, const char *chapter, const char *tmp)
{
    const char *bin = getenv("KVL_BIN");
    char line[1024];
    if (!strncmp(cmd, "make", 4)) {
        check_make(cmd, chapter);
        return;
    }
    if (!strncmp(cmd, "build/tests/", 12)) {
        char source[256];
        snprintf(source, sizeof source, "tests/%.200s.c", cmd + 12);
        ck_assert_msg(!strchr(cmd + 12, ' ') && access(kvl_path(source), R_OK) == 0,
                      "chapters/%s: `%s` is not one of the suites in tests/", chapter, cmd);
        snprintf(line, sizeof line, "%s/../tests/%s", bin && *bin ? bin : "build/bin", cmd + 12);
        ck_assert_msg(access(line, X_OK) == 0, "chapters/%s: `%s`: the suite is not built", chapter, cmd);
        return;
    }
    snprintf(line, sizeof line, "%s", cmd + 10);
    char *fig = strstr(line, "--figures ");
    if (fig) snprintf(fig + 10, sizeof line - (size_t)(fig + 10 - line), "%s", tmp);
    int rc = kvl_run(line, "", out, OUT_CAP, err, OUT_CAP);
    ck_assert_msg(rc == 0, "chapters/%s/README.md tells the reader to run `%s`; it exited %d:\n%s", chapter, cmd, rc,
                  err);
}

START_TEST(test_every_command_a_chapter_gives_runs)
{
    char names[MAX_CHAPTERS][64], tmp[] = "/tmp/kvl_readme_XXXXXX";
    ck_assert(mkdtemp(tmp) != NULL);
    size_t n = list_chapters(names);
    static command cmds[MAX_COMMANDS];
    for (size_t i = 0; i < n; i++) {
        char *text = chapter_readme(names[i]);
        size_t k = extract_commands(cmds, text);
        ck_assert_msg(k >= 3, "chapters/%s/README.md gives only %zu commands", names[i], k);
        for (size_t c = 0; c < k; c++) run_command(cmds[c].text, names[i], tmp);
        free(text);
    }
    char rm[64];
    snprintf(rm, sizeof rm, "rm -rf '%s'", tmp);
    ck_assert(system(rm) == 0);
}
END_TEST

/* ---- quoted numbers -------------------------------------------------------------------------------------- */

/* Each chapter text quotes numbers its programs compute. A row: the text must say `quoted`, and
 * `command` must print `printed` (both compared with runs of white space collapsed to one). */
static const struct {
    const char *chapter, *quoted, *command, *printed;
} QUOTES[] = {
    {"01_mha", "**389,120 bytes per token**", "cost", "= 389,120 B per token"},
    {"01_mha", "327,680 (320 KiB)", "cost", "= 327,680 B per token = 320 KiB"},
    {"01_mha", "47.5 GiB", "kvtable", "389,120 - 1.0x - 47.50"},
    {"01_mha", "3,112,960 B per token", "cost", "3,112,960"},
    {"01_mha", "48,640", "cost", "MQA 95 1 256 2 512 512 48,640"},
    {"01_mha", "1,966,080 elements", "nb_01", "= 1,966,080 elements per token"},
    {"01_mha", "3,932,160 B = 3.93 MB", "nb_01", "3,932,160 B = 3.93 MB"},
    {"02_mla", "61 × 1,152 = 70,272 B per token", "nb_02", "1,152 B per layer; x 61 layers = 70,272 B per token"},
    {"02_mla", "60 × 1,152 = 69,120 B", "nb_02", "60 layers, 69,120 B per token"},
    {"02_mla", "64× fewer values than MHA's 32,768 (56.9×", "nb_02", "32,768 values: 64 x the latent alone, 56.9 x"},
    {"02_mla", "2.25 groups", "nb_02", "= 2.25 groups"},
    {"02_mla", "9,210,691,584 B: 9.21 GB, or 8.58 GiB", "nb_02", "9,210,691,584 B = 9.21 GB = 8.58 GiB"},
    {"02_mla", "8.72 GiB = 9.36 GB", "nb_02", "8.72 GiB = 9.36 GB"},
    {"02_mla", "8.99 GB", "nb_02", "128,000 tokens: 8.99 GB"},
    {"02_mla", "81,920 B per layer, 4,997,120 B ≈ 5.0 MB per token, 71.1×", "nb_02", "81,920 4,997,120 5.00 71.11"},
    {"02_mla", "GQA-8 312,320 B, 4.44×", "nb_02", "5,120 312,320 0.31 4.44"},
    {"02_mla", "65,536 B per layer, 4.0 MB, 56.9×; GQA-8 249,856 B, 3.56×", "nb_02", "249,856 0.25 3.56"},
    {"02_mla", "262,144 flop per head", "nb_02", "2 Dc (Dnope + Dv) = 262,144 flop"},
    {"02_mla", "2,176 to score", "nb_02", "2 (Dc + Dr) + 2 Dc = 2,176 flop"},
    {"02_mla", "K+V: 128  absorbed latent: 32", "nb_02", "cached floats per token, naive K+V: 128 absorbed latent: 32"},
    {"02_mla", "3.55e-15 and 8.88e-16", "nb_02", "max |score diff| : 3.552713678800501e-15"},
    {"02_mla", "3.55e-15 and 8.88e-16", "nb_02", "max |output diff|: 8.881784197001252e-16"},
    {"02_mla", "3.55e-15 and 8.88e-16", "mla_cost --contexts 64 --repeats 1", "max |score diff| : 3.552713678800501e-15"},
    {"02_mla", "3.55e-15 and 8.88e-16", "mla_cost --contexts 64 --repeats 1", "max |output diff|: 8.881784197001252e-16"},
    {"03_swa", "119,872 query-key pairs (≤ 128,000)", "nb_03", "119,872 pairs <= n*W = 128,000"},
    {"03_swa", "500,500", "nb_03", "full causal attention 500,500"},
    {"03_swa", "131,040 positions", "swa_reach", "L*(W-1) = 32*4,095 = 131,040 positions"},
    {"03_swa", "32 × 4,096 = 131,072", "swa_reach", "L*W = 32*4,096 = 131,072 positions"},
    {"03_swa", "8×", "swa_reach", "8x smaller"},
    {"03_swa", "512 MiB over 32 layers", "swa_reach", "windowed 512 MiB"},
    {"03_swa", "4,096 MiB", "swa_reach", "full 4,096 MiB"},
    {"03_swa", "3,214,336 B", "kvtable", "3,214,336"},
    {"03_swa", "2,703,360 B", "kvtable", "2,703,360"},
    {"03_swa", "2,560 tokens (2,540 with W − 1 per hop)", "nb_03", "2,560 tokens (2,540 with W-1 per hop)"},
    {"03_swa", "40·127 = 5,080", "nb_03", "L*(W-1) = 5,080"},
    {"03_swa", "the measured reach is 28 = 4·7", "swa_reach", "L*(W-1) = 4*7 = 28; measured: 28;"},
    {"03_swa", "24.", "swa_reach --layers 6 --window 5", "L*(W-1) = 6*4 = 24; measured: 24;"},
    {"03_swa", "slot 1 (9 mod 4), holding positions 6 … 9", "nb_03", "after position 9: slots [ 8 9 6 7 ] holds 6..9"},
    {"04_dsa", "61 layers = 48,068 B per token", "nb_04", "61 x (656 + 132) = 48,068"},
    {"04_dsa", "from 24.99 to 12.41 nats", "dsa_cost --no-timing --contexts 2K", "0 24.994"},
    {"04_dsa", "from 24.99 to 12.41 nats", "dsa_cost --no-timing --contexts 2K", "200 12.411"},
    {"04_dsa", "below a uniform indexer's 17.30", "dsa_cost --no-timing --contexts 2K", "(24.99 against 17.30 nats)"},
    {"04_dsa", "(V3's bf16 row: 70,272, 1.46× more)", "dsa_cost --no-timing", "70,272 B/token, 1.46x"},
    {"04_dsa", "22.2% of the values, 20.1% of the bytes", "nb_04", "22.2% of the latent's values, 20.1% of its bytes"},
    {"04_dsa", "(704 per token per layer)", "nb_04", "= 704"},
    {"04_dsa", "(64·128)^−½ = 0.011049", "nb_04", "= 0.011049"},
    {"04_dsa", "2,048 of 131,072, 64×", "nb_04", "2,048 of 131,072 rows, 64.0x fewer"},
    {"04_dsa", "62.5× if 128K means 128,000", "nb_04", "2,048 of 128,000 rows, 62.5x fewer"},
    {"04_dsa", "32.3× fewer pairs while the indexer still scores all 8,590,000,128", "nb_04",
     "8,590,000,128: 32.3x fewer"},
    {"04_dsa", "about 2,178 tokens, counting bytes read from about 2,564", "dsa_cost --no-timing",
     "= 2,178 tokens in flop and at T = K/(1 - 132/656) = 2,564"},
    {"05_formats", "`3.861` and `0.0912`", "kvfmt fp4-demo", "max |latent| 3.861 relative L2 error 0.0912"},
    {"05_formats", "relative error 0.0898 to 0.0997, mean 0.0942", "nb_05", "relative error 0.0898 to 0.0997, mean 0.0942"},
    {"05_formats", "spans 16.9 binades and the real one (max 448) 17.8", "nb_05", "17.81; with IEEE-style infinities (max 240): 16.91"},
    {"05_formats", "4 + 8/32 = 4.25", "nb_05", "MXFP4: 4 + 8/32 = 4.25"},
    {"05_formats", "4 + 8/16 = 4.5", "nb_05", "NVFP4: 4 + 8/16 = 4.50"},
    {"05_formats", "448 × 6 = 2,688 against\n   the √512 = 22.627 bound, 119× headroom", "nb_05", "= 22.627; headroom 119x"},
    {"05_formats", "1.75 going to 2", "nb_05", "1.75->2"},
    {"05_formats", "E8M0 scale (1) never uses the rungs 4 and 6", "nb_05", "scale 1 rungs used: 0 0.5 1 1.5 2 3 relative"},
    {"05_formats", "under an E4M3 scale (0.5) it uses all of them", "nb_05", "scale 0.5 rungs used: 0.5 1 1.5 2 3 4 6"},
    {"05_formats", "v41-main   512 values  288 B", "kvfmt row --layout v41-main", "v41-main: 288 bytes, 512 values"},
    {"06_v4", "21 × (584 + 68)/4 + 20 × 584/128 = 3,514.25 B/token", "nb_06",
     "21 x (584 + 68)/4 + 20 x 584/128 = 3,514.25 B/token (ref/kvtable: 3,514.25)"},
    {"06_v4", "2 window-only + 21 CSA + 20 HCA, 3,514.25 B/token", "nb_06", "43 layers = 2 window-only + 21 CSA + 20 HCA"},
    {"06_v4", "20 CSA + 23 HCA, 3,364.94 B/token", "nb_06", "20 CSA + 23 HCA, no window-only layer = 3,364.94 B/token"},
    {"06_v4", "finds the same in live caches", "v4_cache --tokens 256 --chunk 256 --replay-window 4", "= 3,514.25 bytes per token formula:"},
    {"06_v4", "13.68× below V3.2", "nb_06", "V3.2 48,068 B/token / V4-Flash 3,514.25 = 13.68x"},
    {"06_v4", "7.31% of V3.2's cache\n(7.32% with its window)", "nb_06", "keeps 7.31% of V3.2's cache (7.32% with its window)"},
    {"06_v4", "57.0% of a bf16 row", "nb_06", "(1,024 B): 57.0%"},
    {"06_v4", "7 E8M0 scales (one per 64) + 1 pad", "nb_06", "+ 7 E8M0 scales (448/64) + 1 pad = 584 B"},
    {"06_v4", "43 × 128 × 584 = 3,214,336 B per sequence", "nb_06", "43 x 128 x 584 = 3,214,336 B"},
    {"06_v4", "(134,217,728 weights) by eight", "nb_06", "dense 32,768 -> 4,096 = 134,217,728 weights"},
    {"06_v4", "134,217,728 weights dense, 67,108,864 grouped", "nb_06", "= 67,108,864 (0.50 of dense)"},
    {"06_v4", "(64·128)^−½ = 0.011049", "nb_06", "HI^-1/2 * DI^-1/2 = 0.011049"},
    {"06_v4", "the scores are 8× larger at HI 64", "nb_06", "DI^-1/2 alone = 0.088388, 8x larger"},
    {"06_v4", "128 + 512 = 640 in a CSA layer and\n128 + 1,024 = 1,152", "nb_06", "CSA 128 + 512 = 640, HCA 128 + 1,024 = 1,152"},
    {"06_v4", "each entry pools 8 tokens, and one arrives every 4", "nb_06", "a CSA entry mixes 2M = 8 tokens and one arrives every M = 4"},
    {"06_v4", "7.95× the compressed main rows (3,157.25 B), 7.15×", "nb_06",
     "7.95x the compressed main rows (3,157.25), 7.15x with the index keys (3,514.25)"},
    {"06_v4", "L(W−1)+1 = 5,462", "nb_06", "n_win x L = 5,504 tokens is enough; the minimum is L(W-1)+1 = 5,462"},
    {"06_v4", "128 × 43 = 5,504 tokens", "v4_cache --tokens 256 --chunk 256 --replay-window 4", "n_win*L = 5,504 tokens; the exact minimum L*(W-1)+1 = 5,462"},
    {"06_v4", "one token fewer and the last layer's\n   oldest row differs", "v4_cache --tokens 256 --chunk 256 --replay-window 4", "L*(W-1) 129 42 of 43 1"},
    {"06_v4", "8,192 HCA entries (7,812 if 1M means 10^6)", "nb_06", "at 1M 8,192 HCA (7,812 if 1M = 10^6)"},
    {"07_v41", "2 window-only + 4 Full + 4 Reindex + 30 Reuse", "nb_07", "40 layers = 2 window-only + 4 Full + 4 Reindex + 30 Reuse"},
    {"07_v41", "2.5 entries x (288 + 68) = 890 B/token", "nb_07", "2.5 entries x (288 + 68) = 890 B/token (ref/kvtable: 890)"},
    {"07_v41", "25.3% of V4-Flash's 3,514.25", "nb_07", "against V4-Flash 3,514.25 B/token: 25.3%"},
    {"07_v41", "5.40625 entries per token", "nb_07", "V4-Flash adds 5.40625 entries per token"},
    {"07_v41", "40 x 128 x 528 = 2,703,360 B per sequence (2.58 MiB)", "nb_07", "40 x 128 x 528 = 2,703,360 B per sequence (2.58 MiB)"},
    {"07_v41", "2.5 × (584 + 68) = 1,630 B/token, 1.83× more", "nb_07", "2.5 x (584 + 68) = 1,630 B/token, 1.83x"},
    {"07_v41", "132,024,128 parameters", "nb_07", "Reindex layer: 132,024,128 parameters; x 4 Reindex layers = 528,096,512"},
    {"07_v41", "× 4 = 528,096,512; Reuse and window-only layers 126,617,408", "nb_07", "Reuse and window-only layers 126,617,408"},
    {"07_v41", "137,333,184 at M 2 and 134,711,744 at M 1", "nb_07", "Full layers 137,333,184 (M 2: W_C and W_Z) and 134,711,744 (M 1"},
    {"07_v41", "16,384 positions, 1/64 of a 1M context", "nb_07", "blocks of 8 = 16,384 positions (1/64 of 1M"},
    {"07_v41", "2.5T + 65,536 = 2,686,976 scores instead of 6,815,744", "nb_07", "= 2,686,976 scores per query (without the pool: 6,815,744)"},
    {"07_v41", "3·T/2 + T + 4·16,384 = 2.5T", "nb_07", "3 x T/2 + T + 4 x 16,384 = 2.5T + 65,536"},
    {"07_v41", "/ √(128·32) = /64", "nb_07", "indexer weights / sqrt(128 x 32) = 1/64"},
    {"07_v41", "√512 = 22.627, so no channel exceeds that, while E4M3 × E2M1 reaches 448 × 6 = 2,688, 119×", "nb_07",
     "sqrt(512) = 22.627; format range 448 x 6 = 2,688, headroom 119x"},
    {"07_v41", "latent at that bound as 22.5", "nb_07", "one-hot latent at the bound: 22.627 stored as 22.500"},
    {"07_v41", "scans all 45 entries, the Reindex layers 7 and 9 score 5", "nb_07",
     "query 44: scores evaluated per layer: 0 0 22 0 0 45 0 5 0 5"},
    {"07_v41", "30 Reuse layers; 26 comes from 40 − 2 − 4 − 8", "nb_07", "= 30 Reuse layers (40 - 2 - 4 - 8 = 26"},
    {"07_v41", "Layers 2–19 do; layers 0 and 1 are window-only", "nb_07", "compress ratios: 0 at layers 0-1, 2 at 2-19, 1 at 20-39"},
    {"07_v41", "L(W−1)+1 = 5,081", "nb_07", "n_win x L = 5,120 tokens is enough; the minimum is L(W-1)+1 = 5,081"},
    {"07_v41", "need L(W−1)+1 = 5,081", "nb_07", "the minimum is L(W-1)+1 = 5,081 for every ring's W rows and the last prompt token's output"},
    {"07_v41", "exact after L(W−1) = 5,080 replayed tokens", "nb_07", "L(W-1) = 5,080 for the W-1 rows the next token reads"},
    {"07_v41", "20 of the 40\nlayers and 2,567,290,624 of 5,126,769,664 parameters (0.501)", "replay --prompts 256 --persist-tokens 256",
     "full prefill 40 layers 5,126,769,664 parameters early exit 20 layers 2,567,290,624 parameters"},
    {"07_v41", "20 of 40 layers and 0.501 of the parameters", "replay --prompts 256 --persist-tokens 256", "0.500 of the layers, 0.501 of the parameters"},
    {"07_v41", "890 against 3,514.25 bytes of rows per token (0.253)", "replay --prompts 256 --persist-tokens 256", "Rows per token, V4.1 / V4: 0.253"},
    {"07_v41", "890 bytes of entries and keys per token against V4-Flash's 3,514.25 (0.253)", "replay --prompts 256 --persist-tokens 256",
     "V4-Flash: global KV only (Zero SWA) 899,648 12,206,080 0 5,992 13,111,720 3,514.25"},
    {"07_v41", "43 × 128 × 584 = 3,214,336 bytes per sequence, as many as V4's rows of a 915-token prompt", "replay --prompts 256 --persist-tokens 256",
     "a fixed 3,214,336 bytes per sequence, as many as V4's rows of a 915-token prompt"},
    {"07_v41", "counts 551.5B and 15.8B", "nb_07",
     "parameters (ref/params.h): backbone 551.5B, active for one decoded token 15.8B"},
    {"07_v41", "×16 over 65,536 positions, β 32/1; the ratio-0 layers keep θ\n10,000 without YaRN", "nb_07",
     "ratio-0 layers theta 10,000, no YaRN; compressing layers theta 160,000, YaRN factor 16 over 65,536 "
     "original positions, beta 32/1"},
    {"07_v41", "exact in the first layer only", "replay --prompts 256 --persist-tokens 256", "hit, bounded replay 128"},
    {"07_v41", "Bounded replay's 128 tokens are\n  40× fewer", "nb_07", "the last W = 128 tokens, 40x fewer"},
    {"08_arithmetic", "389,120 / 890 = 437.2×", "nb_08", "389,120 -> 890 bytes per token: 437.2x"},
    {"08_arithmetic", "21/4 + 20/128 = 5.40625", "kvtable", "5.40625"},
    {"08_arithmetic", "512 + 64 = 576 B a layer", "kvtable", "512 + 64 = 576 B a layer for DeepSeek-V3"},
    {"08_arithmetic", "| 3,514.25 |", "nb_08", "21 x (584 + 68)/4 + 20 x 584/128 = 3,514.25"},
    {"08_arithmetic", "give 2.5 entries, × (288 + 68) = 890", "nb_08", "2.5 entries x (288 + 68) = 890"},
    {"08_arithmetic", "7.31% of V3.2's per-token cache (7.32% with its window)", "nb_08", "7.31% of V3.2's cache per token (7.32%"},
    {"08_arithmetic", "= 3,214,336 B per sequence", "kvtable", "3,214,336"},
    {"08_arithmetic", "= 2,703,360 B", "kvtable", "2,703,360"},
    {"08_arithmetic", "1.56× from layers (95 → 61) times 3.56×", "nb_08", "DeepSeek-V3 1.56x 1.00x 3.56x 5.54x"},
    {"08_arithmetic", "1.46× (1,152 → 788 B per layer)", "nb_08", "DeepSeek-V3.2-Exp 1.00x 1.00x 1.46x 1.46x"},
    {"08_arithmetic", "13.68× = 1.49× (layers) × 7.58×", "nb_08", "DeepSeek-V4-Flash 1.49x 7.58x 1.21x 13.68x"},
    {"08_arithmetic", "3.95× = 10.25× (41 → 4 layers) ×\n  1.83×", "nb_08", "DeepSeek-V4.1-Flash 10.25x 1/4.74 1.83x 3.95x"},
    {"08_arithmetic", "2.5 × (584 + 68) = 1,630 B per token, 1.83×", "nb_08", "2.5 x (584 + 68) = 1,630 B/token, 1.83x"},
    {"08_arithmetic", "788 → 650 B mean entry", "nb_08", "650.03"},
    {"08_arithmetic", "1,152 B per layer, × 61 = 70,272", "nb_08", "1,152 B per layer x 61 layers = 70,272 B per token"},
    {"09_serving", "16 sequences", "serving", "DeepSeek LLM 67B 48,640 0 6,375,342,080"},
    {"09_serving", "7,192 of V4.1-Flash", "serving", "965,161,184 899 7,192"},
    {"09_serving", "8 × 11 = 88", "serving", "12,223,832 11 88"},
    {"09_serving", "78.5 GiB a GPU and leave 48.4 GiB", "serving --memory-gib 141",
     "DeepSeek-V3 70,272 0 9,210,691,584 738,931 738,931 5 5 78.5 48.4"},
    {"09_serving", "32 under data-parallel attention", "serving --memory-gib 141", "4,774,232 4 32 87.8 39.1"},
    {"09_serving", "828 and 6,328", "serving --memory-gib 141", "111,164,634 828 828 34.8 92.1"},
    {"09_serving", "21 × 163 = 3,423 and HCA 20 × 4.56 = 91.25", "serving",
     "window 2 x 0 = 0; CSA 21 x 163 = 3,423; HCA 20 x 4.56 = 91.25"},
    {"09_serving", "4 × 222.5 = 890", "serving", "Full 4 x 222.5 = 890; Reindex 4 x 0 = 0; Reuse 30 x 0 = 0"},
    {"09_serving", "6,328", "serving --memory-gib 141", "848,985,936 791 6,328 38.9 88"},
    {"09_serving", "| plain, 0.1 for activations | 78.5 | 47.8 | 11 | 87.8 | 38.5 | 64 |",
     "serving --gpu h200 --weights fp8 --cache mla-fp8 ref/configs/deepseek-v3.json",
     "1,461,398 1,461,398 11 11 78.5 47.8"},
    {"09_serving", "| plain, 0.1 for activations | 78.5 | 47.8 | 11 | 87.8 | 38.5 | 64 |",
     "serving --gpu h200 --weights fp8 --cache mla-fp8 ref/configs/deepseek-v3.json",
     "1,177,095 9,416,760 8 64 87.8 38.5"},
    {"09_serving", "| vLLM, peak 6 GiB | 79.3 | 41.1 | 9 | 93.9 | 26.4 | 48 |",
     "serving --engine vllm --gpu h200 --weights fp8 --cache mla-fp8 --activation-peak-gib 6 "
     "ref/configs/deepseek-v3.json",
     "1,254,976 1,254,976 9 9 79.3 41.1"},
    {"09_serving", "| vLLM, peak 6 GiB | 79.3 | 41.1 | 9 | 93.9 | 26.4 | 48 |",
     "serving --engine vllm --gpu h200 --weights fp8 --cache mla-fp8 --activation-peak-gib 6 "
     "ref/configs/deepseek-v3.json",
     "808,128 6,465,024 6 48 93.9 26.4"},
    {"09_serving", "| SGLang | 79.3 | 45.1 | 10 | 89.4 | 17.1 | 24 |",
     "serving --engine sglang --gpu h200 --weights fp8 --cache mla-fp8 ref/configs/deepseek-v3.json",
     "1,378,327 1,378,327 10 10 79.3 45.1"},
    {"09_serving", "| SGLang | 79.3 | 45.1 | 10 | 89.4 | 17.1 | 24 |",
     "serving --engine sglang --gpu h200 --weights fp8 --cache mla-fp8 ref/configs/deepseek-v3.json",
     "521,674 4,173,392 3 24 89.4 17.1"},
    {"09_serving", "0.886 becomes 0.758",
     "serving --engine sglang --gpu h200 --weights fp8 --cache mla-fp8 ref/configs/deepseek-v3.json",
     "mem_fraction_static 0.758 (reserve 34,816 MiB)"},
    {"09_serving", "16,384 MiB at tp 8",
     "serving --engine sglang --gpu h200 --weights fp8 --cache mla-fp8 ref/configs/deepseek-v3.json",
     "mem_fraction_static 0.886 (reserve 16,384 MiB)"},
    {"09_serving", "512 + 64 = 576 B a layer for V3", "kvtable", "512 + 64 = 576 B a layer for DeepSeek-V3"},
    {"09_serving", "62 × 576 = 35,712 B a token",
     "serving --engine sglang --gpu h200 --weights fp8 --cache mla-fp8 --speculative mtp --mtp-layers 1 "
     "ref/configs/deepseek-v3.json",
     "35,712 0 4,680,843,264 1,309,584 1,309,584 9 9 80.8 43.6"},
    {"09_serving", "SGLang then holds 9 sequences per node under tensor parallelism and 24 under DP attention",
     "serving --engine sglang --gpu h200 --weights fp8 --cache mla-fp8 --speculative mtp --mtp-layers 1 "
     "ref/configs/deepseek-v3.json",
     "462,533 3,700,264 3 24 91 15.4"},
};

/* s with every run of white space made one space, in place */
static char *squeeze(char *s)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        if (isspace((unsigned char)*p)) {
            if (o == s || o[-1] != ' ') *o++ = ' ';
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return s;
}

/* The squeezed output of `command`, each command run once per test. */
static const char *output_of(const char *cmdline)
{
    static struct { char command[128]; char *printed; } seen[32];
    static size_t n_seen;
    for (size_t i = 0; i < n_seen; i++)
        if (!strcmp(seen[i].command, cmdline)) return seen[i].printed;
    ck_assert(n_seen < 32);
    int rc = kvl_run(cmdline, NULL, out, OUT_CAP, err, OUT_CAP);
    ck_assert_msg(rc == 0, "%s exited %d:\n%s", cmdline, rc, err);
    snprintf(seen[n_seen].command, sizeof seen[n_seen].command, "%s", cmdline);
    seen[n_seen].printed = strdup(squeeze(out));
    ck_assert(seen[n_seen].printed != NULL);
    return seen[n_seen++].printed;
}

START_TEST(test_quoted_numbers_are_what_the_programs_print)
{
    char quoted[512];
    for (size_t i = 0; i < sizeof QUOTES / sizeof QUOTES[0]; i++) {
        char *text = squeeze(chapter_readme(QUOTES[i].chapter));
        snprintf(quoted, sizeof quoted, "%s", QUOTES[i].quoted);
        ck_assert_msg(strstr(text, squeeze(quoted)) != NULL, "chapters/%s/README.md no longer says \"%s\"",
                      QUOTES[i].chapter, QUOTES[i].quoted);
        free(text);
        snprintf(quoted, sizeof quoted, "%s", QUOTES[i].printed);
        ck_assert_msg(strstr(output_of(QUOTES[i].command), squeeze(quoted)) != NULL,
                      "chapters/%s/README.md quotes \"%s\", but `%s` no longer prints \"%s\"", QUOTES[i].chapter,
                      QUOTES[i].quoted, QUOTES[i].command, QUOTES[i].printed);
    }
}
END_TEST

/* ---- the course map --------------------------------------------------------------------------------------- */

START_TEST(test_course_map_links_every_chapter_in_order)
{
    char names[MAX_CHAPTERS][64];
    size_t n = list_chapters(names);
    char *readme = kvl_read_text(kvl_path("README.md"));
    ck_assert(readme != NULL);
    const char *map = strstr(readme, "\n## The course\n");
    ck_assert_msg(map != NULL, "README.md has no course map");
    const char *at = map;
    for (size_t i = 0; i < n; i++) {
        char link[128];
        snprintf(link, sizeof link, "](chapters/%s/README.md)", names[i]);
        const char *found = strstr(map, link);
        ck_assert_msg(found != NULL, "README.md's course map does not link chapters/%s", names[i]);
        ck_assert_msg(found > at, "README.md's course map links chapters/%s out of order", names[i]);
        at = found;
    }
    free(readme);
}
END_TEST

/* ---- width ------------------------------------------------------------------------------------ */

#define COLUMNS 100

/* Lines of the text at rel wider than COLUMNS code points, each reported on stderr; a Markdown table
 * row (its first character '|') and a line that is a C string literal (first character '"', a line
 * of what a program prints, whose own lines are what the reader sees) are not measured. */
static size_t wide_lines(const char *rel)
{
    char *text = kvl_read_text(kvl_path(rel));
    ck_assert_msg(text != NULL, "cannot read %s", rel);
    size_t n = 0, line = 1;
    for (const char *p = text; *p; line++) {
        const char *end = strchr(p, '\n'), *first = p;
        if (!end) end = p + strlen(p);
        while (first < end && *first == ' ') first++;
        size_t width = 0;
        for (const char *q = p; q < end; q++) width += ((unsigned char)*q & 0xC0) != 0x80;
        if (width > COLUMNS && *first != '|' && *first != '"') {
            fprintf(stderr, "%s:%zu: %zu columns: %.60s...\n", rel, line, width, first);
            n++;
        }
        p = *end ? end + 1 : end;
    }
    free(text);
    return n;
}

/* Every C source and Markdown text under folder rel (the rendered notebook.md files aside: their
 * code is notebooks_c/'s and their output the programs'), checked by wide_lines; *files counts them. */
static size_t wide_lines_under(const char *rel, size_t *files)
{
    DIR *d = opendir(kvl_path(rel));
    ck_assert_msg(d != NULL, "cannot list %s (set KVL_ROOT)", rel);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char child[512];
        snprintf(child, sizeof child, "%s/%s", rel, e->d_name);
        struct stat st;
        if (stat(kvl_path(child), &st) != 0) continue;
        const size_t len = strlen(e->d_name);
        const int text = len > 2 && (!strcmp(e->d_name + len - 2, ".c") || !strcmp(e->d_name + len - 2, ".h") ||
                                     (!strcmp(e->d_name + len - 3, ".md") && strcmp(e->d_name, "notebook.md")));
        if (S_ISDIR(st.st_mode)) n += wide_lines_under(child, files);
        else if (S_ISREG(st.st_mode) && text) n += wide_lines(child), (*files)++;
    }
    closedir(d);
    return n;
}

START_TEST(test_the_course_reads_in_100_columns)
{
    size_t files = 0, wide = wide_lines_under("chapters", &files) + wide_lines_under("notebooks_c", &files) +
                        wide_lines_under("labs", &files);
    ck_assert_msg(files > 50, "found only %zu course files (set KVL_ROOT)", files);
    ck_assert_msg(wide == 0, "%zu lines of the course (listed on stderr) are wider than %d columns", wide, COLUMNS);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("course_readmes");
    TCase *text = tcase_create("text");
    tcase_add_test(text, test_every_chapter_text_has_the_course_sections);
    tcase_add_test(text, test_every_figure_a_chapter_shows_exists);
    tcase_add_test(text, test_check_yourself_is_a_list_of_questions);
    tcase_add_test(text, test_course_map_links_every_chapter_in_order);
    tcase_add_test(text, test_the_course_reads_in_100_columns);
    suite_add_tcase(s, text);
    TCase *run = tcase_create("run");
    tcase_add_test(run, test_every_command_a_chapter_gives_runs);
    tcase_add_test(run, test_quoted_numbers_are_what_the_programs_print);
    suite_add_tcase(s, run);
    return s;
}
