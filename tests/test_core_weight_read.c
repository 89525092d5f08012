/* Weights out of checkpoint files: DeepSeek's FP8 weights with one scale per 128×128 block dequantise
 * to the definition (a plain loop over the value formula, here) on ragged edges, under both scale
 * namings and both scale dtypes; F4 weights through their E8M0 scales per 32 likewise; what no writer
 * means as a weight (a scale dtype, two scales, a scale beside a plain weight) is refused; and every MLA and DSA weight lands in its struct field under both the
 * Hugging Face and the inference naming, every V4 weight under the inference naming through a sharded
 * index, and every V4.1 weight of each layer mode under its inference naming.
 *
 * The dequantised value decode(q)·s is a product of two floats with 4 and 24 significant bits, exact in
 * double, so float32's one rounding of it is compared exactly: no tolerance. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "config.h"
#include "v41.h"
#include "element.h"
#include "rng.h"
#include "safetensors.h"
#include "status.h"
#include "v4.h"
#include "weight_read.h"
#include "weights_load.h"

static void make_dir(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/kvl_wr_XXXXXX");
    ck_assert(mkdtemp(dir) != NULL);
}

static void rm_dir(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* float8_e4m3fn by its value formula: (−1)^s 2^(e−7)(1 + m/8), subnormal 2^−6·m/8. */
static double e4m3_value(uint8_t c)
{
    int e = (c >> 3) & 15, m = c & 7;
    double v = e ? ldexp(1 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return (c & 0x80) ? -v : v;
}

/* R×C codes of seeded normal values, each block divided by its own scale (a power of two near
 * amax/448, so the codes use the whole E4M3 range). */
static void quantise(uint8_t *q, float *scale, size_t R, size_t C, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    size_t BR = (R + 127) / 128, BC = (C + 127) / 128;
    for (size_t b = 0; b < BR * BC; b++) scale[b] = ldexpf(1.0f, (int)(b % 5) - 8);
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++)
            q[r * C + c] = kvf_e4m3_encode_sat((float)(kvl_rng_normal(&rng) * 100.0));
}

static void expect_dequant_exact(const float *got, const uint8_t *q, const float *scale, size_t R, size_t C)
{
    size_t BC = (C + 127) / 128;
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++) {
            double want = e4m3_value(q[r * C + c]) * (double)scale[(r / 128) * BC + c / 128];
            if ((double)got[r * C + c] != (double)(float)want)
                ck_abort_msg("w[%zu][%zu] = %.9g, want %.9g", r, c, got[r * C + c], want);
        }
}

/* A checkpoint whose code rotates as the modules do: pairs (2i, 2i+1), no factor on cos and sin. */
static const kvl_rope_config as_stored = {.attention_factor = 1, .interleaved = 1};

START_TEST(test_fp8_blocks_dequantise_to_the_definition_on_ragged_edges)
{
    enum { R = 130, C = 300 };   /* blocks 128 + 2 rows, 128 + 128 + 44 columns */
    static uint8_t q[R * C];
    static float scale[2 * 3], got[R * C];
    quantise(q, scale, R, C, 13);
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    const kvl_st_entry e[] = {{"model.layers.0.self_attn.q_a_proj.weight", KVL_ST_F8_E4M3, 2, {R, C}, q},
                              {"model.layers.0.self_attn.q_a_proj.weight_scale_inv", KVL_ST_F32, 2, {2, 3}, scale}};
    ck_assert_msg(kvl_st_write(path, e, 2, NULL, 0) == KVL_OK, "%s", kvl_error());
    kvl_st_checkpoint c;
    ck_assert_msg(kvl_st_checkpoint_open(&c, dir) == KVL_OK, "%s", kvl_error());
    const size_t shape[2] = {R, C};
    ck_assert_msg(kvl_read_weight(got, &c, e[0].name, 2, shape) == KVL_OK, "%s", kvl_error());
    expect_dequant_exact(got, q, scale, R, C);
    kvl_st_checkpoint_close(&c);
    rm_dir(dir);
}
END_TEST

START_TEST(test_e8m0_scales_under_the_inference_naming_dequantise_the_same)
{
    enum { R = 129, C = 128 };
    static uint8_t q[R * C];
    static float scale[2], got[R * C];
    quantise(q, scale, R, C, 14);
    uint8_t e8m0[2];
    for (int i = 0; i < 2; i++) e8m0[i] = kvf_e8m0_encode(scale[i]);   /* scales are powers of two: exact */
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    const kvl_st_entry e[] = {{"layers.3.attn.wkv.weight", KVL_ST_F8_E4M3, 2, {R, C}, q},
                              {"layers.3.attn.wkv.scale", KVL_ST_F8_E8M0, 2, {2, 1}, e8m0}};
    ck_assert_msg(kvl_st_write(path, e, 2, NULL, 0) == KVL_OK, "%s", kvl_error());
    kvl_st_checkpoint c;
    ck_assert_msg(kvl_st_checkpoint_open(&c, path) == KVL_OK, "%s", kvl_error());
    const size_t shape[2] = {R, C};
    ck_assert_msg(kvl_read_weight(got, &c, e[0].name, 2, shape) == KVL_OK, "%s", kvl_error());
    expect_dequant_exact(got, q, scale, R, C);
    kvl_st_checkpoint_close(&c);
    rm_dir(dir);
}
END_TEST

START_TEST(test_missing_or_misshapen_scales_and_weights_are_named)
{
    static uint8_t q[4 * 200];
    static float s[4];
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    const kvl_st_entry e[] = {{"a.weight", KVL_ST_F8_E4M3, 2, {4, 200}, q},
                              {"b.weight", KVL_ST_F8_E4M3, 2, {4, 200}, q},
                              {"b.weight_scale_inv", KVL_ST_F32, 2, {1, 1}, s}};
    ck_assert_msg(kvl_st_write(path, e, 3, NULL, 0) == KVL_OK, "%s", kvl_error());
    kvl_st_checkpoint c;
    ck_assert_msg(kvl_st_checkpoint_open(&c, path) == KVL_OK, "%s", kvl_error());
    static float w[4 * 200];
    size_t shape[2] = {4, 200};
    ck_assert_int_eq(kvl_read_weight(w, &c, "a.weight", 2, shape), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "\"a.weight\" is F8_E4M3 but has no weight_scale_inv") != NULL, "%s", kvl_error());
    ck_assert_int_eq(kvl_read_weight(w, &c, "b.weight", 2, shape), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "\"b.weight_scale_inv\": shape [1, 1], the config needs [1, 2]") != NULL, "%s",
                  kvl_error());
    shape[1] = 100;
    ck_assert_int_eq(kvl_read_weight(w, &c, "b.weight", 2, shape), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "\"b.weight\": shape [4, 200], the config needs [4, 100]") != NULL, "%s", kvl_error());
    ck_assert_int_eq(kvl_read_weight(w, &c, "c.weight", 2, shape), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "\"c.weight\" not found") != NULL, "%s", kvl_error());
    kvl_st_checkpoint_close(&c);
    rm_dir(dir);
}
END_TEST

/* E2M1 by its definition: sign, 2 exponent bits (bias 1), 1 mantissa bit; exponent 0 is subnormal. */
static double e2m1_value(uint8_t c)
{
    int e = (c >> 1) & 3, m = c & 1;
    double v = e ? ldexp(1.0 + m / 2.0, e - 1) : m / 2.0;
    return c & 8 ? -v : v;
}

/* An F4 weight [3][64] with an F8_E8M0 `.scale` [3][2] (MXFP4, as DeepSeek's V4 stores FP4): every value
 * is e2m1(code) · 2^(scale − 127), exact in float32. */
START_TEST(test_fp4_weights_dequantise_through_their_e8m0_scales_per_32)
{
    enum { R = 3, C = 64 };
    uint8_t packed[R * C / 2], scale[R * 2];
    kvl_rng rng;
    kvl_rng_seed(&rng, 41);
    for (size_t i = 0; i < sizeof packed; i++) packed[i] = (uint8_t)(kvl_rng_next_u64(&rng) & 0xff);
    for (size_t i = 0; i < sizeof scale; i++) scale[i] = (uint8_t)(120 + i);
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    const kvl_st_entry e[] = {{"layers.0.attn.wkv.weight", KVL_ST_F4, 2, {R, C}, packed},
                              {"layers.0.attn.wkv.scale", KVL_ST_F8_E8M0, 2, {R, 2}, scale}};
    ck_assert_msg(kvl_st_write(path, e, 2, NULL, 0) == KVL_OK, "%s", kvl_error());
    kvl_st_checkpoint c;
    ck_assert_msg(kvl_st_checkpoint_open(&c, path) == KVL_OK, "%s", kvl_error());
    float got[R * C];
    const size_t shape[2] = {R, C};
    ck_assert_msg(kvl_read_weight(got, &c, e[0].name, 2, shape) == KVL_OK, "%s", kvl_error());
    for (size_t r = 0; r < R; r++)
        for (size_t k = 0; k < C; k++) {
            size_t i = r * C + k;
            uint8_t code = (uint8_t)(packed[i / 2] >> (i % 2 ? 4 : 0) & 0xf);
            double want = e2m1_value(code) * ldexp(1.0, scale[r * 2 + k / 32] - 127);
            if ((double)got[i] != want) ck_abort_msg("w[%zu][%zu] = %g, want %g", r, k, got[i], want);
        }
    kvl_st_checkpoint_close(&c);
    rm_dir(dir);
}
END_TEST

/* What no writer means as a weight is refused naming the tensor: a scale format as the weight, two scale
 * tensors beside one weight, a scale beside a plain weight, an F4 weight without its scales. */
START_TEST(test_weights_a_writer_cannot_mean_are_refused_by_name)
{
    static uint8_t q[4 * 64 * 2];   /* as many bytes as the BF16 one needs */
    static float s[1] = {1};
    static uint8_t e8[4 * 2] = {127, 127, 127, 127, 127, 127, 127, 127};
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    const kvl_st_entry e[] = {{"a.weight", KVL_ST_F8_E8M0, 2, {4, 64}, q},
                              {"b.weight", KVL_ST_F8_E4M3, 2, {4, 64}, q},
                              {"b.weight_scale_inv", KVL_ST_F32, 2, {1, 1}, s},
                              {"b.scale", KVL_ST_F32, 2, {1, 1}, s},
                              {"c.weight", KVL_ST_BF16, 2, {4, 64}, q},
                              {"c.scale", KVL_ST_F8_E8M0, 2, {4, 2}, e8},
                              {"d.weight", KVL_ST_F4, 2, {4, 64}, q}};
    ck_assert_msg(kvl_st_write(path, e, 7, NULL, 0) == KVL_OK, "%s", kvl_error());
    kvl_st_checkpoint c;
    ck_assert_msg(kvl_st_checkpoint_open(&c, path) == KVL_OK, "%s", kvl_error());
    static float w[4 * 64];
    const size_t shape[2] = {4, 64};
    const char *name[] = {"a.weight", "b.weight", "c.weight", "d.weight"};
    const char *says[] = {"\"a.weight\" is F8_E8M0, not a weight's dtype", "\"b.weight\" has two scale tensors, "
                          "\"b.weight_scale_inv\" and \"b.scale\"", "\"c.weight\" is BF16 with a scale tensor "
                          "\"c.scale\" beside it", "\"d.weight\" is F4 but has no weight_scale_inv or scale"};
    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_eq(kvl_read_weight(w, &c, name[i], 2, shape), KVL_EINVAL);
        ck_assert_msg(strstr(kvl_error(), says[i]) != NULL, "%s", kvl_error());
    }
    kvl_st_checkpoint_close(&c);
    rm_dir(dir);
}
END_TEST

/* ---- name mapping ------------------------------------------------------------------------------- */

static dsa_config toy_dsa(void)
{
    dsa_config c = {.mla = {.d = 32, .n_heads = 2, .q_lora_rank = 16, .kv_lora_rank = 12, .qk_nope = 8, .qk_rope = 4,
                            .v_head = 6, .norm_eps = 1e-6, .softmax_scale = 1.0 / sqrt(12.0)},
                    .index_n_heads = 2, .index_head_dim = 8, .index_topk = 3, .index_norm_eps = 1e-6};
    c.mla.rope.Dr = 4;
    return c;
}

/* Write every field of w as F32 under `prefix` with the given leaves (NULL leaf: field skipped). */
static void write_fields(const char *path, const char *prefix, const char *const *leaf, float *const *ptr,
                         const size_t (*shape)[2], size_t n)
{
    kvl_st_entry e[16];
    char names[16][128];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!leaf[i]) continue;
        snprintf(names[k], sizeof names[k], "%s%s", prefix, leaf[i]);
        e[k] = (kvl_st_entry){names[k], KVL_ST_F32, shape[i][1] ? 2 : 1, {shape[i][0], shape[i][1]}, ptr[i]};
        k++;
    }
    ck_assert_msg(kvl_st_write(path, e, k, NULL, 0) == KVL_OK, "%s", kvl_error());
}

static void expect_same_dsa(const dsa_weights *got, const dsa_weights *want)
{
    ck_assert_uint_eq(got->n_floats, want->n_floats);
    for (size_t i = 0; i < want->n_floats; i++)
        if (got->block[i] != want->block[i]) ck_abort_msg("float %zu of the weights block differs", i);
}

static void check_naming(int hf)
{
    dsa_config c = toy_dsa();
    const mla_config *m = &c.mla;
    dsa_weights w, got;
    kvl_rng rng;
    kvl_rng_seed(&rng, 5);
    ck_assert_int_eq(dsa_weights_init_random(&w, &c, &rng), KVL_OK);
    size_t Dqk = m->qk_nope + m->qk_rope;
    const char *hf_leaf[] = {"q_a_proj.weight", "q_a_layernorm.weight", "q_b_proj.weight", "kv_a_proj_with_mqa.weight",
                             "kv_a_layernorm.weight", "kv_b_proj.weight", "o_proj.weight", "indexer.wq_b.weight",
                             "indexer.wk.weight", "indexer.k_norm.weight", "indexer.k_norm.bias",
                             "indexer.weights_proj.weight"};
    const char *ds_leaf[] = {"wq_a.weight", "q_norm.weight", "wq_b.weight", "wkv_a.weight", "kv_norm.weight",
                             "wkv_b.weight", "wo.weight", "indexer.wq_b.weight", "indexer.wk.weight",
                             "indexer.k_norm.weight", "indexer.k_norm.bias", "indexer.weights_proj.weight"};
    float *const ptr[] = {w.mla.w_dq, w.mla.q_norm, w.mla.w_uq, w.mla.w_dkv, w.mla.kv_norm, w.mla.w_ukv, w.mla.w_o,
                          w.w_iq, w.w_ik, w.k_norm, w.k_bias, w.w_iw};
    const size_t shape[][2] = {{16, 32}, {16, 0}, {2 * Dqk, 16}, {16, 32}, {12, 0}, {2 * 14, 12}, {32, 12},
                               {16, 16}, {8, 32}, {8, 0}, {8, 0}, {2, 32}};
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_fields(path, hf ? "model.layers.7.self_attn." : "layers.7.attn.", hf ? hf_leaf : ds_leaf, ptr, shape, 12);
    kvl_st_checkpoint ck;
    ck_assert_msg(kvl_st_checkpoint_open(&ck, dir) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(dsa_weights_load(&got, &c, &as_stored, &ck, 7) == KVL_OK, "%s", kvl_error());
    expect_same_dsa(&got, &w);
    dsa_weights_free(&got);

    mla_weights mgot;
    ck_assert_msg(mla_weights_load(&mgot, m, &as_stored, &ck, 7) == KVL_OK, "%s", kvl_error());
    for (size_t i = 0; i < mgot.n_floats; i++) ck_assert(mgot.block[i] == w.mla.block[i]);
    mla_weights_free(&mgot);

    ck_assert_int_eq(mla_weights_load(&mgot, m, &as_stored, &ck, 6), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "layer 6: neither model.layers.6.self_attn.kv_a_proj_with_mqa.weight nor "
                                      "layers.6.attn.wkv_a.weight is present") != NULL, "%s", kvl_error());
    ck_assert_ptr_null(mgot.block);
    mla_config wide = *m;
    wide.kv_lora_rank = 13;
    ck_assert_int_eq(mla_weights_load(&mgot, &wide, &as_stored, &ck, 7), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), hf ? "kv_a_proj_with_mqa.weight\": shape [16, 32], the config needs [17, 32]"
                                         : "wkv_a.weight\": shape [16, 32], the config needs [17, 32]") != NULL, "%s",
                  kvl_error());
    kvl_st_checkpoint_close(&ck);
    dsa_weights_free(&w);
    rm_dir(dir);
}

START_TEST(test_hf_names_fill_every_mla_and_dsa_field)
{
    check_naming(1);
}
END_TEST

START_TEST(test_inference_names_fill_every_mla_and_dsa_field)
{
    check_naming(0);
}
END_TEST

/* V4's inference names (the Hugging Face ones are read by tests/test_reference_hf.c on transformers'
 * own files): a CSA layer of the tiny reference config, every field, read back bit for bit. */
START_TEST(test_inference_names_fill_every_v4_csa_field)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("tests/reference/deepseek_v4_tiny.json")) == KVL_OK, "%s", kvl_error());
    v4_config c;
    ck_assert_msg(v4_config_from_model(&c, &m, 1) == KVL_OK, "%s", kvl_error());
    ck_assert_int_eq(c.kind, KVL_LAYER_CSA);
    v4_weights w, got;
    kvl_rng rng;
    kvl_rng_seed(&rng, 6);
    ck_assert_int_eq(v4_weights_init_random(&w, &c, &rng), KVL_OK);
    size_t d = c.d, H = c.n_heads, Dh = c.head_dim, Dq = c.q_lora_rank, GDo = c.o_groups * c.o_lora_rank, M = 4;
    size_t HI = c.indexer.n_heads, DI = c.indexer.head_dim;
    const char *leaf[] = {"wq_a.weight", "q_norm.weight", "wq_b.weight", "wkv.weight", "kv_norm.weight", "attn_sink",
                          "wo_a.weight", "wo_b.weight", "compressor.wkv.weight", "compressor.wgate.weight",
                          "compressor.ape", "compressor.norm.weight", "indexer.wq_b.weight",
                          "indexer.weights_proj.weight"};
    float *const ptr[] = {w.w_dq, w.q_norm, w.w_uq, w.w_kv, w.kv_norm, w.sinks, w.w_oa, w.w_ob, w.compressor.w_kv,
                          w.compressor.w_gate, w.compressor.ape, w.compressor.norm, w.indexer.w_iq, w.indexer.w_iw};
    const size_t shape[][2] = {{Dq, d}, {Dq, 0}, {H * Dh, Dq}, {Dh, d}, {Dh, 0}, {H, 0}, {GDo, H / c.o_groups * Dh},
                               {d, GDo}, {2 * Dh, d}, {2 * Dh, d}, {M, 2 * Dh}, {Dh, 0}, {HI * DI, Dq}, {HI, d}};
    const char *ileaf[] = {"indexer.compressor.wkv.weight", "indexer.compressor.wgate.weight",
                           "indexer.compressor.ape", "indexer.compressor.norm.weight"};
    float *const iptr[] = {w.indexer.compressor.w_kv, w.indexer.compressor.w_gate, w.indexer.compressor.ape,
                           w.indexer.compressor.norm};
    const size_t ishape[][2] = {{2 * DI, d}, {2 * DI, d}, {M, 2 * DI}, {DI, 0}};
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    write_fields(path, "layers.1.attn.", leaf, ptr, shape, 14);
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    write_fields(path, "layers.1.attn.", ileaf, iptr, ishape, 4);
    FILE *f;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    ck_assert((f = fopen(path, "w")) != NULL);
    fputs("{\"weight_map\": {", f);
    for (size_t i = 0; i < 14; i++) fprintf(f, "\"layers.1.attn.%s\": \"model-00001-of-00002.safetensors\", ", leaf[i]);
    for (size_t i = 0; i < 4; i++)
        fprintf(f, "\"layers.1.attn.%s\": \"model-00002-of-00002.safetensors\"%s", ileaf[i], i < 3 ? ", " : "}}");
    ck_assert(fclose(f) == 0);
    kvl_st_checkpoint ck;
    ck_assert_msg(kvl_st_checkpoint_open(&ck, dir) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(v4_weights_load(&got, &c, &ck, 1) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(got.n_floats, w.n_floats);
    for (size_t i = 0; i < w.n_floats; i++)
        if (got.block[i] != w.block[i]) ck_abort_msg("float %zu of the weights block differs", i);
    v4_weights_free(&got);
    kvl_st_checkpoint_close(&ck);
    v4_weights_free(&w);
    kvl_model_free(&m);
    rm_dir(dir);
}
END_TEST

/* V4.1 under its inference names, one file per layer: a Full layer with M = 2 (W_Z present) and one with
 * M = 1 (no W_Z), a Reindex layer (index queries, no keys) and a Reuse layer (the core only). */
static void check_v41_layer(const kvl_model *m, size_t layer, kvl_layer_kind kind)
{
    v41_config c;
    ck_assert_msg(v41_config_from_model(&c, m, layer) == KVL_OK, "%s", kvl_error());
    ck_assert_int_eq(c.kind, kind);
    v41_weights w, got;
    kvl_rng rng;
    kvl_rng_seed(&rng, 7 + layer);
    ck_assert_int_eq(v41_weights_init_random(&w, &c, &rng), KVL_OK);
    const v4_config *k = &c.core;
    size_t d = k->d, H = k->n_heads, Dh = k->head_dim, Dq = k->q_lora_rank, GDo = k->o_groups * k->o_lora_rank;
    size_t HI = c.indexer.n_heads, DI = c.indexer.head_dim;
    int full = kind == KVL_LAYER_FULL, scores = full || kind == KVL_LAYER_REINDEX;
    const char *leaf[] = {"wq_a.weight", "q_norm.weight", "wq_b.weight", "wkv.weight", "kv_norm.weight", "attn_sink",
                          "wo_a", "wo_b.weight",
                          full ? "compressor.wkv.weight" : NULL, full && c.ratio > 1 ? "compressor.wgate.weight" : NULL,
                          full ? "compressor.norm.weight" : NULL, full ? "indexer.wk.weight" : NULL,
                          full ? "indexer.k_norm.weight" : NULL, scores ? "indexer.wq_b.weight" : NULL,
                          scores ? "indexer.weights_proj.weight" : NULL};
    float *const ptr[] = {w.core.w_dq, w.core.q_norm, w.core.w_uq, w.core.w_kv, w.core.kv_norm, w.core.sinks,
                          w.core.w_oa, w.core.w_ob, w.compressor.w_c, w.compressor.w_z, w.compressor.norm, w.w_ik,
                          w.ik_norm, w.w_iq, w.w_iw};
    const size_t shape[][2] = {{Dq, d}, {Dq, 0}, {H * Dh, Dq}, {Dh, d}, {Dh, 0}, {H, 0}, {GDo, H / k->o_groups * Dh},
                               {d, GDo}, {Dh, d}, {Dh, d}, {Dh, 0}, {DI, Dh}, {DI, 0}, {HI * DI, Dq}, {HI, d}};
    char dir[64], path[128], prefix[32];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/layer.safetensors", dir);
    snprintf(prefix, sizeof prefix, "layers.%zu.attn.", layer);
    write_fields(path, prefix, leaf, ptr, shape, 15);
    kvl_st_checkpoint ck;
    ck_assert_msg(kvl_st_checkpoint_open(&ck, path) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(v41_weights_load(&got, &c, &ck, layer) == KVL_OK, "layer %zu: %s", layer, kvl_error());
    ck_assert(got.core.n_floats == w.core.n_floats && got.n_floats == w.n_floats);
    for (size_t i = 0; i < w.core.n_floats; i++)
        if (got.core.block[i] != w.core.block[i]) ck_abort_msg("layer %zu: core float %zu differs", layer, i);
    for (size_t i = 0; i < w.n_floats; i++)
        if (got.block[i] != w.block[i]) ck_abort_msg("layer %zu: float %zu of its own weights differs", layer, i);
    v41_weights_free(&got);
    ck_assert_int_eq(v41_weights_load(&got, &c, &ck, layer + 1), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "not found") != NULL, "%s", kvl_error());
    kvl_st_checkpoint_close(&ck);
    v41_weights_free(&w);
    rm_dir(dir);
}

START_TEST(test_inference_names_fill_every_v41_field_in_each_layer_mode)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("tests/reference/deepseek_v41_tiny.json")) == KVL_OK, "%s", kvl_error());
    check_v41_layer(&m, 1, KVL_LAYER_FULL);
    check_v41_layer(&m, 3, KVL_LAYER_FULL);
    check_v41_layer(&m, 5, KVL_LAYER_REINDEX);
    check_v41_layer(&m, 4, KVL_LAYER_REUSE);
    kvl_model_free(&m);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_weight_read");
    TCase *fp8 = tcase_create("fp8_blocks");
    tcase_add_test(fp8, test_fp8_blocks_dequantise_to_the_definition_on_ragged_edges);
    tcase_add_test(fp8, test_e8m0_scales_under_the_inference_naming_dequantise_the_same);
    tcase_add_test(fp8, test_missing_or_misshapen_scales_and_weights_are_named);
    tcase_add_test(fp8, test_fp4_weights_dequantise_through_their_e8m0_scales_per_32);
    tcase_add_test(fp8, test_weights_a_writer_cannot_mean_are_refused_by_name);
    suite_add_tcase(s, fp8);
    TCase *names = tcase_create("names");
    tcase_add_test(names, test_hf_names_fill_every_mla_and_dsa_field);
    tcase_add_test(names, test_inference_names_fill_every_mla_and_dsa_field);
    tcase_add_test(names, test_inference_names_fill_every_v4_csa_field);
    tcase_add_test(names, test_inference_names_fill_every_v41_field_in_each_layer_mode);
    suite_add_tcase(s, names);
    return s;
}
