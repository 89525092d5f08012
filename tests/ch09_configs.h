/* A shipped config as the chapter 9 suites read it: the model, its cache footprint and its
 * parameter count, each checked as it loads. */
#ifndef KVL_TESTS_CH09_CONFIGS_H
#define KVL_TESTS_CH09_CONFIGS_H

#include <stdio.h>
#include <string.h>

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

/* Each of the n commands cmd[i] is refused as bad input: exit 2, nothing on stdout, and one line on
 * stderr naming named[i] and value[i]. */
static inline void ch09_assert_refused(const char *const *cmd, const char *const *named, const char *const *value,
                                       size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char out[4096], err[4096];
        ck_assert_int_eq(kvl_run(cmd[i], NULL, out, sizeof out, err, sizeof err), 2);
        ck_assert_msg(out[0] == 0, "%s printed: %s", cmd[i], out);
        ck_assert_msg(strstr(err, named[i]) && strstr(err, value[i]), "%s: %s", cmd[i], err);
        ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "%s: not one line: %s", cmd[i], err);
    }
}

#endif
