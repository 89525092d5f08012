/* Chapter 9: what one GPU of a deployment holds. Tensor parallelism halves MHA/GQA's per-GPU bytes
 * as it doubles until every rank holds one KV head, and leaves a latent row whole; data-parallel
 * attention multiplies a node's distinct tokens by tp; pages round each layer's entries up; the
 * per-rank figures equal what live caches allocated with the split hold; serving refuses a bad
 * deployment before printing. The oracles below are plain arithmetic on the configs' dims. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ch09_configs.h"
#include "common.h"
#include "config.h"
#include "grouped.h"
#include "kvtable.h"
#include "mha.h"
#include "mla.h"
#include "params.h"
#include "rows.h"
#include "serving.h"
#include "status.h"
#include "swa.h"

static kvl_rank_cache rank_of(const ch09_config *l, size_t gpus, size_t tp, int dp, size_t page)
{
    kvl_deployment d = {.gpus = gpus, .tp = tp, .dp_attention = dp, .page = page};
    kvl_rank_cache r;
    ck_assert_msg(kvl_rank_cache_of(&r, &l->m, &l->f, &d) == KVL_OK, "%s", kvl_error());
    return r;
}

/* ceil(ceil(T / M) / page) · page, in doubles */
static double paged(double T, double M, double page)
{
    return ceil(ceil(T / M) / page) * page;
}

/* DeepSeek LLM 67B: 95 layers, 8 KV heads of 128, bf16. Up to tp 8 a rank holds 8 / tp heads; past
 * it, one replicated head. */
START_TEST(test_doubling_tp_halves_gqa_bytes_until_tp_reaches_kv_heads)
{
    ch09_config l = ch09_load("deepseek-llm-67b.json");
    ck_assert_uint_eq(l.m.n_kv_heads, 8);
    for (size_t tp = 1; tp <= 64; tp *= 2) {
        double heads = fmax(1.0, 8.0 / (double)tp);
        kvl_rank_cache r = rank_of(&l, tp, tp, 0, 1);
        ck_assert_double_eq(r.bytes_per_token, 95.0 * 2 * heads * 128 * 2);
        if (tp > 1 && tp <= 8) {
            kvl_rank_cache half = rank_of(&l, tp / 2, tp / 2, 0, 1);
            ck_assert_double_eq(half.bytes_per_token, 2 * r.bytes_per_token);
        }
    }
    ck_assert_double_eq(rank_of(&l, 64, 64, 0, 1).bytes_per_token, rank_of(&l, 8, 8, 0, 1).bytes_per_token);
    kvl_model_free(&l.m);
}
END_TEST

START_TEST(test_tp_leaves_a_latent_row_whole_on_every_rank)
{
    const char *names[] = {"deepseek-v2.json", "deepseek-v3.json", "deepseek-v3.2-exp.json",
                           "deepseek-v4-flash.json", "deepseek-v4.1-flash.json"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        ch09_config l = ch09_load(names[i]);
        for (size_t tp = 1; tp <= 8; tp *= 2) {
            kvl_rank_cache r = rank_of(&l, 8, tp, 0, 64);
            ck_assert_double_eq(r.bytes_per_token, l.f.bytes_per_token);
            ck_assert_uint_eq(r.window_bytes_per_sequence, l.f.window_bytes_per_sequence);
        }
        kvl_model_free(&l.m);
    }
}
END_TEST

/* V3 on 8 GPUs at tp 8: one group of 8 ranks holds one set of tokens; with data-parallel attention
 * each rank holds its own, whole rows still. */
START_TEST(test_dp_attention_multiplies_a_nodes_mla_tokens_by_tp)
{
    ch09_config l = ch09_load("deepseek-v3.json");
    kvl_deployment d = {.gpus = 8, .tp = 8, .page = 64};
    const double budget = 100.0 * 1073741824.0;
    kvl_fit fit[2];
    for (int dp = 0; dp < 2; dp++) {
        d.dp_attention = dp;
        kvl_rank_cache r = rank_of(&l, 8, 8, dp, 64);
        ck_assert_double_eq(r.bytes_per_token, 61.0 * (512 + 64) * 2);
        ck_assert_int_eq(kvl_fit_of(&fit[dp], &l.m, &r, &d, budget, 131072), KVL_OK);
    }
    ck_assert_double_eq(fit[0].tokens_per_gpu, floor(budget / (61.0 * 1152)));
    ck_assert_double_eq(fit[0].tokens_per_node, fit[0].tokens_per_gpu);
    ck_assert_double_eq(fit[1].tokens_per_node, 8 * fit[0].tokens_per_node);
    ck_assert_double_eq(fit[1].sequences_per_node, 8 * fit[0].sequences_per_node);
    ck_assert_double_eq(fit[0].sequences_per_gpu, floor(budget / (61.0 * 1152 * 131072)));
    kvl_model_free(&l.m);
}
END_TEST

START_TEST(test_pages_round_entries_up_at_the_edges)
{
    const size_t page = 64;
    for (size_t T = page - 1; T <= page + 1; T++) {
        ck_assert_uint_eq(kvl_paged_entries(T, 1, page), (size_t)paged((double)T, 1, (double)page));
        ck_assert_uint_eq(kvl_paged_entries(T, 1, page), T <= page ? page : 2 * page);
    }
    /* M = 128: 64 entries fill one page at T = 8,192; one token more opens a second page */
    ck_assert_uint_eq(kvl_paged_entries(128 * 64 - 1, 128, page), 64);
    ck_assert_uint_eq(kvl_paged_entries(128 * 64, 128, page), 64);
    ck_assert_uint_eq(kvl_paged_entries(128 * 64 + 1, 128, page), 128);
    ck_assert_uint_eq(kvl_paged_entries(1, 4, page), 64);

    ch09_config l = ch09_load("deepseek-llm-67b.json");
    kvl_deployment d = {.gpus = 8, .tp = 8, .page = page};
    kvl_rank_cache r = rank_of(&l, 8, 8, 0, page);
    for (size_t T = page - 1; T <= page + 1; T++)
        ck_assert_double_eq(kvl_rank_sequence_bytes(&l.m, &r, &d, T), paged((double)T, 1, 64) * 95 * 2 * 128 * 2);
    kvl_model_free(&l.m);
}
END_TEST

/* V4-Flash: 21 CSA layers (M = 4, 584-byte row + 68-byte key), 20 HCA layers (M = 128, 584 bytes),
 * and 43 · 128 window rows of 584 bytes, whatever the pages. */
START_TEST(test_pages_round_a_compressed_layers_entries)
{
    ch09_config l = ch09_load("deepseek-v4-flash.json");
    kvl_deployment d = {.gpus = 8, .tp = 8, .page = 64};
    kvl_rank_cache r = rank_of(&l, 8, 8, 0, 64);
    const size_t Ts[] = {1, 255, 256, 257, 8191, 8192, 8193, 131072};
    for (size_t i = 0; i < sizeof Ts / sizeof *Ts; i++) {
        double T = (double)Ts[i];
        double want = 21 * paged(T, 4, 64) * (584 + 68) + 20 * paged(T, 128, 64) * 584 + 43.0 * 128 * 584;
        ck_assert_double_eq(kvl_rank_sequence_bytes(&l.m, &r, &d, Ts[i]), want);
    }
    kvl_model_free(&l.m);
}
END_TEST

/* Mistral 7B (32 layers, 8 KV heads of 128, a 4,096-token window in every layer) at tp 8: one head
 * per rank, and at most 4,096 tokens held, whatever the context. */
START_TEST(test_a_model_windowed_in_every_layer_holds_at_most_w_tokens)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("chapters/03_swa/mistral-7b.json")) == KVL_OK, "%s", kvl_error());
    ch09_config l = {.m = m};
    ck_assert_msg(kvl_kv_footprint_of(&l.f, &l.m) == KVL_OK, "%s", kvl_error());
    kvl_deployment d = {.gpus = 8, .tp = 8, .page = 64};
    kvl_rank_cache r = rank_of(&l, 8, 8, 0, 64);
    ck_assert_double_eq(r.bytes_per_token, 32.0 * 2 * 1 * 128 * 2);
    ck_assert_double_eq(kvl_rank_sequence_bytes(&l.m, &r, &d, 4000), paged(4000, 1, 64) * 16384);
    ck_assert_double_eq(kvl_rank_sequence_bytes(&l.m, &r, &d, 131072), 4096.0 * 16384);
    kvl_model_free(&l.m);
}
END_TEST

/* The window B/seq serving prints is what a sequence keeps however long it grows: for Mistral 7B its
 * 4,096 tokens of rows, 32 layers × 2 × 8 KV heads × 128 × 2 B each on one GPU under data-parallel
 * attention (kvtable's window B/seq, 536,870,912), one KV head's share under tp 8. */
START_TEST(test_serving_counts_a_windowed_models_window_as_kvtable_does)
{
    static char out[1 << 16], err[1 << 12];
    const double W = 4096, row = 32.0 * 2 * 128 * 2;
    const double want[2] = {W * row * 1, W * row * 8};   /* tp 8: one KV head a rank; dp: all 8 */
    ck_assert_int_eq(kvl_run("serving chapters/03_swa/mistral-7b.json", NULL, out, sizeof out, err, sizeof err), 0);
    const char *at = out;
    for (int dp = 0; dp < 2; dp++) {
        at = strstr(at, "  Mistral 7B");
        ck_assert_msg(at != NULL, "serving prints no Mistral 7B row %d:\n%s", dp, out);
        char bpt[32], window[32];
        ck_assert_int_eq(sscanf(at + strlen("  Mistral 7B"), "%31s %31s", bpt, window), 2);
        char grouped[48];
        kvl_grouped(grouped, sizeof grouped, want[dp], 0);
        ck_assert_msg(!strcmp(window, grouped), "%s attention: window B/seq %s, expected %s",
                      dp ? "data-parallel" : "tensor-parallel", window, grouped);
        at++;
    }
}
END_TEST

/* Each of 4 ranks of DeepSeek LLM 67B builds its share (16 query heads, 2 KV heads) as a live bf16
 * cache of T rows; the sum over the ranks is one whole copy, and one rank's bytes are serving's. */
START_TEST(test_a_ranks_bytes_equal_its_live_mha_caches)
{
    ch09_config l = ch09_load("deepseek-llm-67b.json");
    const size_t tp = 4, T = 128;
    kvl_deployment d = {.gpus = 4, .tp = tp, .page = 64};
    kvl_rank_cache r = rank_of(&l, 4, tp, 0, 64);
    ck_assert_uint_eq(r.kv_heads, 2);
    mha_config c;
    ck_assert_msg(mha_config_init(&c, l.m.d, l.m.n_heads / tp, r.kv_heads, l.m.head_dim, 0, 10000.0) == KVL_OK,
                  "%s", kvl_error());
    float *rows = calloc(T * 2 * r.kv_heads * l.m.head_dim, sizeof *rows);
    ck_assert_ptr_nonnull(rows);
    double node = 0;
    for (size_t rank = 0; rank < tp; rank++) {
        mha_cache cache;
        ck_assert(mha_cache_init(&cache, &c, T, KV_STORE_BF16) == KVL_OK);
        ck_assert(kv_ring_append(&cache.ring, rows, T) == KVL_OK);
        double held = (double)l.m.n_layers * (double)mha_cache_bytes_used(&cache);
        ck_assert_double_eq(held, kvl_rank_sequence_bytes(&l.m, &r, &d, T));
        node += held;
        mha_cache_free(&cache);
    }
    ck_assert_double_eq(node, l.f.bytes_per_token * (double)T);
    free(rows);
    kvl_model_free(&l.m);
}
END_TEST

/* V2's latent on 8 ranks: every rank's live cache holds the whole [c_kv | k_rope] row per token. */
START_TEST(test_a_ranks_bytes_equal_its_live_mla_cache)
{
    ch09_config l = ch09_load("deepseek-v2.json");
    const size_t T = 64;
    kvl_deployment d = {.gpus = 8, .tp = 8, .page = 64};
    kvl_rank_cache r = rank_of(&l, 8, 8, 0, 64);
    mla_config c;
    ck_assert_msg(mla_config_from_model(&c, &l.m) == KVL_OK, "%s", kvl_error());
    float *rows = calloc(T * (c.kv_lora_rank + c.qk_rope), sizeof *rows);
    ck_assert_ptr_nonnull(rows);
    mla_cache cache;
    ck_assert(mla_cache_init(&cache, &c, T, KV_STORE_BF16) == KVL_OK);
    ck_assert(mla_cache_append(&cache, &c, rows, T) == KVL_OK);
    double held = (double)l.m.n_layers * (double)mla_cache_bytes_used(&cache);
    ck_assert_double_eq(held, kvl_rank_sequence_bytes(&l.m, &r, &d, T));
    ck_assert_double_eq(held, r.bytes_per_token * (double)T);
    mla_cache_free(&cache);
    free(rows);
    kvl_model_free(&l.m);
}
END_TEST

START_TEST(test_a_bad_deployment_is_refused_naming_the_field)
{
    ch09_config l = ch09_load("deepseek-v3.json");
    const kvl_deployment bad[] = {{.gpus = 0, .tp = 1, .page = 64}, {.gpus = 8, .tp = 3, .page = 64},
                                  {.gpus = 6, .tp = 3, .page = 64}, {.gpus = 8, .tp = 8, .page = 0}};
    const char *field[] = {"gpus = 0", "tp = 3", "tp = 3 does not divide n_heads = 128", "page = 0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        kvl_rank_cache r;
        ck_assert_int_eq(kvl_rank_cache_of(&r, &l.m, &l.f, &bad[i]), KVL_EINVAL);
        ck_assert_msg(strstr(kvl_error(), field[i]), "%s", kvl_error());
    }
    kvl_model_free(&l.m);

    ch09_config v4 = ch09_load("deepseek-v4-flash.json");
    kvl_deployment d = {.gpus = 8, .tp = 8, .page = 64};
    kvl_rank_cache r = rank_of(&v4, 8, 8, 0, 64);
    kvl_fit fit;
    ck_assert_int_eq(kvl_fit_of(&fit, &v4.m, &r, &d, 3214335, 1024), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "budget = 3214335"), "%s", kvl_error());
    ck_assert_int_eq(kvl_fit_of(&fit, &v4.m, &r, &d, 3214336, 1024), KVL_OK);
    kvl_model_free(&v4.m);
}
END_TEST

START_TEST(test_serving_refuses_a_bad_deployment_before_any_output)
{
    const char *cmd[] = {"serving --gpus 0", "serving --page 0", "serving --gpus 8 --tp 3",
                         "serving --gpus 6 --tp 3", "serving --budget-gib 0",
                         "serving --tp", "serving --gpus 8 --gpus 8",
                         "serving --memory-gib 141 --budget-gib 10", "serving --activations 0.5",
                         "serving --memory-gib 141 --activations 1", "serving --weights fp16",
                         "serving --cache v41-fp4 ref/configs/deepseek-v3.json", "serving --cache fp16"};
    const char *named[] = {"--gpus", "--page", "--tp", "tp = 3", "--budget-gib", "--tp", "--gpus",
                           "--budget-gib", "--memory-gib", "--activations", "--weights",
                           "kv_cache v41-fp4", "--cache"};
    const char *value[] = {"0", "0", "3", "3", "0", "", "twice", "give one", "not given", "1", "fp16",
                           "deepseek-v3.json", "fp16"};
    ch09_assert_refused(cmd, named, value, sizeof cmd / sizeof *cmd);
}
END_TEST

/* A split that does not fit is an answer, not an error: V3 on one GPU of 80 GiB, whose 626.9 GiB of
 * weights leave no cache, prints both splits with no tokens and no sequences, the reason named,
 * exit 0; and V4-Flash on a budget of 1,073,742 bytes, below one sequence's 3,214,336 bytes of
 * window rows, likewise, while 67B (no window) on that budget still holds 22 tokens a GPU under
 * tensor parallelism (389,120 / 8 B a token) and 2 under DP attention. */
START_TEST(test_a_split_that_does_not_fit_prints_as_such)
{
    static const struct {
        const char *cmd, *model, *why;
    } cases[] = {
        {"serving --gpus 1 --tp 1 --memory-gib 80 --format json ref/configs/deepseek-v3.json", "DeepSeek-V3",
         "626.9 GiB of weights"},
        {"serving --budget-gib 0.001 --format json ref/configs/deepseek-v4-flash.json "
         "ref/configs/deepseek-llm-67b.json",
         "DeepSeek-V4-Flash", "window rows"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        static char out[65536], err[4096];
        ck_assert_msg(kvl_run(cases[i].cmd, NULL, out, sizeof out, err, sizeof err) == 0, "%s: %s", cases[i].cmd, err);
        cJSON *root = cJSON_Parse(out);
        const cJSON *l;
        size_t misfits = 0;
        cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(root, "layouts"))
        {
            const int fits = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(l, "fits"));
            const char *model = cJSON_GetObjectItemCaseSensitive(l, "model")->valuestring;
            const double tokens = cJSON_GetObjectItemCaseSensitive(l, "tokens_per_gpu")->valuedouble;
            const double seqs = cJSON_GetObjectItemCaseSensitive(l, "sequences_per_node")->valuedouble;
            const cJSON *why = cJSON_GetObjectItemCaseSensitive(l, "misfit");
            ck_assert_int_eq(fits, strcmp(model, cases[i].model) != 0);
            if (fits) {
                const int dp = !strcmp(cJSON_GetObjectItemCaseSensitive(l, "attention")->valuestring, "dp");
                ck_assert_msg(tokens == floor(0.001 * 1073741824.0 / (dp ? 389120 : 389120 / 8)), "%.0f", tokens);
                continue;
            }
            misfits++;
            ck_assert(tokens == 0 && seqs == 0 && why && strstr(why->valuestring, cases[i].why));
        }
        ck_assert_uint_eq(misfits, 2);
        cJSON_Delete(root);
        char text[256];
        snprintf(text, sizeof text, "%.*s", (int)(strstr(cases[i].cmd, " --format json") - cases[i].cmd),
                 cases[i].cmd);
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s",
                 strstr(cases[i].cmd, " --format json") + strlen(" --format json"));
        ck_assert_int_eq(kvl_run(text, NULL, out, sizeof out, err, sizeof err), 0);
        char want[96];
        snprintf(want, sizeof want, "%s does not fit: ", cases[i].model);
        ck_assert_msg(strstr(out, want) && strstr(strstr(out, want), cases[i].why), "%s", out);
    }
}
END_TEST

/* One GPU holds ceil(n / k) of each part: the experts over all GPUs, the rest over the tp ranks, and
 * attention whole under data-parallel attention; one GPU alone holds the whole count. */
START_TEST(test_a_gpus_weights_are_its_share_of_the_count)
{
    ch09_config l = ch09_load("deepseek-v3.json");
    const kvl_params p = l.p;
    const kvl_weight_format fp8 = KVL_WEIGHTS_FP8;
    kvl_deployment one = {.gpus = 1, .tp = 1, .page = 64}, tp8 = {.gpus = 8, .tp = 8, .page = 64}, dp8 = tp8;
    dp8.dp_attention = 1;
    ck_assert(kvl_rank_weight_bytes(&p, &one, fp8, fp8, 0) == kvl_params_bytes(&p, fp8, fp8, 0));
    const double whole_attention = kvl_params_bytes(&(kvl_params){.attention = p.attention}, fp8, fp8, 0);
    const double rank_attention = kvl_params_bytes(&(kvl_params){.attention = (p.attention + 7) / 8}, fp8, fp8, 0);
    const double tp = kvl_rank_weight_bytes(&p, &tp8, fp8, fp8, 0), dp = kvl_rank_weight_bytes(&p, &dp8, fp8, fp8, 0);
    ck_assert(fabs(dp - tp - (whole_attention - rank_attention)) < 1e-9 * dp);
    kvl_params rank = {.embedding = (p.embedding + 7) / 8, .head = (p.head + 7) / 8, .norms = p.norms,
                       .attention = (p.attention + 7) / 8, .dense_ffn = (p.dense_ffn + 7) / 8,
                       .routed_experts = (p.routed_experts + 7) / 8, .shared_experts = (p.shared_experts + 7) / 8,
                       .routers = p.routers};
    ck_assert(tp == kvl_params_bytes(&rank, fp8, fp8, 0));
    kvl_model_free(&l.m);
}
END_TEST

/* With --memory-gib the cache gets what the activations and the weights leave: V3 on 8 × 141 GiB, tp 8,
 * holds floor((141 GiB · 0.9 − its FP8 weights per GPU) / 70,272) tokens per GPU. */
START_TEST(test_memory_leaves_the_cache_what_activations_and_weights_do_not_take)
{
    ch09_config l = ch09_load("deepseek-v3.json");
    const kvl_params p = l.p;
    const kvl_deployment d = {.gpus = 8, .tp = 8, .page = 64};
    const double weights = kvl_rank_weight_bytes(&p, &d, KVL_WEIGHTS_FP8, KVL_WEIGHTS_FP8, 0);
    const double budget = 141.0 * 1073741824.0 * 0.9 - weights;
    char want[64], out[16384], err[4096];
    kvl_grouped(want, sizeof want, floor(budget / 70272.0), 0);
    ck_assert_int_eq(kvl_run("serving --memory-gib 141 ref/configs/deepseek-v3.json", NULL, out, sizeof out, err,
                             sizeof err), 0);
    const char *line = strstr(out, "DeepSeek-V3 ");
    ck_assert_msg(line && strstr(line, want) && strstr(line, want) < strchr(line, '\n'), "want %s tokens/GPU: %s",
                  want, out);
    kvl_model_free(&l.m);
}
END_TEST

/* A rank's bytes per token split by layer kind: the kinds sum to the total, and V4-Flash's CSA and
 * HCA shares are 21 · (584 + 68) / 4 and 20 · 584 / 128 by the row sizes; layers that read another's
 * entries (V4.1's Reindex and Reuse) or keep only their window add nothing. */
START_TEST(test_bytes_by_layer_kind_sum_to_the_total)
{
    static const char *const names[] = {"deepseek-llm-67b.json", "deepseek-v3.json", "deepseek-v3.2-exp.json",
                                        "deepseek-v4-flash.json", "deepseek-v4.1-flash.json"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        ch09_config l = ch09_load(names[i]);
        const kvl_rank_cache r = rank_of(&l, 8, 8, 0, 64);
        double sum = 0;
        size_t layers = 0;
        for (int k = 0; k < KVL_N_LAYER_KINDS; k++) sum += r.kind_bytes[k], layers += r.kind_layers[k];
        ck_assert_msg(fabs(sum - r.bytes_per_token) <= 1e-12 * r.bytes_per_token, "%s: %g by kind, %g in all",
                      names[i], sum, r.bytes_per_token);
        ck_assert_uint_eq(layers, l.m.n_layers);
        if (l.m.generation == KVL_GEN_V4) {
            const double main = (double)kvf_row_bytes(KVF_ROW_V4_MAIN), key = (double)kvf_row_bytes(KVF_ROW_V4_INDEX);
            ck_assert_uint_eq(r.kind_layers[KVL_LAYER_CSA], 21);
            ck_assert_double_eq(r.kind_bytes[KVL_LAYER_CSA], 21 * (main + key) / 4);
            ck_assert_double_eq(r.kind_bytes[KVL_LAYER_HCA], 20 * main / 128);
            ck_assert_double_eq(r.kind_bytes[KVL_LAYER_WINDOW], 0);
        }
        if (l.m.generation == KVL_GEN_V41)
            ck_assert(r.kind_bytes[KVL_LAYER_REINDEX] == 0 && r.kind_bytes[KVL_LAYER_REUSE] == 0 &&
                      r.kind_bytes[KVL_LAYER_FULL] == r.bytes_per_token);
        kvl_model_free(&l.m);
    }
}
END_TEST

/* serving --svg draws the chart chapter 9 commits (and notebook 09 draws too), byte for byte. */
START_TEST(test_serving_draws_the_committed_figure)
{
    char path[] = "/tmp/kvl-serving-XXXXXX.svg", cmd[128], out[16384], err[4096];
    const int fd = mkstemps(path, 4);
    ck_assert(fd >= 0);
    snprintf(cmd, sizeof cmd, "serving --svg %s", path);
    ck_assert_int_eq(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), 0);
    char *fresh = kvl_read_text(path), *committed = kvl_read_text(kvl_path("chapters/09_serving/figures/sequences_per_node.svg"));
    ck_assert_msg(fresh && committed && !strcmp(fresh, committed),
                  "chapters/09_serving/figures/sequences_per_node.svg differs from what serving --svg draws now");
    free(fresh);
    free(committed);
    close(fd);
    remove(path);
}
END_TEST

START_TEST(test_serving_prints_every_config_under_both_splits)
{
    char out[16384], err[4096];
    ck_assert_int_eq(kvl_run("serving", NULL, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "tensor-parallel attention") && strstr(out, "data-parallel attention"), "%s", out);
    ck_assert_msg(strstr(out, "DeepSeek LLM 67B") && strstr(out, "DeepSeek-V4.1-Flash"), "%s", out);
    ck_assert_msg(strstr(out, "48,640") && strstr(out, "389,120"), "%s", out);   /* 67B split 8 ways, or whole */
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch09_serving");
    TCase *split = tcase_create("split");
    tcase_add_test(split, test_doubling_tp_halves_gqa_bytes_until_tp_reaches_kv_heads);
    tcase_add_test(split, test_tp_leaves_a_latent_row_whole_on_every_rank);
    tcase_add_test(split, test_bytes_by_layer_kind_sum_to_the_total);
    tcase_add_test(split, test_dp_attention_multiplies_a_nodes_mla_tokens_by_tp);
    suite_add_tcase(s, split);
    TCase *pages = tcase_create("pages");
    tcase_add_test(pages, test_pages_round_entries_up_at_the_edges);
    tcase_add_test(pages, test_pages_round_a_compressed_layers_entries);
    tcase_add_test(pages, test_a_model_windowed_in_every_layer_holds_at_most_w_tokens);
    tcase_add_test(pages, test_serving_counts_a_windowed_models_window_as_kvtable_does);
    suite_add_tcase(s, pages);
    TCase *live = tcase_create("live caches");
    tcase_add_test(live, test_a_ranks_bytes_equal_its_live_mha_caches);
    tcase_add_test(live, test_a_ranks_bytes_equal_its_live_mla_cache);
    suite_add_tcase(s, live);
    TCase *bad = tcase_create("refusals");
    tcase_add_test(bad, test_a_bad_deployment_is_refused_naming_the_field);
    tcase_add_test(bad, test_serving_refuses_a_bad_deployment_before_any_output);
    tcase_add_test(bad, test_a_split_that_does_not_fit_prints_as_such);
    tcase_add_test(bad, test_serving_prints_every_config_under_both_splits);
    tcase_add_test(bad, test_serving_draws_the_committed_figure);
    TCase *weights = tcase_create("weights");
    tcase_add_test(weights, test_a_gpus_weights_are_its_share_of_the_count);
    tcase_add_test(weights, test_memory_leaves_the_cache_what_activations_and_weights_do_not_take);
    suite_add_tcase(s, weights);
    suite_add_tcase(s, bad);
    return s;
}
