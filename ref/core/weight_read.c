#include "weight_read.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
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

/* *s = the scale tensor beside the weight `name` (`.weight_scale_inv` or `.scale`), or NULL. KVL_EINVAL naming
 * both when both are present: which one the writer's code applies is not written in the file. */
static int find_scale(const kvl_st_tensor **s, const kvl_st_checkpoint *c, const char *name, const char *origin)
{
    static const char *const tails[] = {".weight_scale_inv", ".scale"};
    char scale_name[2][512];
    const kvl_st_tensor *found[2] = {NULL, NULL};
    size_t n = strlen(name);
    *s = NULL;
    if (n < 7 || strcmp(name + n - 7, ".weight") != 0) return KVL_OK;
    for (size_t i = 0; i < 2; i++)
        if ((size_t)snprintf(scale_name[i], sizeof scale_name[i], "%.*s%s", (int)(n - 7), name, tails[i]) <
            sizeof scale_name[i])
            found[i] = kvl_st_checkpoint_find(c, scale_name[i], NULL);
    if (found[0] && found[1])
        return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\" has two scale tensors, \"%.64s\" and \"%.64s\": keep one",
                        origin, name, scale_name[0], scale_name[1]);
    *s = found[0] ? found[0] : found[1];
    return KVL_OK;
}

/* w[R][C] = e2m1(q[r][c]) · e8m0(s[r][c/32]): an F4 weight with one E8M0 scale per 32 along its rows, the
 * MXFP4 block (formats/block.h), as DeepSeek's V4 checkpoints store FP4 with their `.scale`. */
static int dequant_fp4_blocks(float *w, const kvl_st_tensor *q, const kvl_st_tensor *s, const char *origin)
{
    size_t R = q->shape[0], C = q->shape[1];
    if (q->n_dims != 2 || C % KVF_MX_BLOCK)
        return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": an F4 weight must be 2-D with rows a multiple of %d long",
                        origin, q->name, KVF_MX_BLOCK);
    if (s->dtype != KVL_ST_F8_E8M0)
        return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": the scales of an F4 weight are F8_E8M0, got %s", origin,
                        s->name, kvl_st_dtype_name(s->dtype));
    const size_t want[2] = {R, C / KVF_MX_BLOCK};
    KVL_TRY(kvl_st_expect_shape(s, origin, 2, want));
    kvf_dequant_mxfp4(w, q->data, s->data, R * C);
    return KVL_OK;
}

/* w = t as float32 through its scale tensor s (NULL: none). */
static int read_scaled(float *w, const kvl_st_tensor *t, const kvl_st_tensor *s, const char *origin)
{
    const char *dtype = kvl_st_dtype_name(t->dtype);
    switch (t->dtype) {
    case KVL_ST_F8_E4M3:
    case KVL_ST_F4:
        if (!s)
            return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\" is %s but has no weight_scale_inv or scale tensor", origin,
                            t->name, dtype);
        return t->dtype == KVL_ST_F4 ? dequant_fp4_blocks(w, t, s, origin) : kvl_dequant_fp8_blocks(w, t, s, origin);
    case KVL_ST_F32:
    case KVL_ST_F64:
    case KVL_ST_F16:
    case KVL_ST_BF16:
        if (s)
            return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\" is %s with a scale tensor \"%.64s\" beside it: only "
                            "F8_E4M3 and F4 weights are scaled", origin, t->name, dtype, s->name);
        return kvl_st_read_f32(w, t, origin);
    default:
        return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\" is %s, not a weight's dtype (F32, F64, F16, BF16, or F8_E4M3 "
                        "or F4 with scales)%s", origin, t->name, dtype,
                        t->dtype == KVL_ST_F8_E8M0 ? ": F8_E8M0 is a scale format" : "");
    }
}

int kvl_read_weight(float *w, const kvl_st_checkpoint *c, const char *name, size_t n_dims, const size_t *shape)
{
    const kvl_st_file *in = NULL;
    const kvl_st_tensor *t = kvl_st_checkpoint_find(c, name, &in);
    const char *where = c->n_files ? c->files[0].origin : "checkpoint";
    if (!t) return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\" not found", where, name);
    KVL_TRY(kvl_st_expect_shape(t, in->origin, n_dims, shape));
    const kvl_st_tensor *s;
    KVL_TRY(find_scale(&s, c, name, in->origin));
    KVL_TRY(read_scaled(w, t, s, in->origin));
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
