/* A shipped config as the chapter 9 suites read it: the model, its cache footprint and its
 * parameter count, each checked as it loads. */
#ifndef KVL_TESTS_CH09_CONFIGS_H
#define KVL_TESTS_CH09_CONFIGS_H

#include <stdio.h>

#include "common.h"
#include "config.h"
#include "kvtable.h"
#include "params.h"
#include "status.h"

typedef struct {
    kvl_model m;
    kvl_kv_footprint f;
    kvl_params p;
} ch09_config;

/* ref/configs/NAME loaded, failing the running test on any error. */
static inline ch09_config ch09_load(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "ref/configs/%s", name);
    ch09_config l;
    ck_assert_msg(kvl_model_load(&l.m, kvl_path(rel)) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(kvl_kv_footprint_of(&l.f, &l.m) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(kvl_params_of(&l.p, &l.m) == KVL_OK, "%s", kvl_error());
    return l;
}

#endif
