/* Chapter 7's grader: make lab-07 (your files) or make lab-07 SOLUTION=1 (the worked solutions).
 * layer_sources is checked against the layer map ref/core/config.h's loader builds from the same
 * lists (V4.1-Flash's config, and copies of it with the lists replaced), replay_start against
 * ref/v41_ced.h's v41_ced_exact_replay_start and v41_ced_bounded_replay_start. Every answer is an
 * integer: exact. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "file_io.h"
#include "grade.h"
#include "lab.h"
#include "status.h"
#include "v41_ced.h"

#define V41_CONFIG "ref/configs/deepseek-v4.1-flash.json"
#define MAX_LAYERS 64

/* ---- layer_sources
 * -------------------------------------------------------------------------------- */

typedef struct {
    const char *what;
    size_t L; /* 0: V4.1-Flash's own config, as committed */
    size_t ratio[MAX_LAYERS];
    size_t kv[8], n_kv, ix[8], n_ix;
} map_case;

static const map_case map_cases[] = {
    {"V4.1-Flash's config", 0, {0}, {0}, 0, {0}, 0},
    {"the chapter's toy", 10, {0, 0, 2, 2, 2, 1, 1, 1, 1, 1}, {2, 5}, 2, {2, 5, 7, 9}, 4},
    {"a window-only layer amid compressing ones",
     12,
     {0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1},
     {1, 5, 9},
     3,
     {1, 3, 5, 9, 10},
     5},
    {"index sources between KV sources",
     8,
     {1, 1, 1, 1, 1, 1, 1, 1},
     {0, 6},
     2,
     {0, 2, 3, 6, 7},
     5},
    {"one layer", 1, {4}, {0}, 1, {0}, 1},
    {"refused: a KV source that is not an index source",
     6,
     {0, 2, 2, 2, 2, 2},
     {1, 3},
     2,
     {1, 2},
     2},
    {"refused: a window-only layer listed as a source", 6, {0, 2, 2, 0, 2, 2}, {1}, 1, {1, 3}, 2},
    {"refused: a compressing layer before every KV source",
     6,
     {0, 2, 2, 2, 2, 2},
     {3},
     1,
     {2, 3},
     2},
    {"refused: a layer at another ratio than its KV source", 6, {1, 1, 2, 2, 1, 1}, {0}, 1, {0}, 1},
};

static cJSON *size_array(const size_t *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

static void replace(cJSON *root, const char *key, cJSON *value)
{
    if (!value || !cJSON_ReplaceItemInObject(root, key, value)) abort();
}

/* The committed config's text, or a copy with the case's layers and lists (the candidate source,
 * which must be a KV source, moved to the last one): the loader's verdict, and its map in *m when
 * it reads it. */
static int load_case(kvl_model *m, const char *config_text, const map_case *k)
{
    if (k->L == 0) return kvl_model_parse(m, config_text, strlen(config_text), V41_CONFIG);
    cJSON *root = cJSON_Parse(config_text);
    if (!root) abort();
    replace(root, "n_layers", cJSON_CreateNumber((double)k->L));
    replace(root, "compress_ratios", size_array(k->ratio, k->L));
    replace(root, "kv_source_layers", size_array(k->kv, k->n_kv));
    replace(root, "index_source_layers", size_array(k->ix, k->n_ix));
    replace(root, "candidate_source_layer", cJSON_CreateNumber((double)k->kv[k->n_kv - 1]));
    char *text = cJSON_PrintUnformatted(root);
    if (!text) abort();
    const int rc = kvl_model_parse(m, text, strlen(text), k->what);
    cJSON_free(text);
    cJSON_Delete(root);
    return rc;
}

/* The case's lists as the student's function takes them, read from the committed config for case
 * 0. */
static void case_lists(map_case *k, const char *config_text)
{
    if (k->L) return;
    cJSON *root = cJSON_Parse(config_text);
    if (!root) abort();
    k->L = (size_t)cJSON_GetObjectItem(root, "n_layers")->valuedouble;
    const char *names[] = {"compress_ratios", "kv_source_layers", "index_source_layers"};
    size_t *into[] = {k->ratio, k->kv, k->ix}, *count[] = {NULL, &k->n_kv, &k->n_ix};
    const size_t cap[] = {MAX_LAYERS, 8, 8};
    for (size_t f = 0; f < 3; f++) {
        size_t n = 0;
        for (const cJSON *e = cJSON_GetObjectItem(root, names[f])->child; e && n < cap[f];
             e = e->next)
            into[f][n++] = (size_t)e->valuedouble;
        if (count[f]) *count[f] = n;
    }
    cJSON_Delete(root);
}

/* v[L][4] = {kind, compress_ratio, kv_source, index_source} of each layer */
static void map_fields(int64_t *v, const kvl_layer *map, size_t L)
{
    for (size_t l = 0; l < L; l++) {
        v[4 * l] = map[l].kind;
        v[4 * l + 1] = (int64_t)map[l].compress_ratio;
        v[4 * l + 2] = map[l].kv_source;
        v[4 * l + 3] = map[l].index_source;
    }
}

static int grade_layer_sources(void)
{
    lab_grade g;
    grade_begin(
        &g, "layer_sources",
        "ratio 0: window; else Full (in kv), Reindex (in ix only) or Reuse, kv_source = the latest "
        "kv "
        "layer ≤ l, index_source = the latest ix layer ≤ l; map[l][0..3] = kind, ratio, kv_source, "
        "index_source (chapter 7, \"What it computes\")");
    char *config_text, path[4096];
    size_t size;
    snprintf(path, sizeof path, "%s/" V41_CONFIG, getenv("KVL_ROOT") ? getenv("KVL_ROOT") : ".");
    grade_require(kvl_file_read_all(&config_text, &size, path, 1 << 20));
    for (size_t n = 0; n < sizeof map_cases / sizeof map_cases[0] && !g.wrong; n++) {
        map_case k = map_cases[n];
        kvl_model m;
        const int refused = load_case(&m, config_text, &k) != KVL_OK;
        case_lists(&k, config_text);
        kvl_layer got[MAX_LAYERS];
        int64_t got_v[4 * MAX_LAYERS], want_v[4 * MAX_LAYERS];
        grade_case(&g, "%s: %zu layers", k.what, k.L);
        const int rc = layer_sources(got, k.ratio, k.L, k.kv, k.n_kv, k.ix, k.n_ix);
        grade_value(&g, "refused (the return value is −1)", rc == -1, refused);
        if (!refused) {
            map_fields(got_v, got, k.L);
            map_fields(want_v, m.layers, k.L);
            grade_i64(&g, &(grade_shape){"map", {k.L, 4}, 2}, got_v, want_v);
            kvl_model_free(&m);
        }
    }
    free(config_text);
    return grade_end(&g);
}

/* ---- replay_start
 * --------------------------------------------------------------------------------- */

typedef struct {
    size_t n_layers, W;
} replay_case;

/* V4.1-Flash's 40 layers and its 20 encoder layers at W 128, the toy's 10 at W 8, one layer, W =
 * 1 */
static const replay_case replay_cases[] = {{40, 128}, {20, 128}, {10, 8},
                                           {1, 2},    {1, 128},  {40, 1}};

static int grade_replay_start(void)
{
    lab_grade g;
    grade_begin(
        &g, "replay_start",
        "exact: s = P − n_layers·(W − 1), bounded: s = P − W, 0 where that is negative (chapter 7, "
        "\"What it computes\"; ref/v41_ced.h)");
    for (size_t n = 0; n < sizeof replay_cases / sizeof replay_cases[0] && !g.wrong; n++) {
        const size_t L = replay_cases[n].n_layers, W = replay_cases[n].W, Pn = L * (W - 1) + W + 3;
        int64_t *got = grade_alloc(2 * Pn * sizeof *got),
                *want = grade_alloc(2 * Pn * sizeof *want);
        for (size_t P = 0; P < Pn; P++) {
            got[2 * P] = (int64_t)replay_start(P, L, W, 0);
            got[2 * P + 1] = (int64_t)replay_start(P, L, W, 1);
            want[2 * P] = (int64_t)v41_ced_exact_replay_start(P, L, W);
            want[2 * P + 1] = (int64_t)v41_ced_bounded_replay_start(P, W);
        }
        grade_case(&g, "%zu layers, W = %zu, every P from 0 to %zu; s[P][0] exact, s[P][1] bounded",
                   L, W, Pn - 1);
        grade_i64(&g, &(grade_shape){"s", {Pn, 2}, 2}, got, want);
        free(got);
        free(want);
    }
    return grade_end(&g);
}

int main(void)
{
    static const grade_fn labs[] = {grade_layer_sources, grade_replay_start};
    return grade_main(labs, sizeof labs / sizeof labs[0]);
}
