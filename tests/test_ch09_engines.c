/* Chapter 9, the engines: vLLM's and SGLang's sizing of a node, held to figures worked here by hand
 * from their code (ref/serving.h names the files and functions read). SGLang's reserve and memory
 * fraction, its DP-attention pool, vLLM's pool with a stated activation peak, the dense FP8 MLA row
 * against V3.2's sparse one, the MTP draft layer, the weights each keeps whole, the cache dtype by GPU
 * generation, V4's pools in each engine, V4.1's in vLLM on Hopper and SM 100, the JSON output, every
 * config under both engines, and the flags refused. Weights are counted by ref/params (its own suite
 * holds it to the published totals); how a rank's share of them is laid out is written out below. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ch09_configs.h"
#include "common.h"
#include "config.h"
#include "json_text.h"
#include "kvtable.h"
#include "params.h"
#include "serving.h"
#include "status.h"

#define MIB 1048576.0
#define GIB 1073741824.0
#define H200_MIB 143771.0   /* nvidia-smi's memory.total of an H200, MiB */

/* Stored bytes of n weights: bf16 two bytes; FP8 one byte and a float32 scale per 128 × 128 block */
static double bf16(double n) { return 2 * n; }
static double fp8(double n) { return n + n / 16384 * 4; }
static double over8(double n) { return ceil(n / 8); }

/* V3's fused q_a / kv_a projection: 61 layers of d 7,168 × (Dq' 1,536 + Dc 512 + Dr 64) */
static const double V3_FUSED = 61.0 * 7168 * (1536 + 512 + 64);

/* What one GPU of 8 holds of V3 in FP8 as each layout keeps it: routed experts over 8 GPUs always,
 * norms and routers whole. fused_whole: the fused projection whole; attention_whole (DP attention);
 * the embedding whole or split over 8; tp1: the head, dense FFNs and shared experts whole (a rank of
 * tensor parallelism 1) or split over 8. */
static double v3_weights(const kvl_params *p, int attention_whole, int fused_whole, int embedding_whole, int tp1)
{
    const double a = attention_whole ? (double)p->attention
                     : fused_whole   ? over8((double)p->attention - V3_FUSED) + V3_FUSED
                                     : over8((double)p->attention);
    const double e = embedding_whole ? (double)p->embedding : over8((double)p->embedding);
    const double h = tp1 ? (double)p->head : over8((double)p->head);
    const double d = tp1 ? (double)p->dense_ffn : over8((double)p->dense_ffn);
    const double shared = tp1 ? (double)p->shared_experts : over8((double)p->shared_experts);
    return bf16(e + h + (double)p->norms + (double)p->routers) + fp8(a + d) +
           fp8(over8((double)p->routed_experts) + shared);
}

/* Runs `cmd` (exit 0), parses its JSON and returns the layout of `attention` ("tp" or "dp"). */
static cJSON *run_json(const char *cmd, const char *attention, cJSON **root)
{
    static char out[65536], err[4096];
    ck_assert_msg(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err) == 0, "%s: %s", cmd, err);
    ck_assert_msg(kvl_json_text_check(out, strlen(out), cmd) == KVL_OK, "%s", kvl_error());
    *root = cJSON_Parse(out);
    ck_assert_ptr_nonnull(*root);
    const cJSON *layouts = cJSON_GetObjectItemCaseSensitive(*root, "layouts");
    const cJSON *l;
    cJSON_ArrayForEach(l, layouts)
        if (!strcmp(cJSON_GetObjectItemCaseSensitive(l, "attention")->valuestring, attention)) return (cJSON *)l;
    ck_abort_msg("%s: no %s layout", cmd, attention);
    return NULL;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    ck_assert_msg(cJSON_IsNumber(v), "no number %s", key);
    return v->valuedouble;
}

/* SGLang's _handle_gpu_memory_settings on an H200 (143,771 MiB, so chunk 8,192 and decode max_bs 512
 * at tp 8) for an MLA model: 512 + 1.5 · 8,192 + 8 / 8 · 1,024 + 2 · 512 + 1,536 = 16,384 MiB; DP
 * attention over 8 adds 3 · 512 · 8 + 1.5 · 512 · 8 = 18,432. An MHA model's prefill graphs count
 * 8 MiB at each of 58 sizes up to 8,192 (8 + 14 + 8 + 8 + 12 + 8): 464. V4 and V4.1 capture no
 * prefill graph: 14,848. A B200 (183,359 MiB) takes chunk 16,384: 512 + 24,576 + 1,024 + 1,024 +
 * 1,536 = 28,672. */
START_TEST(test_sglang_reserve_and_fraction_follow_its_heuristic)
{
    const kvl_sglang_prefill_graph mla = KVL_SGLANG_PREFILL_GRAPH_MLA, sizes = KVL_SGLANG_PREFILL_GRAPH_SIZES;
    ck_assert(kvl_sglang_reserved_mib(H200_MIB, 8, 0, 8, mla) == 512 + 1.5 * 8192 + 1024 + 2 * 512 + 1536);
    ck_assert(kvl_sglang_reserved_mib(H200_MIB, 8, 1, 8, mla) == 16384 + 3 * 512 * 8 + 1.5 * 512 * 8);
    ck_assert(kvl_sglang_reserved_mib(H200_MIB, 8, 0, 8, sizes) == 512 + 1.5 * 8192 + 1024 + 2 * 512 + 8 * 58);
    ck_assert(kvl_sglang_reserved_mib(H200_MIB, 8, 0, 8, KVL_SGLANG_PREFILL_GRAPH_NONE) ==
              512 + 1.5 * 8192 + 1024 + 2 * 512);
    ck_assert(kvl_sglang_reserved_mib(183359, 8, 0, 8, mla) == 512 + 1.5 * 16384 + 1024 + 2 * 512 + 1536);
    static const struct {
        const char *config;
        kvl_sglang_prefill_graph graph;
    } models[] = {{"deepseek-llm-67b.json", KVL_SGLANG_PREFILL_GRAPH_SIZES},
                  {"deepseek-v3.json", KVL_SGLANG_PREFILL_GRAPH_MLA},
                  {"deepseek-v3.2-exp.json", KVL_SGLANG_PREFILL_GRAPH_MLA},
                  {"deepseek-v4-flash.json", KVL_SGLANG_PREFILL_GRAPH_NONE},
                  {"deepseek-v4.1-flash.json", KVL_SGLANG_PREFILL_GRAPH_NONE}};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        ch09_config c = ch09_load(models[i].config);
        ck_assert_msg(kvl_sglang_prefill_graph_of(&c.m) == models[i].graph, "%s", models[i].config);
        kvl_model_free(&c.m);
    }
    /* round((143,771 - 16,384) / 143,771, 3) = round(0.88604, 3); DP: round(0.75783, 3) */
    ck_assert(kvl_sglang_mem_fraction(H200_MIB, 16384) == 0.886);
    ck_assert(kvl_sglang_mem_fraction(H200_MIB, 34816) == 0.758);
}
END_TEST

/* SGLang's DP-attention pool for V3 on 8 H200s, FP8 weights, bf16 cache: 0.758 of the card less the
 * weights its layout keeps (attention and embedding whole, head and dense FFNs over 8, experts over 8),
 * in tokens of 61 · 1,152 B rounded to pages of 64; sequences of 131,072 tokens: the pool over one
 * sequence's bytes, on each of 8 ranks. Less than half what the plain rule leaves (0.9 of the card,
 * the embedding split). */
START_TEST(test_sglang_dp_pool_is_its_fraction_less_its_weights)
{
    ch09_config v3 = ch09_load("deepseek-v3.json");
    cJSON *root;
    const cJSON *dp =
        run_json("serving --engine sglang --gpu h200 --weights fp8 --format json ref/configs/deepseek-v3.json",
                 "dp", &root);
    const double weights = v3_weights(&v3.p, 1, 1, 1, 0);
    const double cache = 0.758 * H200_MIB * MIB - weights;
    ck_assert_msg(fabs(num(dp, "weights_gib_per_gpu") - weights / GIB) < 1e-9, "%.9f", num(dp, "weights_gib_per_gpu"));
    ck_assert_msg(fabs(num(dp, "cache_gib_per_gpu") - cache / GIB) < 1e-9, "%.9f", num(dp, "cache_gib_per_gpu"));
    ck_assert(num(dp, "bytes_per_token_per_gpu") == 61 * 1152);
    ck_assert(num(dp, "tokens_per_gpu") == floor(cache / (61 * 1152)));   /* fa3's pages of 1 */
    ck_assert(num(dp, "sequences_per_node") == floor(cache / (131072.0 * 61 * 1152)) * 8);
    const double plain = 0.9 * H200_MIB * MIB - v3_weights(&v3.p, 1, 0, 0, 0);
    ck_assert_msg(cache < plain / 2, "sglang %.3g against plain %.3g", cache, plain);
    cJSON_Delete(root);
    kvl_model_free(&v3.m);
}
END_TEST

/* SGLang's _handle_gpu_memory_settings (commit 001067ff) has no term for speculative decoding: with
 * MTP's draft layer the reserve stays 16,384 MiB under tensor parallelism and 34,816 under DP
 * attention (the figures worked above), the fractions 0.886 and 0.758; only the draft's weights and
 * cache layer change what the pool holds. */
START_TEST(test_sglang_reserves_nothing_more_for_the_draft)
{
    static const char *const split[] = {"tp", "dp"};
    static const double reserved[] = {16384, 34816}, fraction[] = {0.886, 0.758};
    for (int dp = 0; dp < 2; dp++) {
        cJSON *root;
        const cJSON *l = run_json("serving --engine sglang --gpu h200 --weights fp8 --cache mla-fp8 "
                                  "--speculative mtp --mtp-layers 1 --format json ref/configs/deepseek-v3.json",
                                  split[dp], &root);
        ck_assert_msg(num(l, "reserved_mib") == reserved[dp], "%s: %.1f", split[dp], num(l, "reserved_mib"));
        ck_assert(num(l, "memory_fraction") == fraction[dp]);
        cJSON_Delete(root);
    }
}
END_TEST

/* vLLM's pool for V3 under tensor parallelism with a stated 6 GiB activation peak: 0.9 of the card
 * less the weights (the fused projection whole) and the peak, in blocks of 64 tokens of the dense FP8
 * row, 576 B a layer: floor(cache / (64 · 576) / 61) blocks. */
START_TEST(test_vllm_pool_is_its_utilization_less_weights_and_the_stated_peak)
{
    ch09_config v3 = ch09_load("deepseek-v3.json");
    cJSON *root;
    const cJSON *tp = run_json("serving --engine vllm --gpu h200 --weights fp8 --cache mla-fp8 "
                               "--activation-peak-gib 6 --format json ref/configs/deepseek-v3.json",
                               "tp", &root);
    const double weights = v3_weights(&v3.p, 0, 1, 0, 0);
    const double cache = 0.9 * H200_MIB * MIB - weights - 6 * GIB;
    ck_assert_msg(fabs(num(tp, "cache_gib_per_gpu") - cache / GIB) < 1e-9, "%.9f", num(tp, "cache_gib_per_gpu"));
    ck_assert(num(tp, "bytes_per_token_per_gpu") == 61 * 576);
    ck_assert(num(tp, "tokens_per_gpu") == floor(cache / (64 * 576) / 61) * 64);
    ck_assert(num(tp, "sequences_per_node") == floor(cache / (131072.0 * 61 * 576)));
    cJSON_Delete(root);
    kvl_model_free(&v3.m);
}
END_TEST

/* V3's dense FP8 row: 512 latent + 64 RoPE values, one E4M3 byte each, 576 B. V3.2's sparse row: 512
 * E4M3 bytes, four float32 scales (one per 128 values) and 64 bf16 RoPE values, 512 + 16 + 128 = 656 B.
 * Each engine stores the first for an MLA model and the second for a DSA model, and refuses the
 * other. */
START_TEST(test_the_dense_mla_fp8_row_is_576_bytes_and_the_sparse_row_656)
{
    ch09_config v3 = ch09_load("deepseek-v3.json"), v32 = ch09_load("deepseek-v3.2-exp.json");
    v3.m.kv_cache = KVL_CACHE_MLA_FP8;
    ck_assert_int_eq(kvl_kv_footprint_of(&v3.f, &v3.m), KVL_OK);
    ck_assert_uint_eq(v3.f.main_row_bytes, 512 + 64);
    v32.m.kv_cache = KVL_CACHE_V32_FP8;
    ck_assert_int_eq(kvl_kv_footprint_of(&v32.f, &v32.m), KVL_OK);
    ck_assert_uint_eq(v32.f.main_row_bytes, 512 + 4 * 4 + 64 * 2);
    v32.m.kv_cache = KVL_CACHE_MLA_FP8;
    ck_assert_int_eq(kvl_kv_footprint_of(&v32.f, &v32.m), KVL_EINVAL);
    kvl_cache_layout c;
    for (kvl_engine e = KVL_ENGINE_VLLM; e <= KVL_ENGINE_SGLANG; e++) {
        ck_assert_int_eq(kvl_engine_cache_layout(&c, e, &v3.m, 9, KVL_CACHE_V32_FP8), KVL_EINVAL);
        ck_assert_msg(strstr(kvl_error(), "mla-fp8"), "%s", kvl_error());
        ck_assert_int_eq(kvl_engine_cache_layout(&c, e, &v32.m, 9, KVL_CACHE_MLA_FP8), KVL_EINVAL);
        ck_assert_int_eq(kvl_engine_cache_layout(&c, e, &v3.m, 9, KVL_CACHE_MLA_FP8), KVL_OK);
        ck_assert_int_eq(c, KVL_CACHE_MLA_FP8);
    }
    kvl_model_free(&v3.m);
    kvl_model_free(&v32.m);
}
END_TEST

/* Default cache dtype: SGLang stores a DSA model's cache in FP8 from SM 100 (B200) and bf16 below;
 * vLLM's "auto" is bf16 on every GPU; an MLA model is bf16 in both. */
START_TEST(test_sglang_picks_a_dsa_cache_dtype_by_gpu_generation)
{
    ch09_config v3 = ch09_load("deepseek-v3.json"), v32 = ch09_load("deepseek-v3.2-exp.json");
    kvl_cache_layout c;
    const kvl_gpu gpus[] = {KVL_GPU_H100, KVL_GPU_H200, KVL_GPU_B200};
    const kvl_cache_layout sglang_v32[] = {KVL_CACHE_BF16, KVL_CACHE_BF16, KVL_CACHE_V32_FP8};
    for (int i = 0; i < 3; i++) {
        const int sm = kvl_gpu_sm_major(gpus[i]);
        ck_assert_int_eq(kvl_engine_cache_layout(&c, KVL_ENGINE_SGLANG, &v32.m, sm, -1), KVL_OK);
        ck_assert_int_eq(c, sglang_v32[i]);
        ck_assert_int_eq(kvl_engine_cache_layout(&c, KVL_ENGINE_VLLM, &v32.m, sm, -1), KVL_OK);
        ck_assert_int_eq(c, KVL_CACHE_BF16);
        ck_assert_int_eq(kvl_engine_cache_layout(&c, KVL_ENGINE_SGLANG, &v3.m, sm, -1), KVL_OK);
        ck_assert_int_eq(c, KVL_CACHE_BF16);
    }
    kvl_model_free(&v3.m);
    kvl_model_free(&v32.m);
}
END_TEST

/* MTP speculation caches the draft layer: V3 in mla-fp8 rows holds 61 + 1 = 62 layers of 576 B,
 * V3.2 on a B200 (SGLang's FP8 default) 62 of 656 + 132 B; one sequence pages the draft layer too. */
START_TEST(test_the_mtp_draft_layer_is_one_more_caching_layer)
{
    cJSON *root;
    const cJSON *tp = run_json("serving --engine sglang --gpu h200 --cache mla-fp8 --speculative mtp "
                               "--mtp-layers 1 --format json ref/configs/deepseek-v3.json",
                               "tp", &root);
    ck_assert(num(tp, "caching_layers") == 62);
    ck_assert(num(tp, "bytes_per_token_per_gpu") == 62 * 576);
    ck_assert(num(tp, "sequence_bytes_per_gpu") == 131072.0 * 62 * 576);
    cJSON_Delete(root);
    tp = run_json("serving --engine sglang --gpu b200 --speculative mtp --mtp-layers 1 --format json "
                  "ref/configs/deepseek-v3.2-exp.json",
                  "tp", &root);
    ck_assert(num(tp, "bytes_per_token_per_gpu") == 62 * (656 + 132));
    cJSON_Delete(root);
}
END_TEST

/* Both engines keep V3's fused q_a / kv_a projection whole on every rank: under tensor parallelism a
 * GPU holds 7/8 of it more than the plain split, in FP8; V4-Flash's wq_a and wkv likewise, 43 layers
 * of 4,096 × (1,024 + 512). 67B has none: its weights match the plain rule's. Under DP attention
 * SGLang keeps the embedding whole (7/8 of it more, bf16). vLLM's data-parallel ranks run tensor
 * parallelism 1: FusedMoEParallelConfig.make flattens tp · dp into expert parallelism for the routed
 * experts only, and the shared experts are a DeepseekV2MLP over the tp group of 1, so a rank holds the
 * embedding, head, dense FFNs and shared experts whole. */
START_TEST(test_engines_keep_the_fused_projection_and_dp_embedding_whole)
{
    ch09_config v3 = ch09_load("deepseek-v3.json"), llm = ch09_load("deepseek-llm-67b.json"),
                v4 = ch09_load("deepseek-v4-flash.json");
    const kvl_weight_format f8 = KVL_WEIGHTS_FP8;
    for (kvl_engine e = KVL_ENGINE_VLLM; e <= KVL_ENGINE_SGLANG; e++) {
        const kvl_deployment tp = {.gpus = 8, .tp = 8, .page = 64, .engine = e};
        const kvl_deployment plain = {.gpus = 8, .tp = 8, .page = 64};
        const double more = kvl_engine_weight_bytes(&v3.p, &v3.m, &tp, f8, f8, 0) -
                            kvl_engine_weight_bytes(&v3.p, &v3.m, &plain, f8, f8, 0);
        ck_assert_msg(fabs(more - fp8(V3_FUSED * 7 / 8)) < 2, "%.1f", more);
        const double v4_more = kvl_engine_weight_bytes(&v4.p, &v4.m, &tp, f8, f8, 0) -
                               kvl_engine_weight_bytes(&v4.p, &v4.m, &plain, f8, f8, 0);
        ck_assert_msg(fabs(v4_more - fp8(43.0 * 4096 * (1024 + 512) * 7 / 8)) < 2, "%.1f", v4_more);
        ck_assert(kvl_engine_weight_bytes(&llm.p, &llm.m, &tp, f8, f8, 0) ==
                  kvl_engine_weight_bytes(&llm.p, &llm.m, &plain, f8, f8, 0));
    }
    const kvl_deployment plain = {.gpus = 8, .tp = 8, .page = 64, .dp_attention = 1};
    const kvl_deployment sglang = {.gpus = 8, .tp = 8, .page = 64, .dp_attention = 1, .engine = KVL_ENGINE_SGLANG};
    const kvl_deployment vllm = {.gpus = 8, .tp = 8, .page = 64, .dp_attention = 1, .engine = KVL_ENGINE_VLLM};
    const double base = kvl_engine_weight_bytes(&v3.p, &v3.m, &plain, f8, f8, 0);
    ck_assert(kvl_engine_weight_bytes(&v3.p, &v3.m, &sglang, f8, f8, 0) - base == bf16(926679040.0 * 7 / 8));
    ck_assert(fabs(kvl_engine_weight_bytes(&v3.p, &v3.m, &vllm, f8, f8, 0) - v3_weights(&v3.p, 1, 1, 1, 1)) < 1);
    kvl_model_free(&v3.m);
    kvl_model_free(&llm.m);
    kvl_model_free(&v4.m);
}
END_TEST

/* V3.2's indexer in every layer, replicated by both engines (SGLang's Indexer and vLLM's build wq_b,
 * wk and weights_proj as ReplicatedLinear or with disable_tp): wq_b Dq' 1,536 × HI 64 · DI 128,
 * wk d 7,168 × DI 128, weights_proj d 7,168 × HI 64, the key's LayerNorm gain and bias 2 · 128:
 * 13,959,424 weights a layer, 61 layers. Under tensor parallelism a GPU holds 7/8 of the indexers and
 * of the fused projection more than the plain split; under DP attention all attention is whole already,
 * so the engine and the plain rule agree on it. */
START_TEST(test_engines_keep_the_dsa_indexer_whole_on_every_rank)
{
    ch09_config v32 = ch09_load("deepseek-v3.2-exp.json");
    const kvl_weight_format f8 = KVL_WEIGHTS_FP8;
    const double indexers = 61.0 * (1536.0 * 64 * 128 + 7168.0 * 128 + 7168.0 * 64 + 2 * 128);
    const kvl_deployment plain = {.gpus = 8, .tp = 8, .page = 64};
    const double base = kvl_engine_weight_bytes(&v32.p, &v32.m, &plain, f8, f8, 0);
    for (kvl_engine e = KVL_ENGINE_VLLM; e <= KVL_ENGINE_SGLANG; e++) {
        const kvl_deployment tp = {.gpus = 8, .tp = 8, .page = 64, .engine = e};
        const double more = kvl_engine_weight_bytes(&v32.p, &v32.m, &tp, f8, f8, 0) - base;
        ck_assert_msg(fabs(more - fp8((V3_FUSED + indexers) * 7 / 8)) < 2, "%s: %.1f", kvl_engine_name(e), more);
    }
    kvl_model_free(&v32.m);
}
END_TEST

/* Pages: SGLang's page_size is 1 unless the backend forces one, 64 for DSA's nsa backend and for
 * trtllm_mla (MLA from SM 100); vLLM's block is 64 for FlashMLA, 128 for CUTLASS MLA (MLA from SM
 * 100), 16 for MHA's FlashAttention. --page overrides them, as the engines' own flags do. */
START_TEST(test_each_engine_pages_as_its_default_backend_does)
{
    ch09_config v3 = ch09_load("deepseek-v3.json"), v32 = ch09_load("deepseek-v3.2-exp.json"), llm = ch09_load("deepseek-llm-67b.json");
    const kvl_model *m[] = {&v3.m, &v32.m, &llm.m};
    static const size_t sglang[2][3] = {{1, 64, 1}, {64, 64, 1}}, vllm[2][3] = {{64, 64, 16}, {128, 64, 16}};
    for (int blackwell = 0; blackwell < 2; blackwell++)
        for (int i = 0; i < 3; i++) {
            const int sm = blackwell ? 10 : 9;
            ck_assert_uint_eq(kvl_engine_page(KVL_ENGINE_SGLANG, m[i], sm), sglang[blackwell][i]);
            ck_assert_uint_eq(kvl_engine_page(KVL_ENGINE_VLLM, m[i], sm), vllm[blackwell][i]);
        }
    cJSON *root;
    const cJSON *tp = run_json("serving --engine sglang --gpu h200 --page 64 --format json "
                               "ref/configs/deepseek-v3.json",
                               "tp", &root);
    ck_assert(num(tp, "page") == 64);
    ck_assert(fmod(num(tp, "tokens_per_gpu"), 64) == 0);
    cJSON_Delete(root);
    for (int i = 0; i < 3; i++) kvl_model_free((kvl_model *)m[i]);
}
END_TEST

/* V4's entry in both engines (vLLM's DeepseekV4MultiHeadLatentAttentionWrapper head_bytes, SGLang's
 * DeepSeekV4SingleKVPool.get_bytes_per_token): 448 nope values one E4M3 byte each, 64 bf16 RoPE values,
 * 448 / 64 = 7 UE8M0 scales and a pad byte, 584 B; the index key, 128 E4M3 bytes and a float32 scale,
 * 132 B (vLLM's k_cache_head_dim, SGLang's FP8 indexer count) where this project's v4-fp8 keeps 68. */
START_TEST(test_v4_engine_entry_is_584_bytes_and_its_index_key_132)
{
    ch09_config v4 = ch09_load("deepseek-v4-flash.json");
    ck_assert_uint_eq(kvl_v4_engine_row_bytes(&v4.m), 448 + 64 * 2 + 7 + 1);
    ck_assert_uint_eq(kvl_v4_engine_index_key_bytes(&v4.m), 128 + 4);
    kvl_model_free(&v4.m);
}
END_TEST

/* vLLM's V4 pool, worked from its specs for V4-Flash (21 CSA, 20 HCA, 43 layers). Pages padded to
 * 576 B: a CSA block of 256 tokens holds 64 entries, 64 · 584 = 37,376 → 37,440, and 64 index keys,
 * 8,448 → 8,640; an HCA block 2 entries, 1,168 → 1,728; a window block 64 rows, 37,440; a CSA
 * compressor state block 4 rows of 2 · 2 · 512 float32, 32,768 → 32,832, its indexer's 4 · 2 · 2 · 128 ·
 * 4 = 8,192 → 8,640; an HCA state block 8 · 2 · 512 · 4 = 32,768 → 32,832. The balanced buckets repeat
 * 43, 21 and 20 layers a page size, at least 21 (the CSA states' two sizes): 22 pads least (1 + 1 + 2),
 * so the window layers split into two groups of 22. Widest group: the compressed layers, 21 · 37,440
 * + 21 · 8,640 + 20 · 1,728 = 1,002,240 B a block (window groups 823,680, CSA states 870,912, HCA
 * states 656,640). A sequence's window groups hold 2 · (⌈127 / 64⌉ + 1) + (⌈7 / 4⌉ + 1) + (⌈127 / 8⌉ +
 * 1) = 26 blocks. */
START_TEST(test_vllm_v4_blocks_are_its_widest_group_of_pages)
{
    ch09_config v4 = ch09_load("deepseek-v4-flash.json");
    kvl_vllm_v4_blocks b;
    kvl_vllm_v4_blocks_of(&b, &v4.m, 0);
    ck_assert_uint_eq(b.repeats, 22);
    ck_assert_uint_eq(b.compressed_bytes, 21 * 37440 + 21 * 8640 + 20 * 1728);
    ck_assert_uint_eq(b.block_bytes, 1002240);
    ck_assert_uint_eq(b.window_blocks, 2 * 3 + 3 + 17);
    kvl_model_free(&v4.m);
}
END_TEST

/* vLLM's V4-Flash pool on 8 H200s with a stated 6 GiB peak: whole blocks of 1,002,240 B, 256 tokens
 * each; a sequence of 131,072 tokens 512 blocks and its 26 window blocks. */
START_TEST(test_vllm_v4_pool_is_whole_blocks_of_its_widest_group)
{
    cJSON *root;
    const cJSON *tp = run_json("serving --engine vllm --gpu h200 --activation-peak-gib 6 --format json "
                               "ref/configs/deepseek-v4-flash.json",
                               "tp", &root);
    const double cache = num(tp, "cache_gib_per_gpu") * GIB, block = 1002240;
    ck_assert(num(tp, "page") == 256);
    ck_assert(num(tp, "bytes_per_token_per_gpu") == block / 256);
    ck_assert(num(tp, "window_bytes_per_sequence_per_gpu") == 26 * block);
    ck_assert(num(tp, "sequence_bytes_per_gpu") == (512 + 26) * block);
    ck_assert_msg(num(tp, "tokens_per_gpu") == floor(cache / block) * 256, "%.0f", num(tp, "tokens_per_gpu"));
    ck_assert(num(tp, "sequences_per_node") == floor(cache / ((512 + 26) * block)));
    cJSON_Delete(root);
}
END_TEST

/* SGLang's V4-Flash pool (DSV4PoolConfigurator, SGLang 0.5.23), worked from its code. Slots are
 * shares of pages padded to 576 B: 256 · 584 = 149,504 → 149,760 and 64 · 584 = 37,376 → 37,440, 585
 * a slot; 2 · 584 = 1,168 → 1,728, 864 an HCA entry. A full token costs the window pool's tenth of a
 * slot in each of 43 layers, 0.1 · 585 · 43 = 2,515.5; the CSA compressor states, ring 8 / page 256
 * of the window slots, 0.1 · 8 / 256 · (8,192 + 2,048) float32 bytes in 21, 672; a quarter CSA slot
 * and index key in 21, (585 + 132) / 4 · 21 = 3,764.25; an HCA entry over 128 in 20, 135: 7,086.75 B.
 * The C128 states come first: rings of 128 rows for 256 requests and one slot more, one ring and a
 * null row, rounded to 128 rows, 33,152 rows of 2 · 512 float32 in 20 layers; under DP attention 32
 * requests a worker, 4,480 rows. It runs at most those 256 (32 a worker) sequences at once, however
 * many the pool holds. */
START_TEST(test_sglang_v4_pool_is_full_tokens_after_its_c128_states)
{
    ch09_config v4 = ch09_load("deepseek-v4-flash.json");
    const double bpft = 0.1 * 585 * 43 + 0.1 * (8.0 / 256) * (8192 + 2048) * 21 + (585 + 132) / 4.0 * 21 +
                        864 / 128.0 * 20;
    ck_assert_msg(fabs(kvl_sglang_v4_bytes_per_token(&v4.m, 0) - 7086.75) < 1e-9, "%.6f",
                  kvl_sglang_v4_bytes_per_token(&v4.m, 0));
    ck_assert(fabs(bpft - 7086.75) < 1e-9);
    ck_assert(kvl_sglang_v4_state_bytes(&v4.m, 256, 0) == 33152.0 * 1024 * 4 * 20);
    ck_assert(kvl_sglang_v4_state_bytes(&v4.m, 32, 0) == 4480.0 * 1024 * 4 * 20);
    static const char *const split[] = {"tp", "dp"};
    const double states[] = {33152.0 * 1024 * 4 * 20, 4480.0 * 1024 * 4 * 20}, running[] = {256, 32};
    for (int dp = 0; dp < 2; dp++) {
        cJSON *root;
        const cJSON *l = run_json("serving --engine sglang --gpu h200 --format json "
                                  "ref/configs/deepseek-v4-flash.json",
                                  split[dp], &root);
        const double pool = num(l, "cache_gib_per_gpu") * GIB - states[dp];
        ck_assert(num(l, "page") == 256);
        ck_assert(fabs(num(l, "bytes_per_token_per_gpu") - 7086.75) < 1e-9);
        ck_assert_msg(num(l, "tokens_per_gpu") == floor(floor(pool / bpft) / 256) * 256, "%s %.0f", split[dp],
                      num(l, "tokens_per_gpu"));
        ck_assert(num(l, "sequences_per_gpu") == fmin(floor(pool / (131072 * bpft)), running[dp]));
        ck_assert(num(l, "running_sequences_per_gpu") == running[dp]);
        cJSON_Delete(root);
    }
    kvl_model_free(&v4.m);
}
END_TEST

/* V4-Flash's MTP draft. vLLM gives the layer past the backbone ratio 1, a window-only layer: 44
 * window layers split into two groups of 22 (the repeats still 22, padding 0 + 1 + 2), so neither
 * the block nor the 26 window blocks a sequence change (three draft layers would: 46 window layers
 * pad least at 23 repeats, 0 + 2 + 3). SGLang doubles its state rings (16 and 256)
 * and inflates a full token by 44 / 43 for the draft worker: (2,515.5 + 3,764.25 + 135 + 0.1 ·
 * 16 / 256 · (8,192 + 2,048) · 21) · 44 / 43; its C128 states round_up(257 · 256 + 257, 128) = 66,176
 * rows. */
START_TEST(test_v4_mtp_draft_as_each_engine_caches_it)
{
    ch09_config v4 = ch09_load("deepseek-v4-flash.json");
    kvl_vllm_v4_blocks b;
    kvl_vllm_v4_blocks_of(&b, &v4.m, 1);
    ck_assert_uint_eq(b.repeats, 22);
    ck_assert_uint_eq(b.block_bytes, 1002240);
    ck_assert_uint_eq(b.window_blocks, 26);
    kvl_vllm_v4_blocks_of(&b, &v4.m, 3);
    ck_assert_uint_eq(b.repeats, 23);
    const double bpft = (2515.5 + 3764.25 + 135 + 0.1 * (16.0 / 256) * (8192 + 2048) * 21) * 44 / 43;
    ck_assert_msg(fabs(kvl_sglang_v4_bytes_per_token(&v4.m, 1) - bpft) < 1e-9, "%.6f",
                  kvl_sglang_v4_bytes_per_token(&v4.m, 1));
    ck_assert(kvl_sglang_v4_state_bytes(&v4.m, 256, 1) == 66176.0 * 1024 * 4 * 20);
    cJSON *root;
    const cJSON *tp = run_json("serving --engine vllm --gpu h200 --activation-peak-gib 6 --speculative mtp "
                               "--format json ref/configs/deepseek-v4-flash.json",
                               "tp", &root);
    ck_assert(num(tp, "bytes_per_token_per_gpu") == 1002240.0 / 256);
    ck_assert(num(tp, "sequence_bytes_per_gpu") == (512 + 26) * 1002240.0);
    cJSON_Delete(root);
    tp = run_json("serving --engine sglang --gpu h200 --speculative mtp --format json "
                  "ref/configs/deepseek-v4-flash.json",
                  "tp", &root);
    ck_assert(fabs(num(tp, "bytes_per_token_per_gpu") - bpft) < 1e-9);
    ck_assert(num(tp, "state_bytes_per_gpu") == 66176.0 * 1024 * 4 * 20);
    cJSON_Delete(root);
    kvl_model_free(&v4.m);
}
END_TEST

/* SGLang's V4.1-Flash pool (DSV4PoolConfigurator, SGLang 0.5.23), worked from its code. KV sources
 * 2, 8 and 14 at ratio 2 and 20 at ratio 1; 40 backbone layers; pages of 256 tokens; 256 requests
 * a node. Each source's full token is its compressed slot and a 68-byte FP4 index key
 * (128 / 2 + 128 / 32) over its ratio. The window is a fixed pool sized from the request cap,
 * (128 + 128 + 256 + 256) a request, two prefill chunks and a page, and 4 prefix tails a request of
 * 128 + 256 slots, in every layer.
 *  - H200, tensor-parallel attention: V4's layout everywhere, a 584-byte slot in pages padded to
 *    576 B: 128 · 584 = 74,752 → 74,880 (130 · 576), 585 a slot; 256 · 584 → 149,760, 585 too. A
 *    full token 3 · (585 + 68) / 2 + (585 + 68) = 1,632.5 B. Window: 768 · 256 + 2 · 8,192 + 256 +
 *    4 · 256 · 384 = 606,464 slots of 40 · 585 B. Pair states: round_up(257 · 2 + 3, 2) = 518 rows
 *    of 2 · 512 float32 in 3 layers. Padding: a page of slots and page / M + 64 index slots in each
 *    source, 149,760 + 320 · 68 + 3 · (149,760 + 192 · 68).
 *  - B200, data-parallel attention (flashmla_mega): the window in V41's 528-byte slots (pages to
 *    512 B, none padded at 256 tokens), the compressed slots in V41_FP4's 288: a full token 3 · (288
 *    + 68) / 2 + 356 = 890 B. 32 requests a worker and a 16,384 / 8 = 2,048-token chunk: 768 · 32 +
 *    2 · 2,048 + 256 + 4 · 32 · 384 = 78,080 slots of 40 · 528 B; pair states round_up(33 · 2 + 3,
 *    2) = 70 rows; index pages of 128: 73,728 + 384 · 68 + 3 · (73,728 + 256 · 68). */
START_TEST(test_sglang_v41_pool_is_its_sources_slots_after_the_window_cap)
{
    static const struct {
        const char *cmd, *split, *cache;
        double bpft, fixed, running;
    } cases[] = {
        {"serving --engine sglang --gpu h200 --weights fp8 --format json ref/configs/deepseek-v4.1-flash.json",
         "tp", "v4-fp8", 3 * (585 + 68) / 2.0 + (585 + 68),
         606464.0 * 40 * 585 + 518.0 * 1024 * 4 * 3 + 149760 + 320 * 68 + 3 * (149760 + 192 * 68), 256},
        {"serving --engine sglang --gpu b200 --weights fp8 --format json ref/configs/deepseek-v4.1-flash.json",
         "dp", "v41-fp4", 3 * (288 + 68) / 2.0 + (288 + 68),
         78080.0 * 40 * 528 + 70.0 * 1024 * 4 * 3 + 73728 + 384 * 68 + 3 * (73728 + 256 * 68), 32},
    };
    ck_assert(cases[1].bpft == 890);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cJSON *root;
        const cJSON *l = run_json(cases[i].cmd, cases[i].split, &root);
        const double pool = num(l, "cache_gib_per_gpu") * GIB - cases[i].fixed;
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(l, "kv_cache")->valuestring, cases[i].cache);
        ck_assert(num(l, "page") == 256);
        ck_assert_msg(num(l, "bytes_per_token_per_gpu") == cases[i].bpft, "%s %.6f", cases[i].split,
                      num(l, "bytes_per_token_per_gpu"));
        ck_assert_msg(num(l, "state_bytes_per_gpu") == cases[i].fixed, "%s %.0f", cases[i].split,
                      num(l, "state_bytes_per_gpu"));
        ck_assert(num(l, "window_bytes_per_sequence_per_gpu") == 0);
        ck_assert(num(l, "tokens_per_gpu") == floor(floor(pool / cases[i].bpft) / 256) * 256);
        ck_assert(num(l, "sequences_per_gpu") == fmin(floor(pool / (131072 * cases[i].bpft)), cases[i].running));
        cJSON_Delete(root);
    }
}
END_TEST

/* V4.1 under vLLM 0.34.0 (DeepseekV4Attention.__init__: V4.1's records only on SM 10x): on Hopper
 * V4's 584-byte record and 132-byte FP8 index key (the MXFP4 key needs SM 100 and is not the "auto"
 * default anywhere, dsa_indexer_uses_fp4), as v4-fp8; on SM 100 mega attention's 288-byte NVFP4
 * compressed and 528-byte window records, as v41-fp4, and no other; SGLang's row v4-fp8 (its rank
 * picks V4.1's records per split). A block is 64 tokens on Hopper and 128 from SM 100 (the kernel blocks of
 * the V4.1 FlashMLA, mega-attention and indexer backends). */
START_TEST(test_vllm_stores_v41_in_v4s_record_on_hopper_and_in_v41s_on_sm100)
{
    ch09_config v41 = ch09_load("deepseek-v4.1-flash.json");
    ck_assert_uint_eq(kvl_v4_engine_row_bytes(&v41.m), 448 + 64 * 2 + 448 / 64 + 1);
    ck_assert_uint_eq(kvl_v4_engine_index_key_bytes(&v41.m), 128 + 128 / 128 * 4);
    kvl_cache_layout c;
    ck_assert_int_eq(kvl_engine_cache_layout(&c, KVL_ENGINE_VLLM, &v41.m, 9, -1), KVL_OK);
    ck_assert_int_eq(c, KVL_CACHE_V4_FP8);
    ck_assert_int_eq(kvl_engine_cache_layout(&c, KVL_ENGINE_VLLM, &v41.m, 10, -1), KVL_OK);
    ck_assert_int_eq(c, KVL_CACHE_V41_FP4);
    ck_assert_int_eq(kvl_engine_cache_layout(&c, KVL_ENGINE_SGLANG, &v41.m, 9, -1), KVL_OK);
    ck_assert_int_eq(c, KVL_CACHE_V4_FP8);
    ck_assert_int_eq(kvl_engine_cache_layout(&c, KVL_ENGINE_VLLM, &v41.m, 9, KVL_CACHE_V41_FP4), KVL_EINVAL);
    ck_assert_int_eq(kvl_engine_cache_layout(&c, KVL_ENGINE_VLLM, &v41.m, 10, KVL_CACHE_V4_FP8), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "its row is v41-fp4"), "%s", kvl_error());
    ck_assert_uint_eq(kvl_engine_page(KVL_ENGINE_VLLM, &v41.m, 9), 64);
    ck_assert_uint_eq(kvl_engine_page(KVL_ENGINE_VLLM, &v41.m, 10), 128);
    kvl_model_free(&v41.m);
}
END_TEST

/* V4.1 is refused where its engine's pool is not priced: vLLM on SM 100 where mega attention
 * declines the split (16 ranks of V4.1-Flash's 64 heads leave 4 a rank and 8 o_groups do not split
 * 16 ways: DeepseekV4MegaAttnAttention.is_available_for), whose FlashMLA pool is not priced; SGLang
 * without the GPU's memory (its window cap counts prefill chunks). */
START_TEST(test_v41_is_refused_where_its_engine_pool_is_not_priced)
{
    ch09_config v41 = ch09_load("deepseek-v4.1-flash.json");
    kvl_deployment d = {.gpus = 8, .tp = 8, .page = 256, .engine = KVL_ENGINE_SGLANG, .sm = 9};
    kvl_rank_cache r;
    ck_assert_int_eq(kvl_rank_cache_of(&r, &v41.m, &v41.f, &d), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "GPU's memory") && strstr(kvl_error(), "deepseek-v4.1-flash.json"), "%s",
                  kvl_error());
    d.capacity_mib = 143771;
    ck_assert_int_eq(kvl_rank_cache_of(&r, &v41.m, &v41.f, &d), KVL_OK);
    ck_assert_int_eq(kvl_engine_cache_layout(&v41.m.kv_cache, KVL_ENGINE_VLLM, &v41.m, 10, -1), KVL_OK);
    d = (kvl_deployment){.gpus = 16, .tp = 16, .page = 128, .engine = KVL_ENGINE_VLLM};
    ck_assert_int_eq(kvl_rank_cache_of(&r, &v41.m, &v41.f, &d), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "tp = 16") && strstr(kvl_error(), "is_available_for") &&
                      strstr(kvl_error(), "vLLM 0.34.0") && strstr(kvl_error(), "deepseek-v4.1-flash.json"),
                  "%s", kvl_error());
    d.tp = 8;
    ck_assert_int_eq(kvl_rank_cache_of(&r, &v41.m, &v41.f, &d), KVL_OK);
    kvl_model_free(&v41.m);
}
END_TEST

/* V4.1-Flash's blocks in vLLM 0.34.0, SM major `sm`: the layout vLLM stores there, then the pool. */
static kvl_vllm_v4_blocks v41_blocks(int sm)
{
    ch09_config v41 = ch09_load("deepseek-v4.1-flash.json");
    ck_assert_int_eq(kvl_engine_cache_layout(&v41.m.kv_cache, KVL_ENGINE_VLLM, &v41.m, sm, -1), KVL_OK);
    kvl_vllm_v4_blocks b;
    kvl_vllm_v4_blocks_of(&b, &v41.m, 0);
    kvl_model_free(&v41.m);
    return b;
}

/* vLLM 0.34.0's V4.1 pool on Hopper, worked from its specs for V4.1-Flash: KV sources 2, 8 and 14
 * at ratio 2 and 20 at ratio 1, each an index source too; 40 backbone layers. Every compressed
 * layer and index key is an MLAAttentionSpec of the cache block, 64 tokens (each backend takes
 * vLLM's default 64), a ratio-M source's page 64 / M records padded to 576 B: ratio 2, 32 · 584 =
 * 18,688 → 19,008 and keys 32 · 132 = 4,224 → 4,608; ratio 1, 64 · 584 = 37,376 → 37,440 and keys
 * 8,448 → 8,640. One block size, so one bucket of four page sizes of 3, 3, 1 and 1 layers: not a
 * repeating pattern, kept whole, 3 · 19,008 + 3 · 4,608 + 37,440 + 8,640 = 116,928 B. No bucket
 * of several page sizes repeats, so no repeat count: the 40 window pages (32 rows, 18,688 →
 * 19,008) and the 3 rings (8 rows of 2 · 512 float32, 32,768) are state buckets, split to fit that
 * block: 116,928 / 19,008 = 6 window layers a group, 7 groups; 116,928 / 32,768 = 3 rings, one
 * group. A block is 116,928 B (no block stride alignment below SM 100), a token draws 1 / 64 of one,
 * and a sequence holds 7 · (⌈127 / 32⌉ + 1) window blocks and one ring block, 36. */
START_TEST(test_vllm_v41_blocks_are_its_widest_group_of_pages)
{
    const kvl_vllm_v4_blocks b = v41_blocks(9);
    ck_assert_uint_eq(b.repeats, 0);
    ck_assert_uint_eq(b.compressed_bytes, 3 * 19008 + 3 * 4608 + 37440 + 8640);
    ck_assert_uint_eq(b.block_bytes, 116928);
    ck_assert(b.token_blocks == 1.0 / 64);
    ck_assert_uint_eq(b.window_blocks, 7 * (4 + 1) + 1);
}
END_TEST

/* The same pool on SM 100 under mega attention: 128-token blocks (mega attention's and the
 * indexer's kernel block); a ratio-2 source's page 64 NVFP4 records, 64 · 288 = 18,432 (36 · 512),
 * its keys 64 · 132 = 8,448 → 8,704 at 512-byte alignment; ratio 1, 128 · 288 = 36,864 and keys
 * 16,896 (33 · 512). The whole bucket: 3 · 18,432 + 3 · 8,704 + 36,864 + 16,896 = 135,168 B. Window
 * pages of 32 MXFP8 rows, 32 · 528 = 16,896: 135,168 / 16,896 = 8 a group, 5 groups; rings 135,168
 * / 32,768 = 4 a group, one. The block rounds 135,168 up to the lcm of the block stride alignments,
 * the window's lcm(528, 288) = 3,168 and the sparse-logits index keys' 256: 25,344, so 6 · 25,344
 * = 152,064 B; a token draws 1 / 128 of one, 1,188 B, and a sequence holds 5 · (⌈127 / 32⌉ + 1) +
 * 1 = 26 window and ring blocks. */
START_TEST(test_vllm_v41_blocks_on_sm100_are_mega_attentions_records)
{
    const kvl_vllm_v4_blocks b = v41_blocks(10);
    ck_assert_uint_eq(b.repeats, 0);
    ck_assert_uint_eq(b.compressed_bytes, 3 * 18432 + 3 * 8704 + 36864 + 16896);
    ck_assert_uint_eq(b.block_bytes, 6 * 25344);
    ck_assert_uint_eq(b.block_bytes, 152064);
    ck_assert(b.token_blocks == 1.0 / 128);
    ck_assert_uint_eq(b.window_blocks, 5 * (4 + 1) + 1);
}
END_TEST

/* vLLM's V4.1-Flash pool on 8 GPUs with a stated 6 GiB peak, FP8 weights, sequences of 131,072
 * tokens: whole blocks of `block` bytes, one a page of `page` tokens; a sequence's 131,072 / page
 * blocks and its window and ring blocks; under data-parallel attention each of the 8 ranks holds
 * its own sequences. */
static void assert_v41_pool(const char *gpu, double page, double block, double window_blocks, double per_token)
{
    static const char *const split[] = {"tp", "dp"};
    const double seq = (131072 / page + window_blocks) * block;
    for (int dp = 0; dp < 2; dp++) {
        static char cmd[256];
        snprintf(cmd, sizeof cmd, "serving --engine vllm --gpu %s --weights fp8 --activation-peak-gib 6 "
                 "--format json ref/configs/deepseek-v4.1-flash.json", gpu);
        cJSON *root;
        const cJSON *l = run_json(cmd, split[dp], &root);
        const double cache = num(l, "cache_gib_per_gpu") * GIB;
        ck_assert(num(l, "page") == page);
        ck_assert(num(l, "bytes_per_token_per_gpu") == block / page);
        ck_assert(num(l, "bytes_per_token_per_gpu") == per_token);
        ck_assert(num(l, "window_bytes_per_sequence_per_gpu") == window_blocks * block);
        ck_assert(num(l, "sequence_bytes_per_gpu") == seq);
        ck_assert_msg(num(l, "tokens_per_gpu") == floor(cache / block) * page, "%s %.0f", split[dp],
                      num(l, "tokens_per_gpu"));
        ck_assert(num(l, "sequences_per_node") == floor(cache / seq) * (dp ? 8 : 1));
        cJSON_Delete(root);
    }
}

/* On 8 H200s: blocks of 116,928 B a 64-token page, 1,827 B a token, 36 window and ring blocks. */
START_TEST(test_vllm_v41_pool_is_one_block_a_64_token_page_on_hopper)
{
    assert_v41_pool("h200", 64, 116928, 36, 1827);
}
END_TEST

/* On 8 B200s: blocks of 152,064 B a 128-token page, 1,188 B a token, 26 window and ring blocks; a
 * sequence (1,024 + 26) · 152,064 = 159,667,200 B. Under tensor parallelism the 90.34 GiB a GPU
 * keeps beside 64.8 GiB of FP8 weights (97,004,221,943 B) hold 607 of them (607.54). */
START_TEST(test_vllm_v41_pool_on_b200_is_one_block_a_128_token_page)
{
    assert_v41_pool("b200", 128, 152064, 26, 1188);
    cJSON *root;
    const cJSON *tp = run_json("serving --engine vllm --gpu b200 --weights fp8 --activation-peak-gib 6 "
                               "--format json ref/configs/deepseek-v4.1-flash.json",
                               "tp", &root);
    ck_assert(num(tp, "sequence_bytes_per_gpu") == 159667200);
    ck_assert(num(tp, "sequences_per_node") == 607);
    cJSON_Delete(root);
}
END_TEST

/* V4.1's wq_a and wkv, d 5,120 · (Dq' 1,280 + Dh 512) a layer over 40 layers, fused and whole on every
 * rank under vLLM (DeepseekV4Attention's fused_wqa_wkv with disable_tp); the rest of attention split
 * over the 8 ranks as the plain engine splits it. */
START_TEST(test_vllm_keeps_v41s_fused_projection_whole)
{
    ch09_config v41 = ch09_load("deepseek-v4.1-flash.json");
    const double fused = 40.0 * 5120 * (1280 + 512), a = (double)v41.p.attention;
    kvl_deployment d = {.gpus = 8, .tp = 8, .page = 128, .engine = KVL_ENGINE_PLAIN};
    const double plain = kvl_engine_weight_bytes(&v41.p, &v41.m, &d, KVL_WEIGHTS_FP8, KVL_WEIGHTS_FP8, 0);
    d.engine = KVL_ENGINE_VLLM;
    const double vllm = kvl_engine_weight_bytes(&v41.p, &v41.m, &d, KVL_WEIGHTS_FP8, KVL_WEIGHTS_FP8, 0);
    const double more = fp8(over8(a - fused) + fused) - fp8(over8(a));
    ck_assert_msg(fabs(vllm - plain - more) < 2, "%.1f against %.1f", vllm - plain, more);
    kvl_model_free(&v41.m);
}
END_TEST

/* Every config of ref/configs/ prints under both engines in FP8 weights on every GPU, as text and as
 * JSON, and with no config named an engine prints them all. A split whose weights (and vLLM's peak)
 * take all of the engine's fraction, or leave less than the pools it sets aside first, prints as
 * not fitting, with no tokens and the reason: V3's 84 GB a GPU on an H100's 80; V4.1 on an H100,
 * whose 64.8 GiB a GPU under tensor parallelism fit vLLM's 0.9 less a 6 GiB peak but leave SGLang's
 * 0.818 too little for its 13.2 GiB window pool, and whose 69.8 (SGLang) and 72 GiB (vLLM) under DP
 * attention fit neither. */
START_TEST(test_every_config_prints_under_both_engines_on_every_gpu)
{
    DIR *dir = opendir(kvl_path("ref/configs"));
    ck_assert_ptr_nonnull(dir);
    static const char *const engines[] = {"vllm --activation-peak-gib 6", "sglang"};
    static const char *const gpus[] = {"h100", "h200", "b200"};
    const struct dirent *e;
    size_t configs = 0;
    while ((e = readdir(dir))) {
        const size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".json")) continue;
        configs++;
        const int v41 = strstr(e->d_name, "v4.1") != NULL;
        for (int k = 0; k < 2; k++)
            for (int g = 0; g < 3; g++) {
                static char cmd[512], out[65536], err[4096];
                snprintf(cmd, sizeof cmd, "serving --engine %s --gpu %s --weights fp8 ref/configs/%s", engines[k],
                         gpus[g], e->d_name);
                ck_assert_msg(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err) == 0, "%s: %s", cmd, err);
                ck_assert_msg(strstr(out, "tokens/GPU"), "%s: %s", cmd, out);
                strcat(cmd, " --format json");
                cJSON *root;
                const cJSON *l;
                for (int split = 0; split < 2; split++) {
                    l = run_json(cmd, split ? "dp" : "tp", &root);
                    const double peak = k == 0 ? 6 * GIB : 0;
                    const double memory = num(cJSON_GetObjectItemCaseSensitive(root, "inputs"), "memory_gib");
                    const double room = memory * GIB * num(l, "memory_fraction");
                    const cJSON *state = cJSON_GetObjectItemCaseSensitive(l, "state_bytes_per_gpu");
                    const double weights = num(l, "weights_gib_per_gpu") * GIB, fixed = state ? state->valuedouble : 0;
                    const int fits = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(l, "fits"));
                    ck_assert_msg(fits == (weights + peak + fixed < room), "%s", cmd);
                    if (v41 && g == 0) ck_assert_msg(fits == (k == 0 && !split), "%s", cmd);
                    if (!fits)
                        ck_assert(num(l, "tokens_per_gpu") == 0 && num(l, "sequences_per_node") == 0 &&
                                  strstr(cJSON_GetObjectItemCaseSensitive(l, "misfit")->valuestring,
                                         weights + peak < room ? "sets aside before its pool" : "leave no cache"));
                    cJSON_Delete(root);
                }
            }
    }
    closedir(dir);
    ck_assert_uint_eq(configs, 6);
    for (int k = 0; k < 2; k++) {
        static char cmd[128], out[131072], err[4096];
        snprintf(cmd, sizeof cmd, "serving --engine %s --format json", engines[k]);
        ck_assert_msg(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err) == 0, "%s: %s", cmd, err);
        cJSON *root = cJSON_Parse(out);
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "layouts")), 2 * 6);
        cJSON_Delete(root);
    }
}
END_TEST

/* The JSON is one strict JSON text: the engine, the inputs, and a layouts array of one tp and one dp
 * entry per model, each with the figures named. */
START_TEST(test_serving_json_is_one_object_with_a_layout_per_split)
{
    static char out[65536], err[4096];
    ck_assert_int_eq(kvl_run("serving --format json --gpu h200 ref/configs/deepseek-v3.json "
                             "ref/configs/deepseek-llm-67b.json",
                             NULL, out, sizeof out, err, sizeof err),
                     0);
    ck_assert_msg(kvl_json_text_check(out, strlen(out), "serving") == KVL_OK, "%s", kvl_error());
    cJSON *root = cJSON_Parse(out);
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(root, "engine")->valuestring, "plain");
    ck_assert(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "inputs")));
    const cJSON *layouts = cJSON_GetObjectItemCaseSensitive(root, "layouts");
    ck_assert_int_eq(cJSON_GetArraySize(layouts), 4);
    static const char *const keys[] = {"bytes_per_token_per_gpu", "weights_gib_per_gpu", "cache_gib_per_gpu",
                                       "tokens_per_gpu", "sequences_per_node"};
    for (int i = 0; i < 4; i++) {
        const cJSON *l = cJSON_GetArrayItem(layouts, i);
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(l, "attention")->valuestring, i % 2 ? "dp" : "tp");
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) (void)num(l, keys[k]);
    }
    cJSON_Delete(root);
}
END_TEST

START_TEST(test_serving_refuses_an_engine_plan_it_cannot_price)
{
    const char *cmd[] = {"serving --engine tgi ref/configs/deepseek-v3.json",
                         "serving --gpu a100 ref/configs/deepseek-v3.json",
                         "serving --speculative eagle ref/configs/deepseek-v3.json",
                         "serving --format yaml",
                         "serving --engine vllm ref/configs/deepseek-v3.json",
                         "serving --activation-peak-gib 4 ref/configs/deepseek-v3.json",
                         "serving --engine sglang --tp 4 ref/configs/deepseek-v3.json",
                         "serving --engine sglang --budget-gib 10 ref/configs/deepseek-v3.json",
                         "serving --engine sglang --speculative mtp ref/configs/deepseek-v4.1-flash.json",
                         "serving --engine vllm --gpu b200 --activation-peak-gib 6 --cache v4-fp8 "
                         "ref/configs/deepseek-v4.1-flash.json",
                         "serving --engine sglang --page 64 ref/configs/deepseek-v4-flash.json",
                         "serving --engine vllm --activation-peak-gib 6 --cache v41-fp4 "
                         "ref/configs/deepseek-v4-flash.json",
                         "serving --engine sglang --cache v32-fp8 ref/configs/deepseek-v3.json",
                         "serving --speculative mtp ref/configs/deepseek-v3.json",
                         "serving --speculative mtp --mtp-layers 1 ref/configs/deepseek-llm-67b.json",
                         "serving --mtp-layers 1 ref/configs/deepseek-v3.json",
                         "serving --engine sglang --memory-gib 40 ref/configs/deepseek-llm-67b.json",
                         "serving --speculative mtp ref/configs/deepseek-v4-flash.json",
                         "serving --engine vllm --activation-peak-gib 6 --page 128 "
                         "ref/configs/deepseek-v4.1-flash.json",
                         "serving --engine vllm --activation-peak-gib 6 --speculative mtp --mtp-layers 1 "
                         "ref/configs/deepseek-v4.1-flash.json"};
    const char *named[] = {"--engine", "--gpu", "--speculative", "--format", "--activation-peak-gib",
                           "--activation-peak-gib", "--tp", "--budget-gib", "deepseek-v4.1-flash.json",
                           "deepseek-v4.1-flash.json", "page = 64", "deepseek-v4-flash.json",
                           "v32-fp8", "num_nextn_predict_layers", "deepseek-llm-67b.json", "--mtp-layers",
                           "--engine sglang", "deepseek-v4-flash.json", "page = 128",
                           "deepseek-v4.1-flash.json"};
    const char *value[] = {"tgi", "a100", "eagle", "yaml", "vllm", "plain", "4", "sglang", "V4.1 model",
                           "its row is v41-fp4", "256", "v41-fp4",
                           "mla-fp8", "--mtp-layers", "MHA", "not given", "below 60 GiB",
                           "plain engine", "blocks of 64", "V4.1"};
    ch09_assert_refused(cmd, named, value, sizeof cmd / sizeof *cmd);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch09_engines");
    TCase *memory = tcase_create("memory");
    tcase_add_test(memory, test_sglang_reserve_and_fraction_follow_its_heuristic);
    tcase_add_test(memory, test_sglang_dp_pool_is_its_fraction_less_its_weights);
    tcase_add_test(memory, test_vllm_pool_is_its_utilization_less_weights_and_the_stated_peak);
    tcase_add_test(memory, test_sglang_reserves_nothing_more_for_the_draft);
    suite_add_tcase(s, memory);
    TCase *rows = tcase_create("rows");
    tcase_add_test(rows, test_the_dense_mla_fp8_row_is_576_bytes_and_the_sparse_row_656);
    tcase_add_test(rows, test_sglang_picks_a_dsa_cache_dtype_by_gpu_generation);
    tcase_add_test(rows, test_the_mtp_draft_layer_is_one_more_caching_layer);
    tcase_add_test(rows, test_each_engine_pages_as_its_default_backend_does);
    suite_add_tcase(s, rows);
    TCase *v4 = tcase_create("v4");
    tcase_add_test(v4, test_v4_engine_entry_is_584_bytes_and_its_index_key_132);
    tcase_add_test(v4, test_vllm_v4_blocks_are_its_widest_group_of_pages);
    tcase_add_test(v4, test_vllm_v4_pool_is_whole_blocks_of_its_widest_group);
    tcase_add_test(v4, test_sglang_v4_pool_is_full_tokens_after_its_c128_states);
    tcase_add_test(v4, test_v4_mtp_draft_as_each_engine_caches_it);
    tcase_add_test(v4, test_vllm_stores_v41_in_v4s_record_on_hopper_and_in_v41s_on_sm100);
    tcase_add_test(v4, test_sglang_v41_pool_is_its_sources_slots_after_the_window_cap);
    tcase_add_test(v4, test_v41_is_refused_where_its_engine_pool_is_not_priced);
    tcase_add_test(v4, test_vllm_v41_blocks_are_its_widest_group_of_pages);
    tcase_add_test(v4, test_vllm_v41_blocks_on_sm100_are_mega_attentions_records);
    tcase_add_test(v4, test_vllm_v41_pool_is_one_block_a_64_token_page_on_hopper);
    tcase_add_test(v4, test_vllm_v41_pool_on_b200_is_one_block_a_128_token_page);
    tcase_add_test(v4, test_vllm_keeps_v41s_fused_projection_whole);
    tcase_set_timeout(v4, 60);
    suite_add_tcase(s, v4);
    TCase *weights = tcase_create("weights");
    tcase_add_test(weights, test_engines_keep_the_fused_projection_and_dp_embedding_whole);
    tcase_add_test(weights, test_engines_keep_the_dsa_indexer_whole_on_every_rank);
    suite_add_tcase(s, weights);
    TCase *out = tcase_create("output");
    tcase_add_test(out, test_serving_json_is_one_object_with_a_layout_per_split);
    tcase_add_test(out, test_serving_refuses_an_engine_plan_it_cannot_price);
    tcase_add_test(out, test_every_config_prints_under_both_engines_on_every_gpu);
    tcase_set_timeout(out, 120);
    suite_add_tcase(s, out);
    return s;
}
