/* The V4.1 toy (chapters/07_v41/README.md), shared by the chapter 7 suites: d 64, H 4, Dh 32, Dr 8, Dq' 32, G 2,
 * Do 16, W 8, HI 4, DI 16, K 3, L 10, ratios [0,0,2,2,2,1,1,1,1,1], kv sources [2, 5], index sources
 * [2, 5, 7, 9], candidate source 5, 2 candidate blocks of 4 (T 45 in the tests). */
#ifndef KVL_TESTS_CH07_TOY_H
#define KVL_TESTS_CH07_TOY_H

#include <string.h>

#include "config.h"

static const char CH07_TOY_JSON[] =
    "{\"dim\": 64, \"n_layers\": 10, \"n_heads\": 4, \"q_lora_rank\": 32, \"head_dim\": 32, \"rope_head_dim\": 8,"
    " \"norm_eps\": 1e-6, \"o_groups\": 2, \"o_lora_rank\": 16, \"window_size\": 8,"
    " \"kv_source_layers\": [2, 5], \"index_source_layers\": [2, 5, 7, 9],"
    " \"original_seq_len\": 4096, \"rope_theta\": 10000, \"rope_factor\": 4, \"beta_fast\": 32, \"beta_slow\": 1,"
    " \"index_n_heads\": 4, \"index_head_dim\": 16, \"index_topk\": 3,"
    " \"candidate_source_layer\": 5, \"candidate_topk_blocks\": 2, \"candidate_block_size\": 4,"
    " \"compress_rope_theta\": 160000, \"compress_ratios\": [0, 0, 2, 2, 2, 1, 1, 1, 1, 1]}";

static inline int ch07_toy_model(kvl_model *m)
{
    return kvl_model_parse(m, CH07_TOY_JSON, strlen(CH07_TOY_JSON), "ch07-toy");
}

/* The toy narrowed for the CPU emulator (tests/cuda/): L 6, W 3, so that a prompt past the exact-replay reach
 * L·(W − 1) = 12 is 15 tokens. Layer 0 window-only, 1 Full (M 2, the encoder's source), 2 Reuse of 1, 3 Full
 * (M 1, the decoder's source and the candidate source: blocks of 2, the top 2), 4 Reuse of 3, 5 Reindex over
 * the pool; E 3. */
static const char CH07_TOY_NARROW_JSON[] =
    "{\"dim\": 64, \"n_layers\": 6, \"n_heads\": 4, \"q_lora_rank\": 32, \"head_dim\": 32, \"rope_head_dim\": 8,"
    " \"norm_eps\": 1e-6, \"o_groups\": 2, \"o_lora_rank\": 16, \"window_size\": 3,"
    " \"kv_source_layers\": [1, 3], \"index_source_layers\": [1, 3, 5],"
    " \"original_seq_len\": 4096, \"rope_theta\": 10000, \"rope_factor\": 4, \"beta_fast\": 32, \"beta_slow\": 1,"
    " \"index_n_heads\": 4, \"index_head_dim\": 16, \"index_topk\": 3,"
    " \"candidate_source_layer\": 3, \"candidate_topk_blocks\": 2, \"candidate_block_size\": 2,"
    " \"compress_rope_theta\": 160000, \"compress_ratios\": [0, 2, 2, 1, 1, 1]}";

static inline int ch07_toy_narrow_model(kvl_model *m)
{
    return kvl_model_parse(m, CH07_TOY_NARROW_JSON, strlen(CH07_TOY_NARROW_JSON), "ch07-toy-narrow");
}

#endif
