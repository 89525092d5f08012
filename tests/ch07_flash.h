/* A V4.1-Flash-shaped stack for the chapter 7 cache checks: the real layer map and entry widths of
 * ref/configs/deepseek-v4.1-flash.json (40 layers, Dh 512, Dr 64, DI 128, W 128, K 512, sources and pool),
 * with a small model width and few heads so that it runs in seconds. */
#ifndef KVL_TESTS_CH07_FLASH_H
#define KVL_TESTS_CH07_FLASH_H

#include "config.h"
#include "status.h"

/* m = the V4.1-Flash config at d 64, H 2, Dq' 32, G 1, Do 16, HI 2. */
static inline int ch07_flash_small(kvl_model *m, const char *path)
{
    int rc = kvl_model_load(m, path);
    if (rc != KVL_OK) return rc;
    m->d = 64;
    m->n_heads = 2;
    m->q_lora_rank = 32;
    m->o_groups = 1;
    m->o_lora_rank = 16;
    m->index_n_heads = 2;
    return KVL_OK;
}

#endif
