/* The config loader's field table (ref/core/config_fields.h) against the writers and against the loader:
 * every field the writers define has its row, every row's writers define it, a field the table says is read
 * changes what the loader makes of some config (or is refused) when its value changes, a field it says is
 * ignored never does, and a field held at its default is refused at any other value. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "config.h"
#include "config_fields.h"
#include "status.h"

static const char *const writer_names[] = {"base", "v2",   "v3",   "v32", "v4",  "llama", "mistral", "mixtral", "qwen2",
                                           "qwen3", "gemma", "falcon", "hub", "ds3", "ds32", "ds4",     "ds41",    "kvlineage"};
enum { N_WRITERS = sizeof writer_names / sizeof *writer_names };

static unsigned writer_bit(const char *name)
{
    for (unsigned i = 0; i < N_WRITERS; i++)
        if (strcmp(name, writer_names[i]) == 0) return 1u << i;
    ck_abort_msg("tests/data/config_fields.tsv names an unknown writer \"%s\"", name);
    return 0;
}

/* Calls each(writer, field, ctx) for every row of tests/data/config_fields.tsv (written from the writers' code). */
static void for_each_listed(void (*each)(const char *writer, const char *field, void *ctx), void *ctx)
{
    char *text = kvl_read_text(kvl_path("tests/data/config_fields.tsv"));
    ck_assert_msg(text != NULL, "cannot read tests/data/config_fields.tsv");
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *tab = strchr(line, '\t');
        if (line[0] == '#' || !tab) continue;
        *tab = '\0';
        each(line, tab + 1, ctx);
    }
    free(text);
}

typedef struct {
    const char *field;
    unsigned bits;
} writers_of;

static void add_writer(const char *writer, const char *field, void *ctx)
{
    writers_of *w = ctx;
    if (strcmp(field, w->field) == 0) w->bits |= writer_bit(writer);
}

static void expect_row(const char *writer, const char *field, void *ctx)
{
    const kvl_config_field *f = kvl_config_field_find(field);
    ck_assert_msg(f != NULL, "field \"%s\" (%s) has no row in ref/core/config_fields.c", field, writer);
    ck_assert_msg(f->writers & writer_bit(writer), "field \"%s\": the table does not name writer %s", field, writer);
    (*(size_t *)ctx)++;
}

START_TEST(test_every_field_the_writers_define_has_its_row_and_no_other_writers)
{
    size_t listed = 0;
    for_each_listed(expect_row, &listed);
    ck_assert_uint_gt(listed, 400);
    for (size_t i = 0; i < kvl_config_fields_count; i++) {
        const kvl_config_field *f = &kvl_config_fields[i];
        writers_of w = {f->name, 0};
        for_each_listed(add_writer, &w);
        ck_assert_msg(f->writers == w.bits, "field \"%s\": the table's writers 0x%x, the list's 0x%x", f->name,
                      f->writers, w.bits);
        ck_assert_msg(f->use == KVL_FIELD_READ || (f->note && *f->note), "field \"%s\" has no note", f->name);
        ck_assert_msg(i == 0 || strcmp(kvl_config_fields[i - 1].name, f->name) < 0, "rows out of order at \"%s\"", f->name);
    }
}
END_TEST

/* ---- the table held to the loader ------------------------------------------------------------------- */

/* Configs of every writer, holding between them most fields the loader reads. */
static const char *const bases[] = {
    "ref/configs/deepseek-llm-67b.json", "ref/configs/deepseek-v2.json", "ref/configs/deepseek-v3.json",
    "ref/configs/deepseek-v3.2-exp.json", "ref/configs/deepseek-v4-flash.json", "ref/configs/deepseek-v4.1-flash.json",
    "chapters/01_mha/llama-3-70b.json", "chapters/03_swa/mistral-7b.json",
    "tests/reference/ecosystem/v3_rope_parameters/config.json", "tests/reference/ecosystem/v3_mscale_differs/config.json",
    "tests/reference/ecosystem/v32_yarn_no_mscale/config.json", "tests/reference/ecosystem/v4_flash/config.json",
    "tests/reference/ecosystem/v4_layer_types/config.json", "tests/reference/ecosystem/v3_deepseek_flat/config.json",
    "tests/reference/ecosystem/v3_norm_eps/config.json", "tests/reference/ecosystem/v4_saved_sharded/config.json",
    "tests/reference/ecosystem/v3_saved_sharded/config.json", "tests/reference/ecosystem/v32_saved_sharded/config.json",
};

/* Model types whose files the repository holds none of, and YaRN without its original context, written here
 * with the fields their classes read. */
static const char *const inline_bases[] = {
    "{\"model_type\": \"falcon\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
    " \"num_kv_heads\": 2, \"multi_query\": true, \"new_decoder_architecture\": true, \"ffn_hidden_size\": 96,"
    " \"alibi\": false, \"bias\": false, \"parallel_attn\": true, \"layer_norm_epsilon\": 1e-5, \"vocab_size\": 32,"
    " \"tie_word_embeddings\": true}",
    "{\"model_type\": \"falcon\", \"n_embed\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
    " \"num_kv_heads\": 2, \"multi_query\": false}",
    "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 2, \"use_sliding_window\": true, \"sliding_window\": 32, \"max_window_layers\": 0,"
    " \"intermediate_size\": 96, \"vocab_size\": 32, \"rope_theta\": 1000000.0}",
    "{\"model_type\": \"mixtral\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 2, \"num_local_experts\": 4, \"num_experts_per_tok\": 2, \"intermediate_size\": 96,"
    " \"vocab_size\": 32, \"sliding_window\": 16}",
    "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
    " \"kv_lora_rank\": 24, \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8, \"v_head_dim\": 12,"
    " \"max_position_embeddings\": 8192, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}}",
    "{\"model_type\": \"gemma\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 1, \"head_dim\": 32, \"intermediate_size\": 96, \"vocab_size\": 32,"
    " \"use_bidirectional_attention\": false}",
};

/* What the loader made of a config: the model, or the refusal. */
typedef struct {
    int rc;
    kvl_model m;
} reading;

static reading read_json(const cJSON *root)
{
    char *text = cJSON_PrintUnformatted(root);
    reading r;
    r.rc = kvl_model_parse(&r.m, text, strlen(text), "t.json");
    free(text);
    return r;
}

/* Every member of m as text: memcmp would also compare padding, which assignments may leave undefined. */
static void rope_text(char *out, size_t cap, const kvl_rope_config *r)
{
    snprintf(out, cap, "%.17g %.17g %.17g %.17g %.17g %.17g %.17g %d", r->theta, r->factor, r->original_len,
             r->beta_fast, r->beta_slow, r->mscale, r->attention_factor, r->interleaved);
}

static char *model_text(const kvl_model *m)
{
    size_t cap = 4096 + 64 * m->n_layers, o = 0;
    char *t = malloc(cap), rope[256], crope[256];
    ck_assert(t != NULL);
    rope_text(rope, sizeof rope, &m->rope);
    rope_text(crope, sizeof crope, &m->compress_rope);
    const kvl_ffn *f = &m->ffn;
    o += (size_t)snprintf(t + o, cap - o, "%s|%s|%s|%d|%d|%d|%zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu "
                          "%zu %zu %zu %zu|%.17g %d %d|%s|%s|%zu %d %zu %zu %zu %zu %zu %zu %zu %zu %zu %d %d %d\n",
                          m->name, m->date, m->mechanism, m->headline, (int)m->generation, (int)m->kv_cache, m->d,
                          m->n_layers, m->n_heads, m->n_kv_heads, m->head_dim, m->q_lora_rank, m->kv_lora_rank,
                          m->qk_nope_head_dim, m->qk_rope_head_dim, m->v_head_dim, m->window, m->index_n_heads,
                          m->index_head_dim, m->index_topk, m->o_groups, m->o_lora_rank, m->candidate_source_layer,
                          m->candidate_topk_blocks, m->candidate_block_size, m->norm_eps, m->attention_bias,
                          (int)m->rope_spelling, rope, crope, f->vocab_size, f->tied_embeddings, f->inter_dim,
                          f->ffn_matrices, f->moe_inter_dim, f->n_dense_layers, f->n_routed_experts, f->n_shared_experts,
                          f->n_activated_experts, f->n_mtp_layers, f->hc_mult, (int)f->linear, (int)f->experts,
                          f->scale_e8m0);
    for (size_t l = 0; l < m->n_layers; l++) {
        const kvl_layer *y = &m->layers[l];
        o += (size_t)snprintf(t + o, cap - o, "%d %zu %d %d;", (int)y->kind, y->compress_ratio, y->kv_source, y->index_source);
    }
    return t;
}

static int same_model(const kvl_model *a, const kvl_model *b)
{
    char *x = model_text(a), *y = model_text(b);
    int same = strcmp(x, y) == 0;
    free(x);
    free(y);
    return same;
}

/* A value of the same JSON type as v, other than v. */
static cJSON *mutant(const cJSON *v)
{
    if (cJSON_IsBool(v)) return cJSON_CreateBool(!cJSON_IsTrue(v));
    if (cJSON_IsNumber(v)) return cJSON_CreateNumber(v->valuedouble * 2 + 3);
    if (cJSON_IsString(v)) return cJSON_CreateString("zz_mutant");
    if (cJSON_IsArray(v)) return cJSON_CreateArray();
    if (cJSON_IsObject(v)) return cJSON_CreateObject();
    return cJSON_CreateNumber(7);
}

typedef struct {
    size_t present, effects;   /* bases holding the field; of them, those whose reading a mutant changed */
} field_count;

/* Every top-level field of root, mutated in turn: an ignored one must leave the model as it was. */
static void mutate_each_field(cJSON *root, const char *name, field_count *counts)
{
    reading base = read_json(root);
    ck_assert_msg(base.rc == KVL_OK, "%s: %s", name, kvl_error());
    const int n = cJSON_GetArraySize(root);
    for (int i = 0; i < n; i++) {
        cJSON *kept = cJSON_Duplicate(cJSON_GetArrayItem(root, i), 1);
        const kvl_config_field *f = kvl_config_field_find(kept->string);
        if (!f) {
            cJSON_Delete(kept);
            continue;
        }
        char key[128];   /* cJSON frees the replacement's own name before copying the one it is given */
        snprintf(key, sizeof key, "%s", kept->string);
        cJSON_ReplaceItemInObjectCaseSensitive(root, key, mutant(kept));
        reading r = read_json(root);
        const int changed = r.rc != KVL_OK || !same_model(&r.m, &base.m);
        const char *why = r.rc != KVL_OK ? kvl_error() : "another model";
        ck_assert_msg(f->use != KVL_FIELD_IGNORED || !changed, "%s: field \"%s\" is ignored by the table but its value "
                      "changed the reading (%s)", name, f->name, why);
        if (r.rc == KVL_OK) kvl_model_free(&r.m);
        cJSON_ReplaceItemInObjectCaseSensitive(root, key, kept);
        const size_t row = (size_t)(f - kvl_config_fields);
        counts[row].present++;
        counts[row].effects += (size_t)changed;
    }
    kvl_model_free(&base.m);
}

START_TEST(test_fields_read_change_the_reading_and_fields_ignored_never_do)
{
    field_count *counts = calloc(kvl_config_fields_count, sizeof *counts);
    ck_assert(counts != NULL);
    for (size_t b = 0; b < sizeof bases / sizeof *bases; b++) {
        char *text = kvl_read_text(kvl_path(bases[b]));
        ck_assert_msg(text != NULL, "cannot read %s", bases[b]);
        cJSON *root = cJSON_Parse(text);
        free(text);
        mutate_each_field(root, bases[b], counts);
        cJSON_Delete(root);
    }
    for (size_t b = 0; b < sizeof inline_bases / sizeof *inline_bases; b++) {
        cJSON *root = cJSON_Parse(inline_bases[b]);
        mutate_each_field(root, inline_bases[b], counts);
        cJSON_Delete(root);
    }
    size_t read_rows = 0, read_seen = 0;
    for (size_t i = 0; i < kvl_config_fields_count; i++) {
        const kvl_config_field *f = &kvl_config_fields[i];
        if (f->use != KVL_FIELD_READ) continue;
        read_rows++;
        read_seen += counts[i].present > 0;
        ck_assert_msg(!counts[i].present || counts[i].effects, "field \"%s\" is read by the table, but changing it in "
                      "the %zu configs that hold it changed nothing", f->name, counts[i].present);
    }
    ck_assert_msg(read_seen * 10 >= read_rows * 8, "only %zu of the %zu fields read appear in the configs", read_seen,
                  read_rows);
    free(counts);
}
END_TEST

/* A default-only field at another value is refused naming it, in a file of a writer that defines it. */
START_TEST(test_fields_held_at_their_default_are_refused_at_any_other_value)
{
    static const struct { const char *json, *field; } cases[] = {
        {"{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
         " \"mlp_bias\": true}", "mlp_bias"},
        {"{\"model_type\": \"gemma\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
         " \"num_key_value_heads\": 1, \"use_bidirectional_attention\": true}", "use_bidirectional_attention"},
        {"{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
         " \"is_encoder_decoder\": true}", "is_encoder_decoder"},
    };
    size_t defaults = 0;
    for (size_t i = 0; i < kvl_config_fields_count; i++) defaults += kvl_config_fields[i].use == KVL_FIELD_DEFAULT;
    ck_assert_uint_eq(defaults, sizeof cases / sizeof *cases);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kvl_model m;
        ck_assert_msg(kvl_model_parse(&m, cases[i].json, strlen(cases[i].json), "t.json") != KVL_OK, "accepted %s",
                      cases[i].json);
        char want[96];
        snprintf(want, sizeof want, "field \"%s\" is true: this project computes only %s = false", cases[i].field,
                 cases[i].field);
        ck_assert_msg(strstr(kvl_error(), want), "'%s' lacks '%s'", kvl_error(), want);
    }
}
END_TEST

/* Without model_type a file is read as DeepSeek's ModelArgs reads its keywords, which refuses one it lacks;
 * with one, as transformers reads it, which keeps an unknown key and never reads it. */
START_TEST(test_unknown_fields_are_refused_without_a_model_type_and_ignored_with_one)
{
    static const char untyped[] = "{\"dim\": 64, \"n_layers\": 1, \"n_heads\": 4, \"kv_lora_rank\": 24, "
                                  "\"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8, \"v_head_dim\": 12, \"v_head_dims\": 2}";
    kvl_model m;
    ck_assert(kvl_model_parse(&m, untyped, strlen(untyped), "t.json") != KVL_OK);
    ck_assert_msg(strstr(kvl_error(), "field \"v_head_dims\" is not one DeepSeek's inference code or transformers defines") &&
                  strstr(kvl_error(), "is it a misspelled \"v_head_dim\"?"), "%s", kvl_error());
    static const char typed[] = "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
                                "\"num_attention_heads\": 4, \"n_kv_head\": 2}";
    ck_assert_msg(kvl_model_parse(&m, typed, strlen(typed), "t.json") == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(m.n_kv_heads, 4);
    kvl_model_free(&m);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_config_fields");
    TCase *t = tcase_create("table");
    tcase_set_timeout(t, KVL_TEST_TIMEOUT);
    tcase_add_test(t, test_every_field_the_writers_define_has_its_row_and_no_other_writers);
    tcase_add_test(t, test_fields_read_change_the_reading_and_fields_ignored_never_do);
    tcase_add_test(t, test_fields_held_at_their_default_are_refused_at_any_other_value);
    tcase_add_test(t, test_unknown_fields_are_refused_without_a_model_type_and_ignored_with_one);
    suite_add_tcase(s, t);
    return s;
}
