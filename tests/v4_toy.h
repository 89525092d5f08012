/* The chapter 6 toy: d 64, H 4, Dh 32, Dr 8, Dq' 32, G 2, Do 16, W 8, M_csa 4,
 * M_hca 8 (= W, as 128 = 128 at full size), HI 4, DI 16, K 3, T 45, layer map [0, 0, 4, 8, 4], written as
 * a config.json and read through the project's loader, plus a real-width layer for the native rows
 * (Dh 512, Dr 64, DI 128) at a small model width. */
#ifndef KVL_TESTS_V4_TOY_H
#define KVL_TESTS_V4_TOY_H

#include <stdio.h>
#include <string.h>

#include <check.h>

#include "config.h"
#include "oracle_attention.h"
#include "rng.h"
#include "status.h"
#include "v4.h"

#define V4_TOY_T 45
#define V4_TOY_LAYER_WINDOW 0
#define V4_TOY_LAYER_CSA 2
#define V4_TOY_LAYER_HCA 3

/* The toy stack; the compress rope is the V4 one (θ 1.6e5, YaRN factor 16, L_orig 65536, β 32/1), which at
 * Dr 8 ramps pairs 1 … 4. `topk` replaces K (3 in the toy). */
static const char V4_TOY_JSON[] =
    "{\"hidden_size\": 64, \"num_hidden_layers\": 5, \"num_attention_heads\": 4, \"head_dim\": 32,"
    " \"qk_rope_head_dim\": 8, \"q_lora_rank\": 32, \"o_groups\": 2, \"o_lora_rank\": 16, \"sliding_window\": 8,"
    " \"index_n_heads\": 4, \"index_head_dim\": 16, \"index_topk\": %zu, \"compress_ratios\": [0, 0, 4, 8, 4],"
    " \"rope_theta\": 10000, \"compress_rope_theta\": 160000, \"rms_norm_eps\": 1e-6,"
    " \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 16, \"original_max_position_embeddings\": 65536,"
    " \"beta_fast\": 32, \"beta_slow\": 1}}";

/* Real entry widths with a small model: d 32, H 2, Dq' 16, G 1, Do 16, W 8, HI 2, K 4; ratios as V4-Flash
 * (layers: window, CSA 4, HCA 128). */
static const char V4_WIDE_JSON[] =
    "{\"hidden_size\": 32, \"num_hidden_layers\": 3, \"num_attention_heads\": 2, \"head_dim\": 512,"
    " \"qk_rope_head_dim\": 64, \"q_lora_rank\": 16, \"o_groups\": 1, \"o_lora_rank\": 16, \"sliding_window\": 8,"
    " \"index_n_heads\": 2, \"index_head_dim\": 128, \"index_topk\": 4, \"compress_ratios\": [0, 4, 128],"
    " \"rope_theta\": 10000, \"compress_rope_theta\": 160000, \"rms_norm_eps\": 1e-6,"
    " \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 16, \"original_max_position_embeddings\": 65536,"
    " \"beta_fast\": 32, \"beta_slow\": 1}}";

static inline void v4_toy_model(kvl_model *m, size_t topk)
{
    char json[1024];
    snprintf(json, sizeof json, V4_TOY_JSON, topk);
    ck_assert_msg(kvl_model_parse(m, json, strlen(json), "v4-toy.json") == KVL_OK, "%s", kvl_error());
}

/* Layer `layer` of the toy (K = topk) with weights drawn from `seed`. */
static inline void v4_toy_layer(v4_config *c, v4_weights *w, size_t layer, size_t topk, uint64_t seed)
{
    kvl_model m;
    v4_toy_model(&m, topk);
    ck_assert_msg(v4_config_from_model(c, &m, layer) == KVL_OK, "%s", kvl_error());
    kvl_model_free(&m);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    ck_assert_msg(v4_weights_init_random(w, c, &rng) == KVL_OK, "%s", kvl_error());
}

/* Layer `layer` (0 window, 1 CSA, 2 HCA) of the real-width config. */
static inline void v4_wide_layer(v4_config *c, v4_weights *w, size_t layer, uint64_t seed)
{
    kvl_model m;
    ck_assert_msg(kvl_model_parse(&m, V4_WIDE_JSON, strlen(V4_WIDE_JSON), "v4-wide.json") == KVL_OK, "%s", kvl_error());
    ck_assert_msg(v4_config_from_model(c, &m, layer) == KVL_OK, "%s", kvl_error());
    kvl_model_free(&m);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    ck_assert_msg(v4_weights_init_random(w, c, &rng) == KVL_OK, "%s", kvl_error());
}

/* x[T][d] ~ N(0, 1) from `seed` */
static inline float *v4_toy_inputs(size_t T, size_t d, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    float *x = oracle_alloc(T * d * sizeof *x);
    kvl_rng_normal_f32(&rng, x, T * d, 1.0);
    return x;
}

static inline double v4_max_abs(const double *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(v[i]));
    return m;
}

#endif
