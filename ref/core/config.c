#include "config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

/* Largest width, head count or rank accepted: anything above is a typo, and sizes derived from it
 * (products of a few of them) must not overflow size_t. */
#define MAX_DIM ((size_t)1 << 24)
#define MAX_LAYERS 4096

typedef struct {
    const char *origin;   /* file name for messages */
    const cJSON *root;
} reader;

/* ---- field access ------------------------------------------------------------------------------ */

/* Levenshtein distance, capped: used only to suggest the field a typo meant. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static const cJSON *find(const cJSON *obj, const char *name)
{
    return name ? cJSON_GetObjectItemCaseSensitive(obj, name) : NULL;
}

/* The item under either spelling (Hugging Face first, then DeepSeek inference); *used names it. */
static const cJSON *find2(const cJSON *obj, const char *hf, const char *ds, const char **used)
{
    const cJSON *it = find(obj, hf);
    *used = hf;
    if (!it && ds) { it = find(obj, ds); *used = ds; }
    return it;
}

/* A key or a string from the file, for messages: at most 48 bytes of it, a quote or a control byte
 * as \xNN, so that the message stays one line. */
static const char *file_text(const char *s)
{
    static _Thread_local char buf[4 * 48 + 4];
    size_t o = 0, i = 0;
    for (; s[i] && i < 48; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f || c == '"') o += (size_t)snprintf(buf + o, sizeof buf - o, "\\x%02x", c);
        else buf[o++] = (char)c;
    }
    snprintf(buf + o, sizeof buf - o, "%s", s[i] ? "..." : "");
    return buf;
}

static int missing(const reader *r, const cJSON *obj, const char *hf, const char *ds)
{
    const cJSON *best = NULL;
    size_t best_d = 3;
    for (const cJSON *c = obj->child; c; c = c->next) {
        size_t dh = edit_distance(c->string, hf), dd = ds ? edit_distance(c->string, ds) : 99;
        size_t dmin = dh < dd ? dh : dd;
        if (dmin > 0 && dmin < best_d) { best = c; best_d = dmin; }
    }
    char alt[96] = "";
    if (ds) snprintf(alt, sizeof alt, " (or \"%s\")", ds);
    if (best)
        return kvl_fail(KVL_EINVAL, "%s: missing field \"%s\"%s; found \"%s\": is it misspelled?", r->origin,
                        hf, alt, file_text(best->string));
    return kvl_fail(KVL_EINVAL, "%s: missing field \"%s\"%s", r->origin, hf, alt);
}

/* The JSON text of an item, shortened, for messages. */
static const char *shown(const cJSON *it)
{
    static _Thread_local char buf[64];
    if (cJSON_IsNumber(it) && !isfinite(it->valuedouble)) {   /* cJSON prints these as null */
        snprintf(buf, sizeof buf, "%s (beyond double range)", it->valuedouble > 0 ? "inf" : "-inf");
        return buf;
    }
    char *s = cJSON_PrintUnformatted(it);
    snprintf(buf, sizeof buf, "%s", s ? s : "?");
    if (s && strlen(s) >= sizeof buf) strcpy(buf + sizeof buf - 4, "...");
    free(s);
    return buf;
}

/* An integer field in [lo, hi]. Absent: *out = dflt when optional, else an error. JSON null reads
 * as 0 where null_is_zero (q_lora_rank of V2-Lite). */
typedef struct { const char *hf, *ds; size_t lo, hi; int optional; size_t dflt; int null_is_zero; } size_field;

static int read_size(const reader *r, const cJSON *obj, size_field f, size_t *out)
{
    const char *name;
    const cJSON *it = find2(obj, f.hf, f.ds, &name);
    if (!it) {
        if (f.optional) { *out = f.dflt; return KVL_OK; }
        return missing(r, obj, f.hf, f.ds);
    }
    if (cJSON_IsNull(it) && f.null_is_zero) { *out = 0; return KVL_OK; }
    if (!cJSON_IsNumber(it))
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be an integer, got %s", r->origin, name, shown(it));
    double v = it->valuedouble;
    if (!(v == floor(v)) || v < (double)f.lo || v > (double)f.hi)
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be an integer in [%zu, %zu], got %s", r->origin, name,
                        f.lo, f.hi, shown(it));
    *out = (size_t)v;
    return KVL_OK;
}

typedef struct { const char *hf, *ds; double lo, hi; int optional; double dflt; } real_field;

static int read_real(const reader *r, const cJSON *obj, real_field f, double *out)
{
    const char *name;
    const cJSON *it = find2(obj, f.hf, f.ds, &name);
    if (!it) {
        if (f.optional) { *out = f.dflt; return KVL_OK; }
        return missing(r, obj, f.hf, f.ds);
    }
    if (!cJSON_IsNumber(it))
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be a number, got %s", r->origin, name, shown(it));
    double v = it->valuedouble;
    if (!(v >= f.lo && v <= f.hi))
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be in [%g, %g], got %s", r->origin, name, f.lo, f.hi,
                        shown(it));
    *out = v;
    return KVL_OK;
}

static int read_text(const reader *r, const cJSON *obj, const char *name, char *out, size_t cap)
{
    const cJSON *it = find(obj, name);
    if (!it) return KVL_OK;
    if (!cJSON_IsString(it) || strlen(it->valuestring) >= cap)
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be a string of fewer than %zu characters, got %s",
                        r->origin, name, cap, shown(it));
    snprintf(out, cap, "%s", it->valuestring);
    return KVL_OK;
}

/* A list of integers, each in [0, hi); `strict` also requires it to be ascending without repeats.
 * Returns the count in *n and the values in a new array *out. */
static int read_list(const reader *r, const cJSON *obj, const char *name, size_t hi, int strict, size_t **out,
                     size_t *n)
{
    const cJSON *it = find(obj, name);
    if (!it) return missing(r, obj, name, NULL);
    if (!cJSON_IsArray(it))
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be a list of integers, got %s", r->origin, name, shown(it));
    size_t count = (size_t)cJSON_GetArraySize(it), i = 0;
    size_t *v = malloc((count ? count : 1) * sizeof *v);
    if (!v) return kvl_fail(KVL_ENOMEM, "%s: out of memory reading \"%s\"", r->origin, name);
    for (const cJSON *e = it->child; e; e = e->next, i++) {
        double x = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!cJSON_IsNumber(e) || x != floor(x) || x < 0 || x >= (double)hi) {
            free(v);
            return kvl_fail(KVL_EINVAL, "%s: field \"%s\" entry %zu must be an integer in [0, %zu), got %s", r->origin,
                            name, i, hi, shown(e));
        }
        v[i] = (size_t)x;
        if (strict && i > 0 && v[i] <= v[i - 1]) {
            size_t now = v[i], before = v[i - 1];
            free(v);
            return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be ascending without repeats, got %zu after %zu",
                            r->origin, name, now, before);
        }
    }
    *out = v;
    *n = count;
    return KVL_OK;
}

/* qsort order of object members: by key */
static int by_key(const void *a, const void *b)
{
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* A key the object obj[n] holds twice, or NULL. Sorted, so a large object costs n log n. */
static const char *repeated_key(const reader *r, const cJSON *obj, size_t n, int *rc)
{
    const cJSON **keys = malloc(n * sizeof *keys);
    if (!keys) {
        *rc = kvl_fail(KVL_ENOMEM, "%s: out of memory checking for repeated fields", r->origin);
        return NULL;
    }
    size_t i = 0;
    for (const cJSON *c = obj->child; c; c = c->next) keys[i++] = c;
    qsort(keys, n, sizeof *keys, by_key);
    const char *dup = NULL;
    for (i = 1; i < n && !dup; i++)
        if (strcmp(keys[i - 1]->string, keys[i]->string) == 0) dup = keys[i]->string;
    free(keys);
    return dup;
}

/* No object anywhere under `it` (at `path`, "" for the top level) holds a key twice: cJSON would
 * silently read the first, whichever one the author meant. */
static int no_duplicates(const reader *r, const cJSON *it, const char *path)
{
    size_t n = 0;
    for (const cJSON *c = it->child; c; c = c->next) n++;
    if (cJSON_IsObject(it) && n > 1) {
        int rc = KVL_OK;
        const char *dup = repeated_key(r, it, n, &rc);
        if (rc != KVL_OK) return rc;
        if (dup)
            return kvl_fail(KVL_EINVAL, "%s: field \"%s%s%s\" appears twice", r->origin, path, *path ? "." : "",
                            file_text(dup));
    }
    size_t i = 0;
    for (const cJSON *c = it->child; c; c = c->next, i++) {
        if (!c->child) continue;
        char inner[256];
        if (cJSON_IsObject(it)) snprintf(inner, sizeof inner, "%s%s%s", path, *path ? "." : "", file_text(c->string));
        else snprintf(inner, sizeof inner, "%s[%zu]", path, i);
        KVL_TRY(no_duplicates(r, c, inner));
    }
    return KVL_OK;
}

/* ---- the parts of a model ---------------------------------------------------------------------- */

static kvl_generation recognise(const cJSON *root)
{
    if (find(root, "kv_source_layers")) return KVL_GEN_V41;
    if (find(root, "compress_ratios")) return KVL_GEN_V4;
    if (find(root, "index_topk")) return KVL_GEN_DSA;
    if (find(root, "kv_lora_rank")) return KVL_GEN_MLA;
    return KVL_GEN_MHA;
}

/* YaRN settings: the Hugging Face "rope_scaling" object, or DeepSeek's flat fields. */
static int read_rope(const reader *r, double theta, kvl_rope_config *rope)
{
    const cJSON *scaling = find(r->root, "rope_scaling");
    if (scaling && cJSON_IsNull(scaling)) scaling = NULL;
    if (scaling && !cJSON_IsObject(scaling))
        return kvl_fail(KVL_EINVAL, "%s: field \"rope_scaling\" must be an object or null, got %s", r->origin,
                        shown(scaling));
    const cJSON *src = scaling ? scaling : r->root;
    rope->theta = theta;
    KVL_TRY(read_real(r, src, (real_field){.hf = "factor", .ds = scaling ? NULL : "rope_factor", .lo = 1, .hi = 1e6, .optional = 1, .dflt = 1}, &rope->factor));
    int yarn = rope->factor > 1;
    KVL_TRY(read_real(r, src, (real_field){.hf = "original_max_position_embeddings", .ds = scaling ? NULL : "original_seq_len", .lo = 1, .hi = 1e9, .optional = !yarn, .dflt = 4096}, &rope->original_len));
    KVL_TRY(read_real(r, src, (real_field){.hf = "beta_fast", .ds = NULL, .lo = 1e-6, .hi = 1e6, .optional = !yarn, .dflt = 32}, &rope->beta_fast));
    KVL_TRY(read_real(r, src, (real_field){.hf = "beta_slow", .ds = NULL, .lo = 1e-6, .hi = 1e6, .optional = !yarn, .dflt = 1}, &rope->beta_slow));
    KVL_TRY(read_real(r, src, (real_field){.hf = scaling ? "mscale_all_dim" : "mscale", .ds = NULL, .lo = 0, .hi = 1e3, .optional = 1, .dflt = 1}, &rope->mscale));
    if (yarn && !(rope->beta_fast > rope->beta_slow))
        return kvl_fail(KVL_EINVAL, "%s: field \"beta_fast\" (%g) must exceed \"beta_slow\" (%g)", r->origin,
                        rope->beta_fast, rope->beta_slow);
    return KVL_OK;
}

static int read_dims(const reader *r, kvl_model *m)
{
    const cJSON *o = r->root;
    const size_t D = MAX_DIM;
    KVL_TRY(read_size(r, o, (size_field){.hf = "hidden_size", .ds = "dim", .lo = 1, .hi = D}, &m->d));
    KVL_TRY(read_size(r, o, (size_field){.hf = "num_hidden_layers", .ds = "n_layers", .lo = 1, .hi = MAX_LAYERS}, &m->n_layers));
    KVL_TRY(read_size(r, o, (size_field){.hf = "num_attention_heads", .ds = "n_heads", .lo = 1, .hi = D}, &m->n_heads));
    KVL_TRY(read_size(r, o,
                      (size_field){.hf = "num_key_value_heads", .ds = "n_kv_heads", .lo = 1, .hi = D, .optional = 1,
                                   .dflt = m->generation >= KVL_GEN_V4 ? 1 : m->n_heads},
                      &m->n_kv_heads));
    KVL_TRY(read_real(r, o, (real_field){.hf = "rms_norm_eps", .ds = "norm_eps", .lo = 0, .hi = 1, .optional = 1, .dflt = 1e-6}, &m->norm_eps));
    if (m->norm_eps == 0)   /* RMSNorm of an all-zero row would be 0/0 */
        return kvl_fail(KVL_EINVAL, "%s: field \"rms_norm_eps\" (or \"norm_eps\") must be positive, got 0", r->origin);
    double theta;
    KVL_TRY(read_real(r, o, (real_field){.hf = "rope_theta", .ds = NULL, .lo = 1, .hi = 1e12, .optional = 1, .dflt = 10000}, &theta));

    switch (m->generation) {
    case KVL_GEN_MHA:
        if (m->d % m->n_heads)
            return kvl_fail(KVL_EINVAL, "%s: field \"num_attention_heads\" (%zu) does not divide \"hidden_size\" (%zu)",
                            r->origin, m->n_heads, m->d);
        KVL_TRY(read_size(r, o, (size_field){.hf = "head_dim", .ds = NULL, .lo = 2, .hi = D, .optional = 1, .dflt = m->d / m->n_heads}, &m->head_dim));
        m->qk_rope_head_dim = m->head_dim;
        m->v_head_dim = m->head_dim;
        KVL_TRY(read_size(r, o, (size_field){.hf = "sliding_window", .ds = "window_size", .lo = 0, .hi = D, .optional = 1, .dflt = 0, .null_is_zero = 1}, &m->window));
        KVL_TRY(read_rope(r, theta, &m->rope));
        break;
    case KVL_GEN_DSA:
        KVL_TRY(read_size(r, o, (size_field){.hf = "index_n_heads", .ds = NULL, .lo = 1, .hi = D}, &m->index_n_heads));
        KVL_TRY(read_size(r, o, (size_field){.hf = "index_head_dim", .ds = NULL, .lo = 2, .hi = D},
                          &m->index_head_dim));
        KVL_TRY(read_size(r, o, (size_field){.hf = "index_topk", .ds = NULL, .lo = 1, .hi = D}, &m->index_topk));
        __attribute__((fallthrough));  /* DSA is MLA plus an indexer */
    case KVL_GEN_MLA:
        KVL_TRY(read_size(r, o, (size_field){.hf = "q_lora_rank", .ds = NULL, .lo = 0, .hi = D, .optional = 1, .dflt = 0, .null_is_zero = 1}, &m->q_lora_rank));
        KVL_TRY(read_size(r, o, (size_field){.hf = "kv_lora_rank", .ds = NULL, .lo = 1, .hi = D}, &m->kv_lora_rank));
        KVL_TRY(read_size(r, o, (size_field){.hf = "qk_nope_head_dim", .ds = NULL, .lo = 1, .hi = D}, &m->qk_nope_head_dim));
        KVL_TRY(read_size(r, o, (size_field){.hf = "qk_rope_head_dim", .ds = "rope_head_dim", .lo = 2, .hi = D}, &m->qk_rope_head_dim));
        KVL_TRY(read_size(r, o, (size_field){.hf = "v_head_dim", .ds = NULL, .lo = 1, .hi = D}, &m->v_head_dim));
        m->head_dim = m->qk_nope_head_dim + m->qk_rope_head_dim;
        KVL_TRY(read_rope(r, theta, &m->rope));
        break;
    case KVL_GEN_V4:
    case KVL_GEN_V41:
        KVL_TRY(read_size(r, o, (size_field){.hf = "head_dim", .ds = NULL, .lo = 2, .hi = D}, &m->head_dim));
        KVL_TRY(read_size(r, o, (size_field){.hf = "qk_rope_head_dim", .ds = "rope_head_dim", .lo = 2, .hi = D}, &m->qk_rope_head_dim));
        KVL_TRY(read_size(r, o, (size_field){.hf = "q_lora_rank", .ds = NULL, .lo = 1, .hi = D}, &m->q_lora_rank));
        KVL_TRY(read_size(r, o, (size_field){.hf = "o_groups", .ds = NULL, .lo = 1, .hi = D}, &m->o_groups));
        KVL_TRY(read_size(r, o, (size_field){.hf = "o_lora_rank", .ds = NULL, .lo = 1, .hi = D}, &m->o_lora_rank));
        KVL_TRY(read_size(r, o, (size_field){.hf = "sliding_window", .ds = "window_size", .lo = 1, .hi = D},
                          &m->window));
        KVL_TRY(read_size(r, o, (size_field){.hf = "index_n_heads", .ds = NULL, .lo = 1, .hi = D}, &m->index_n_heads));
        KVL_TRY(read_size(r, o, (size_field){.hf = "index_head_dim", .ds = NULL, .lo = 2, .hi = D},
                          &m->index_head_dim));
        KVL_TRY(read_size(r, o, (size_field){.hf = "index_topk", .ds = NULL, .lo = 1, .hi = D}, &m->index_topk));
        m->v_head_dim = m->head_dim;
        if (m->n_kv_heads != 1)
            return kvl_fail(KVL_EINVAL, "%s: field \"num_key_value_heads\" must be 1 (one shared key-value entry), got %zu",
                            r->origin, m->n_kv_heads);
        if (m->n_heads % m->o_groups)
            return kvl_fail(KVL_EINVAL, "%s: field \"o_groups\" (%zu) does not divide the %zu heads", r->origin,
                            m->o_groups, m->n_heads);
        double ctheta;
        KVL_TRY(read_real(r, o, (real_field){.hf = "compress_rope_theta", .ds = NULL, .lo = 1, .hi = 1e12}, &ctheta));
        KVL_TRY(read_rope(r, ctheta, &m->compress_rope));
        m->rope = (kvl_rope_config){.theta = theta, .factor = 1, .original_len = m->compress_rope.original_len,
                                    .beta_fast = m->compress_rope.beta_fast, .beta_slow = m->compress_rope.beta_slow,
                                    .mscale = 1};
        break;
    }
    if (m->n_heads % m->n_kv_heads)
        return kvl_fail(KVL_EINVAL, "%s: field \"num_key_value_heads\" (%zu) does not divide the %zu query heads",
                        r->origin, m->n_kv_heads, m->n_heads);
    if (m->qk_rope_head_dim % 2)
        return kvl_fail(KVL_EINVAL, "%s: field \"qk_rope_head_dim\" must be even (rotation pairs), got %zu", r->origin,
                        m->qk_rope_head_dim);
    if (m->qk_rope_head_dim > m->head_dim)
        return kvl_fail(KVL_EINVAL, "%s: field \"qk_rope_head_dim\" (%zu) exceeds the head dim (%zu)", r->origin,
                        m->qk_rope_head_dim, m->head_dim);
    if (m->index_n_heads && m->index_head_dim < m->qk_rope_head_dim)
        return kvl_fail(KVL_EINVAL, "%s: field \"index_head_dim\" (%zu) is narrower than the rotary part (%zu)",
                        r->origin, m->index_head_dim, m->qk_rope_head_dim);
    return KVL_OK;
}

/* compress_ratios covers the backbone, optionally followed by one entry per MTP/DSpark layer. */
static int read_ratios(const reader *r, const kvl_model *m, size_t **ratios)
{
    size_t n_extra, n;
    KVL_TRY(read_size(r, r->root, (size_field){.hf = "num_nextn_predict_layers", .ds = "n_mtp_layers", .lo = 0, .hi = MAX_LAYERS, .optional = 1, .dflt = 0},
                      &n_extra));
    KVL_TRY(read_list(r, r->root, "compress_ratios", MAX_DIM, 0, ratios, &n));
    if (n != m->n_layers && n != m->n_layers + n_extra) {
        free(*ratios);
        *ratios = NULL;
        return kvl_fail(KVL_EINVAL, "%s: field \"compress_ratios\" has %zu entries; expected %zu (one per layer)%s", r->origin,
                        n, m->n_layers, n_extra ? " or that plus one per MTP layer" : "");
    }
    return KVL_OK;
}

static int layers_v4(const reader *r, kvl_model *m)
{
    size_t *ratio;
    KVL_TRY(read_ratios(r, m, &ratio));
    for (size_t i = 0; i < m->n_layers; i++) {
        kvl_layer *l = &m->layers[i];
        /* Ratio 4 overlaps blocks and carries an indexer (CSA); any other positive ratio pools whole
         * blocks and reads every entry (HCA), as the reference code decides from the ratio alone. */
        if (ratio[i] == 0) *l = (kvl_layer){KVL_LAYER_WINDOW, 0, -1, -1};
        else if (ratio[i] == 4) *l = (kvl_layer){KVL_LAYER_CSA, 4, (int)i, (int)i};
        else *l = (kvl_layer){KVL_LAYER_HCA, ratio[i], (int)i, -1};
    }
    free(ratio);
    return KVL_OK;
}

static int is_in(const size_t *v, size_t n, size_t x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x) return 1;
    return 0;
}

static int assign_v41(const reader *r, kvl_model *m, const size_t *ratio, const size_t *kv, size_t n_kv,
                      const size_t *ix, size_t n_ix)
{
    int latest_kv = -1, latest_ix = -1;
    for (size_t i = 0; i < m->n_layers; i++) {
        kvl_layer *l = &m->layers[i];
        int own_kv = is_in(kv, n_kv, i), own_ix = is_in(ix, n_ix, i);
        if (own_kv && !own_ix)
            return kvl_fail(KVL_EINVAL, "%s: field \"kv_source_layers\" lists layer %zu, absent from \"index_source_layers\"",
                            r->origin, i);
        if (ratio[i] == 0) {
            if (own_kv || own_ix)
                return kvl_fail(KVL_EINVAL, "%s: layer %zu is listed as a source but its compress_ratios entry is 0",
                                r->origin, i);
            *l = (kvl_layer){KVL_LAYER_WINDOW, 0, -1, -1};
            continue;
        }
        if (own_kv) latest_kv = (int)i;
        if (own_ix) latest_ix = (int)i;
        if (latest_kv < 0)
            return kvl_fail(KVL_EINVAL, "%s: layer %zu compresses (ratio %zu) but no KV source layer precedes it in "
                            "\"kv_source_layers\"", r->origin, i, ratio[i]);
        if (ratio[i] != ratio[latest_kv])
            return kvl_fail(KVL_EINVAL, "%s: layer %zu has ratio %zu but reads KV source %d of ratio %zu", r->origin, i,
                            ratio[i], latest_kv, ratio[latest_kv]);
        kvl_layer_kind kind = own_kv ? KVL_LAYER_FULL : own_ix ? KVL_LAYER_REINDEX : KVL_LAYER_REUSE;
        *l = (kvl_layer){kind, ratio[i], latest_kv, latest_ix};
    }
    return KVL_OK;
}

static int layers_v41(const reader *r, kvl_model *m)
{
    size_t *ratio = NULL, *kv = NULL, *ix = NULL, n_kv = 0, n_ix = 0;
    const size_t L = m->n_layers;
    int rc = read_ratios(r, m, &ratio);
    if (rc == KVL_OK) rc = read_list(r, r->root, "kv_source_layers", L, 1, &kv, &n_kv);
    if (rc == KVL_OK) rc = read_list(r, r->root, "index_source_layers", L, 1, &ix, &n_ix);
    if (rc == KVL_OK) rc = read_size(r, r->root, (size_field){.hf = "candidate_source_layer", .ds = NULL, .lo = 0, .hi = L - 1},
                                     &m->candidate_source_layer);
    if (rc == KVL_OK) rc = read_size(r, r->root, (size_field){.hf = "candidate_topk_blocks", .ds = NULL, .lo = 1, .hi = MAX_DIM},
                                     &m->candidate_topk_blocks);
    if (rc == KVL_OK) rc = read_size(r, r->root, (size_field){.hf = "candidate_block_size", .ds = NULL, .lo = 1, .hi = MAX_DIM},
                                     &m->candidate_block_size);
    if (rc == KVL_OK && !is_in(kv, n_kv, m->candidate_source_layer))
        rc = kvl_fail(KVL_EINVAL, "%s: field \"candidate_source_layer\" (%zu) is not one of \"kv_source_layers\"",
                      r->origin, m->candidate_source_layer);
    if (rc == KVL_OK) rc = assign_v41(r, m, ratio, kv, n_kv, ix, n_ix);
    free(ratio);
    free(kv);
    free(ix);
    return rc;
}

static int build_layers(const reader *r, kvl_model *m)
{
    m->layers = calloc(m->n_layers, sizeof *m->layers);
    if (!m->layers) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu layers", r->origin, m->n_layers);
    switch (m->generation) {
    case KVL_GEN_MHA:
    case KVL_GEN_MLA:
        for (size_t i = 0; i < m->n_layers; i++) m->layers[i] = (kvl_layer){KVL_LAYER_DENSE, 1, (int)i, -1};
        return KVL_OK;
    case KVL_GEN_DSA:
        for (size_t i = 0; i < m->n_layers; i++) m->layers[i] = (kvl_layer){KVL_LAYER_SPARSE, 1, (int)i, (int)i};
        return KVL_OK;
    case KVL_GEN_V4: return layers_v4(r, m);
    case KVL_GEN_V41: return layers_v41(r, m);
    }
    return KVL_OK;
}

static const char *const cache_names[] = {"bf16", "v32-fp8", "v4-fp8", "v41-fp4"};

static int read_annotations(const reader *r, kvl_model *m)
{
    static const kvl_cache_layout by_generation[] = {KVL_CACHE_BF16, KVL_CACHE_BF16, KVL_CACHE_V32_FP8,
                                                     KVL_CACHE_V4_FP8, KVL_CACHE_V41_FP4};
    m->kv_cache = by_generation[m->generation];
    const char *base = strrchr(r->origin, '/');
    snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : r->origin);
    char *dot = strrchr(m->name, '.');
    if (dot && strcmp(dot, ".json") == 0) *dot = '\0';

    const cJSON *a = find(r->root, "_kvlineage");
    if (!a) return KVL_OK;
    if (!cJSON_IsObject(a))
        return kvl_fail(KVL_EINVAL, "%s: field \"_kvlineage\" must be an object, got %s", r->origin, shown(a));
    KVL_TRY(read_text(r, a, "name", m->name, sizeof m->name));
    KVL_TRY(read_text(r, a, "date", m->date, sizeof m->date));
    KVL_TRY(read_text(r, a, "mechanism", m->mechanism, sizeof m->mechanism));
    const cJSON *headline = find(a, "headline");
    if (headline && !cJSON_IsBool(headline))
        return kvl_fail(KVL_EINVAL, "%s: field \"_kvlineage.headline\" must be true or false, got %s", r->origin,
                        shown(headline));
    m->headline = cJSON_IsTrue(headline);
    char cache[16] = "";
    KVL_TRY(read_text(r, a, "kv_cache", cache, sizeof cache));
    if (!cache[0]) return KVL_OK;
    for (size_t i = 0; i < sizeof cache_names / sizeof *cache_names; i++)
        if (strcmp(cache, cache_names[i]) == 0) { m->kv_cache = (kvl_cache_layout)i; return KVL_OK; }
    return kvl_fail(KVL_EINVAL, "%s: field \"_kvlineage.kv_cache\" must be one of bf16, v32-fp8, v4-fp8, v41-fp4, got \"%s\"",
                    r->origin, file_text(cache));
}

/* ---- entry points ------------------------------------------------------------------------------ */

static void where(const char *json, size_t len, const char *at, size_t *line, size_t *col)
{
    *line = 1; *col = 1;
    for (const char *p = json; p < at && p < json + len; p++) {
        if (*p == '\n') { (*line)++; *col = 1; } else (*col)++;
    }
}

/* The first byte in [p, stop) that is not a JSON blank (a NUL byte counts as text), or NULL. cJSON
 * stops after one value and ignores the rest, which may be a second object or a half-pasted one. */
static const char *after_blanks(const char *p, const char *stop)
{
    while (p < stop && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
    return p < stop ? p : NULL;
}

int kvl_model_parse(kvl_model *m, const char *json, size_t len, const char *origin)
{
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", origin);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    size_t line, col;
    if (!root) {
        where(json, len, end ? end : json + len, &line, &col);
        return kvl_fail(KVL_EPARSE, len ? "%s: not valid JSON near line %zu, column %zu" : "%s: empty file", origin,
                        line, col);
    }
    const char *rest = after_blanks(end, json + len);
    if (rest) {
        cJSON_Delete(root);
        where(json, len, rest, &line, &col);
        return kvl_fail(KVL_EPARSE, "%s: text after the JSON object, at line %zu, column %zu", origin, line, col);
    }
    reader r = {origin, root};
    int rc = KVL_OK;
    if (!cJSON_IsObject(root))
        rc = kvl_fail(KVL_EINVAL, "%s: the top level must be a JSON object, got %s", origin,
                      cJSON_IsArray(root) ? "an array" : "a scalar");
    if (rc == KVL_OK) rc = no_duplicates(&r, root, "");
    if (rc == KVL_OK) {
        m->generation = recognise(root);
        rc = read_dims(&r, m);
    }
    if (rc == KVL_OK) rc = build_layers(&r, m);
    if (rc == KVL_OK) rc = read_annotations(&r, m);
    cJSON_Delete(root);
    if (rc != KVL_OK) kvl_model_free(m);
    return rc;
}

int kvl_model_load(kvl_model *m, const char *path)
{
    memset(m, 0, sizeof *m);
    FILE *f = fopen(path, "rb");
    if (!f) return kvl_fail(KVL_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    int rc = buf ? KVL_OK : kvl_fail(KVL_ENOMEM, "%s: out of memory", path);
    while (rc == KVL_OK) {
        len += fread(buf + len, 1, cap - len, f);
        if (ferror(f)) rc = kvl_fail(KVL_EIO, "%s: cannot read: %s", path, strerror(errno));
        else if (len < cap) break;
        else if (cap >= ((size_t)1 << 26)) rc = kvl_fail(KVL_EINVAL, "%s: larger than 64 MiB: not a config", path);
        else {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger) rc = kvl_fail(KVL_ENOMEM, "%s: out of memory", path);
            else buf = bigger;
        }
    }
    fclose(f);
    if (rc == KVL_OK) rc = kvl_model_parse(m, buf, len, path);
    free(buf);
    return rc;
}

void kvl_model_free(kvl_model *m)
{
    free(m->layers);
    m->layers = NULL;
}

const char *kvl_generation_name(kvl_generation g)
{
    static const char *const names[] = {"MHA", "MLA", "DSA", "V4", "V4.1"};
    return names[g];
}

const char *kvl_layer_kind_name(kvl_layer_kind k)
{
    static const char *const names[] = {"dense", "sparse", "window", "CSA", "HCA", "Full", "Reindex", "Reuse"};
    return names[k];
}

const char *kvl_cache_layout_name(kvl_cache_layout c) { return cache_names[c]; }

int kvl_layer_writes_cache(const kvl_model *m, size_t layer)
{
    const kvl_layer *l = &m->layers[layer];
    return l->kind != KVL_LAYER_WINDOW && l->kv_source == (int)layer;
}
