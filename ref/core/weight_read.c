#include "weight_read.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "element.h"
#include "status.h"

static size_t blocks(size_t n) { return (n + KVL_WEIGHT_BLOCK - 1) / KVL_WEIGHT_BLOCK; }

int kvl_dequant_fp8_blocks(float *w, const kvl_st_tensor *q, const kvl_st_tensor *s, const char *origin)
{
    if (q->dtype != KVL_ST_F8_E4M3 || q->n_dims != 2)
        return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": a block-scaled weight must be 2-D F8_E4M3, got %zu-D %s",
                        origin, q->name, q->n_dims, kvl_st_dtype_name(q->dtype));
    size_t R = q->shape[0], C = q->shape[1];
    const size_t want[2] = {blocks(R), blocks(C)};
    KVL_TRY(kvl_st_expect_shape(s, origin, 2, want));
    float *scale = malloc((want[0] * want[1] + 1) * sizeof *scale);
    if (!scale) return kvl_fail(KVL_ENOMEM, "%s: out of memory for the scales of \"%.64s\"", origin, q->name);
    int rc = kvl_st_read_f32(scale, s, origin);
    if (rc == KVL_OK) {
        kvf_e4m3_decode_n(w, q->data, R * C);
        for (size_t r = 0; r < R; r++)
            for (size_t c = 0; c < C; c++) w[r * C + c] *= scale[(r / KVL_WEIGHT_BLOCK) * want[1] + c / KVL_WEIGHT_BLOCK];
    }
    free(scale);
    return rc;
}

/* The scale tensor of the FP8 weight `name` under either naming, or NULL. */
static const kvl_st_tensor *find_scale(const kvl_st_checkpoint *c, const char *name)
{
    static const char *const tails[] = {".weight_scale_inv", ".scale"};
    size_t n = strlen(name);
    if (n < 7 || strcmp(name + n - 7, ".weight") != 0) return NULL;
    for (size_t i = 0; i < 2; i++) {
        char scale_name[512];
        if ((size_t)snprintf(scale_name, sizeof scale_name, "%.*s%s", (int)(n - 7), name, tails[i]) >= sizeof scale_name)
            return NULL;
        const kvl_st_tensor *s = kvl_st_checkpoint_find(c, scale_name, NULL);
        if (s) return s;
    }
    return NULL;
}

int kvl_read_weight(float *w, const kvl_st_checkpoint *c, const char *name, size_t n_dims, const size_t *shape)
{
    const kvl_st_file *in = NULL;
    const kvl_st_tensor *t = kvl_st_checkpoint_find(c, name, &in);
    const char *where = c->n_files ? c->files[0].origin : "checkpoint";
    if (!t) return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\" not found", where, name);
    KVL_TRY(kvl_st_expect_shape(t, in->origin, n_dims, shape));
    if (t->dtype != KVL_ST_F8_E4M3) KVL_TRY(kvl_st_read_f32(w, t, in->origin));
    else {
        const kvl_st_tensor *s = find_scale(c, name);
        if (!s)
            return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\" is F8_E4M3 but has no weight_scale_inv or scale tensor",
                            in->origin, name);
        KVL_TRY(kvl_dequant_fp8_blocks(w, t, s, in->origin));
    }
    return kvl_expect_finite(w, t->shape, t->n_dims, in->origin, name);
}

int kvl_expect_finite(const float *x, const size_t *shape, size_t n_dims, const char *origin, const char *name)
{
    size_t n = 1;
    for (size_t k = 0; k < n_dims; k++) n *= shape[k];
    size_t i = 0;
    while (i < n && isfinite(x[i])) i++;
    if (i == n) return KVL_OK;
    char at[96] = "";
    size_t o = 0, rest = i, stride = n;
    for (size_t k = 0; k < n_dims && o < sizeof at; k++) {
        stride /= shape[k];
        o += (size_t)snprintf(at + o, sizeof at - o, "%s%zu", k ? ", " : "", rest / stride);
        rest %= stride;
    }
    return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\" holds %s at [%s]: weights and inputs must be finite", origin, name,
                    isnan(x[i]) ? "nan" : x[i] > 0 ? "inf" : "-inf", at);
}
