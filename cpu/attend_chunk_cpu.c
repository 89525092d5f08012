#include "attend_cpu.h"

#include <math.h>

#include "linalg.h"
#include "threads.h"
#include "scratch.h"
#include "softmax_cpu.h"
#include "status.h"

/* s[b][n] ← softmax of each row of scale·s + mask in float (the vectorised exponentials of
 * cpu/softmax_cpu.h); a row masked whole becomes zeros and a NaN score makes its row NaN, as
 * kvl_softmax_f32 gives. */
static void softmax_masked_rows(float *s, const float *mask, size_t b, size_t n, float scale)
{
    for (size_t r = 0; r < b; r++) {
        float *row = s + r * n;
        const float *m = mask + r * n;
        for (size_t i = 0; i < n; i++) row[i] = row[i] * scale + m[i];
        const float mu = kvl_max_f32(row, n);
        if (mu == -INFINITY) { /* every score masked, or NaN */
            float fill = 0.0f;
            for (size_t i = 0; i < n; i++) fill = isnan(row[i]) ? row[i] : fill;
            for (size_t i = 0; i < n; i++) row[i] = fill;
            continue;
        }
        kvl_scale_f32(row, 1.0f / kvl_softmax_exp_f32(row, n, mu), n);
    }
}

/* The blocks of queries split among the threads: part p takes blocks p, p + P, … (a causal chunk's later
 * blocks see more keys, so interleaving evens the parts), each block in its thread's scratch, its
 * products single-threaded BLAS. A block's output does not depend on the split. */
typedef struct {
    float *o;
    const float *q, *k, *v;
    const kvl_chunk_head *c;
    size_t B, blocks, parts;
} chunk_job;

static int chunk_part(void *ctx, size_t p)
{
    const chunk_job *j = ctx;
    const kvl_chunk_head *c = j->c;
    float *q_b = kvl_scratch(KVL_SCRATCH_CHUNK, j->B * (c->Dk + 2 * c->N + c->Dv) * sizeof *q_b);
    if (!q_b) return kvl_fail(KVL_ENOMEM, "kvl_attend_chunk_head: out of memory for %zu scores", j->B * c->N);
    float *s = q_b + j->B * c->Dk, *mask = s + j->B * c->N, *o_b = mask + j->B * c->N;
    for (size_t blk = p; blk < j->blocks; blk += j->parts) {
        const size_t first = blk * j->B, b = c->S - first < j->B ? c->S - first : j->B;
        const size_t n = c->mask(mask, first, b, c->N, c->mask_ctx);
        if (n > c->N) return kvl_chunk_mask_too_wide(first, b, n, c->N);
        kvl_copy_block(q_b, c->Dk, j->q + first * c->ldq, c->ldq, b, c->Dk);
        if (n) KVL_TRY(kvl_matmul_abt_f32_ref(s, q_b, j->k, b, n, c->Dk));
        softmax_masked_rows(s, mask, b, n, c->scale);
        if (n) KVL_TRY(kvl_matmul_ab_f32_ref(o_b, s, j->v, b, c->Dv, n));
        else for (size_t i = 0; i < b * c->Dv; i++) o_b[i] = 0.0f;
        kvl_copy_block(j->o + first * c->ldo, c->ldo, o_b, c->Dv, b, c->Dv);
    }
    return KVL_OK;
}

int kvl_attend_chunk_head_cpu(float *o, const float *q, const float *k, const float *v, const kvl_chunk_head *c)
{
    const size_t B = c->S < KVL_QUERY_BLOCK ? c->S : KVL_QUERY_BLOCK, blocks = (c->S + B - 1) / B;
    const double macs = (double)c->S * (double)c->N * (double)(c->Dk + c->Dv);
    chunk_job j = {o, q, k, v, c, B, blocks, kvl_parts(blocks, 1, macs)};
    return kvl_run_parts_checked(chunk_part, &j, j.parts);
}
