/* The sizes a chapter program refuses to run at, checked against its config. */
#include "bounds.h"

#include "grouped.h"
#include "status.h"

int kvl_bound_field(const kvl_model *m, const char *field, size_t value, size_t lo, size_t hi)
{
    if (value >= lo && value <= hi) return KVL_OK;
    return kvl_fail(KVL_EINVAL,
                    "%s: field %s is %zu; this program runs it from %zu to %zu (see --help)",
                    m->path, field, value, lo, hi);
}

int kvl_bound_ratios(const kvl_model *m, size_t max)
{
    for (size_t l = 0; l < m->n_layers; l++)
        if (m->layers[l].compress_ratio > max)
            return kvl_fail(
                KVL_EINVAL,
                "%s: field compress_ratios entry %zu is %zu; this program runs ratios up to "
                "%zu (see --help)",
                m->path, l, m->layers[l].compress_ratio, max);
    return KVL_OK;
}

int kvl_bound_run(const kvl_model *m, const char *fields, double amount, double max,
                  const char *unit)
{
    if (amount <= max) return KVL_OK;
    return kvl_fail(KVL_EINVAL,
                    "%s: at %s the run needs %.4g %s; this program allows %.6g (see --help)",
                    m->path, fields, amount, unit, max);
}

double kvl_v4_entry_values(const kvl_model *m, size_t T, size_t C)
{
    const double key = (double)(m->index_n_heads * m->index_head_dim), row = (double)m->head_dim;
    double v = 0;
    for (size_t l = 0; l < m->n_layers; l++) {
        const kvl_layer *y = &m->layers[l];
        const size_t M = y->compress_ratio, K = m->index_topk;
        if (y->kind != KVL_LAYER_CSA && y->kind != KVL_LAYER_HCA) continue;
        for (size_t start = 0; start < T; start += C) {
            const size_t S = T - start < C ? T - start : C;
            if (y->kind == KVL_LAYER_CSA) v += (double)S * (double)((start + S) / M) * key;
            for (size_t t = start; t < start + S; t++) {
                const size_t n = (t + 1) / M;
                v += (double)(y->kind == KVL_LAYER_CSA && n > K ? K : n) * row;
            }
        }
    }
    return v;
}

int kvl_bound_v4_tokens(const kvl_model *m, const char *flag, size_t T, size_t C, double max)
{
    const double v = kvl_v4_entry_values(m, T, C);
    if (v <= max) return KVL_OK;
    size_t lo = 0, hi = T;   /* values(lo) ≤ max < values(hi); values(0) = 0 */
    while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        *(kvl_v4_entry_values(m, mid, C) <= max ? &lo : &hi) = mid;
    }
    return kvl_fail(KVL_EINVAL,
                    "%s %zu: its queries would read %s values of compressed entries, more than %s "
                    "(in chunks of %zu, at most %s %zu)",
                    flag, T, KVL_GROUPED(v), KVL_GROUPED(max), C, flag, lo);
}

double kvl_v41_entry_values(const kvl_model *m, size_t T)
{
    const double key = (double)(m->index_n_heads * m->index_head_dim), row = (double)m->head_dim;
    const size_t pool = m->candidate_topk_blocks * m->candidate_block_size, K = m->index_topk;
    double v = 0;
    for (size_t l = 0; l < m->n_layers; l++) {
        const kvl_layer *y = &m->layers[l];
        const size_t M = y->compress_ratio;
        const int pooled = y->kind == KVL_LAYER_REINDEX &&
                           (size_t)y->kv_source == m->candidate_source_layer;
        const int reads = y->kind == KVL_LAYER_FULL || y->kind == KVL_LAYER_REINDEX ||
                          y->kind == KVL_LAYER_REUSE;
        if (M == 0 || !reads) continue;
        for (size_t t = 0; t < T; t++) {
            const size_t n = (t + 1) / M;
            if (y->kind != KVL_LAYER_REUSE) v += (double)(pooled && n > pool ? pool : n) * key;
            v += (double)(n > K ? K : n) * row;
        }
    }
    return v;
}
