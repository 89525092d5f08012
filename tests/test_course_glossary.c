/* chapters/GLOSSARY.md and the chapters' links into it.
 *
 * Each "## Term" heading of the glossary is one entry; its anchor is GitHub's (and the site's): the
 * heading lowercased, ASCII letters, digits and '_' kept, spaces and hyphens made '-', the rest
 * dropped. The properties:
 *   - every chapter text (chapters/NN_name/README.md) links chapters/GLOSSARY.md at least once;
 *   - every anchor of chapters/GLOSSARY.md that a chapter text links is an entry's anchor;
 *   - every entry links the chapter section that defines it, NN_name/README.md#section, and both the
 *     chapter and that section exist;
 *   - the entries are in alphabetical order, letter case aside.
 * A failing test lists every offending place on stderr, then fails once. */
#include "common.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_CHAPTERS 32
#define MAX_ENTRIES 256
#define ANCHOR_CAP 128

typedef struct {
    char anchor[ANCHOR_CAP];
    char heading[ANCHOR_CAP];
    const char *body; /* into the glossary's text, up to the next entry */
} entry;

/* GitHub's anchor of the heading text[0..len) */
static void anchor_of(char *out, const char *text, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < ANCHOR_CAP; i++) {
        const unsigned char c = (unsigned char)text[i];
        if (c < 128 && isalnum(c)) out[n++] = (char)tolower(c);
        else if (c == ' ' || c == '-') out[n++] = '-';
        else if (c == '_') out[n++] = '_';
    }
    out[n] = '\0';
}

/* The "## " headings of text (level 2 only), with their anchors; body runs to the next heading. */
static size_t headings(const char *text, entry *e, size_t cap)
{
    size_t n = 0;
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, "## ", 3) != 0) continue;
        ck_assert_msg(n < cap, "more than %zu headings", cap);
        const size_t len = strcspn(p + 3, "\n");
        anchor_of(e[n].anchor, p + 3, len);
        snprintf(e[n].heading, ANCHOR_CAP, "%.*s", (int)len, p + 3);
        e[n++].body = p + 3 + len;
    }
    return n;
}

static int has_anchor(const entry *e, size_t n, const char *anchor, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(e[i].anchor) == len && !strncmp(e[i].anchor, anchor, len)) return 1;
    return 0;
}

static char *read_rel(const char *rel)
{
    char *text = kvl_read_text(kvl_path(rel));
    ck_assert_msg(text != NULL, "cannot read %s (set KVL_ROOT)", rel);
    return text;
}

static entry glossary[MAX_ENTRIES];
static size_t n_glossary;
static char *glossary_text;

static void read_glossary(void)
{
    glossary_text = read_rel("chapters/GLOSSARY.md");
    n_glossary = headings(glossary_text, glossary, MAX_ENTRIES);
    ck_assert_msg(n_glossary >= 20, "chapters/GLOSSARY.md has only %zu entries", n_glossary);
}

static void free_glossary(void)
{
    free(glossary_text);
    glossary_text = NULL;
}

START_TEST(test_every_chapter_links_the_glossary_and_only_its_entries)
{
    static const char LINK[] = "](../GLOSSARY" ".md"; /* split: the citations test reads this file too */
    char names[MAX_CHAPTERS][64];
    const size_t n = kvl_list_chapters(names, MAX_CHAPTERS, "README.md");
    ck_assert_msg(n >= 6, "found %zu chapter texts", n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "chapters/%s/README.md", names[i]);
        char *text = read_rel(rel);
        size_t links = 0;
        for (const char *p = strstr(text, LINK); p; p = strstr(p + 1, LINK), links++) {
            const char *anchor = p + sizeof LINK - 1;
            if (*anchor != '#') continue;
            const size_t len = strcspn(++anchor, ")");
            if (!has_anchor(glossary, n_glossary, anchor, len)) {
                fprintf(stderr, "%s: links the glossary's #%.*s, which no entry has\n", rel, (int)len, anchor);
                bad++;
            }
        }
        if (links == 0) fprintf(stderr, "%s: never links chapters/GLOSSARY.md\n", rel), bad++;
        free(text);
    }
    ck_assert_msg(bad == 0, "%zu places (listed on stderr) miss the glossary", bad);
}
END_TEST

/* Whether entry e links NN_name/README.md#section of a chapter that exists and has that section. */
static int names_its_chapter(const entry *e)
{
    const char *end = strstr(e->body, "\n## ");
    for (const char *p = strstr(e->body, "]("); p && (!end || p < end); p = strstr(p + 2, "](")) {
        const char *target = p + 2, *hash = strstr(target, "/README.md#");
        if (!hash || (end && hash > end) || !isdigit((unsigned char)*target) || memchr(target, ')', (size_t)(hash - target)))
            continue;
        char rel[160];
        snprintf(rel, sizeof rel, "chapters/%.*s%s", (int)(hash - target), target, "/README" ".md");
        char *chapter = kvl_read_text(kvl_path(rel));
        if (!chapter) continue;
        entry sections[64];
        const size_t n = headings(chapter, sections, 64);
        const char *anchor = hash + strlen("/README.md#");
        const int found = has_anchor(sections, n, anchor, strcspn(anchor, ")"));
        free(chapter);
        if (found) return 1;
    }
    return 0;
}

START_TEST(test_every_entry_names_the_chapter_section_that_defines_it)
{
    size_t bad = 0;
    for (size_t i = 0; i < n_glossary; i++)
        if (!names_its_chapter(&glossary[i])) {
            fprintf(stderr, "chapters/GLOSSARY.md: \"%s\" links no existing chapter section\n", glossary[i].heading);
            bad++;
        }
    ck_assert_msg(bad == 0, "%zu entries (listed on stderr) name no chapter that exists", bad);
}
END_TEST

START_TEST(test_entries_are_in_alphabetical_order)
{
    for (size_t i = 1; i < n_glossary; i++)
        ck_assert_msg(strcasecmp(glossary[i - 1].heading, glossary[i].heading) < 0,
                      "chapters/GLOSSARY.md: \"%s\" comes before \"%s\"", glossary[i - 1].heading, glossary[i].heading);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("course_glossary");
    TCase *t = tcase_create("glossary");
    tcase_add_checked_fixture(t, read_glossary, free_glossary);
    tcase_add_test(t, test_every_chapter_links_the_glossary_and_only_its_entries);
    tcase_add_test(t, test_every_entry_names_the_chapter_section_that_defines_it);
    tcase_add_test(t, test_entries_are_in_alphabetical_order);
    suite_add_tcase(s, t);
    return s;
}
