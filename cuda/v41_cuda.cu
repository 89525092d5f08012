/* DeepSeek-V4.1 CSA2 on the GPU (v41_cuda.h).
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c v41_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernels: v41_cuda.cuh, attend_cuda.cuh; the rest through the twins' headers. */
#include "v41_cuda.cuh"

#include <string.h>

#include "v41_cuda.h"
#include "v41_indexer_cuda.h"
#include "linalg_cuda.h"
#include "mha_cuda.h"
#include "norm_cuda.h"
#include "rope_cuda.h"
#include "topk_cuda.h"
#include "v4_cuda.h"
#include "status.h"

#define SCALE_THREADS 256

size_t v41_cuda_window_bytes(v41_cuda_store s, size_t Dh)
{
    return s == V41_CUDA_NATIVE ? kvf_row_bytes(KVF_ROW_V41_WINDOW) : Dh * sizeof(float);
}

size_t v41_cuda_entry_bytes(v41_cuda_store s, size_t Dh)
{
    return s == V41_CUDA_NATIVE ? kvf_row_bytes(KVF_ROW_V41_MAIN) : Dh * sizeof(float);
}

int v41_main_entry_cuda(float *Z, const v41_config *c, const float *L, size_t n, size_t first)
{
    const int rc = v41_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", __func__, kvl_error());
    if (n == 0) return KVL_OK;
    if (!Z || !L) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    if (c->ratio == 0) return kvl_fail(KVL_EINVAL, "%s: a window-only layer has no entries", __func__);
    const size_t Dh = c->core.head_dim;
    if (Z != L) KVL_TRY(kvl_cuda_copy(Z, L, n * Dh * sizeof(float)));
    return kvl_rope_rotate_heads_interleaved_cuda(Z, n, Dh, Dh - c->core.rope.Dr, 1, 0, &c->core.rope,
                                                  static_cast<int64_t>(first * c->ratio) + c->core.rope_offset,
                                                  c->ratio);
}

int v41_source_push_cuda(float *Z, float *keys, size_t *n_new, const v41_config *c, const v41_weights *w,
                          v41_compressor_state_cuda *st, const float *x, size_t S, kvl_workspace *work)
{
    const int rc = v41_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", __func__, kvl_error());
    if (c->kind != KVL_LAYER_FULL) return kvl_fail(KVL_EINVAL, "%s: a %s layer is no KV source", __func__,
                                                   v41_mode_name(c->kind));
    if (!n_new || !st || !w || !work) return kvl_fail(KVL_EINVAL, "%s: NULL argument", __func__);
    *n_new = 0;
    const size_t M = c->ratio, Dh = c->core.head_dim, first = st->pos / M, n_max = (st->pos + S) / M - first;
    if (n_max == 0) return v41_compressor_push_cuda(NULL, n_new, &c->compressor, &w->compressor, st, x, S);
    if (!Z || !keys) return kvl_fail(KVL_EINVAL, "%s: NULL output", __func__);
    if (n_max > SIZE_MAX / sizeof(float) / Dh) return kvl_fail(KVL_EINVAL, "%s: %zu entries overflow", __func__, n_max);
    KVL_TRY(kvl_workspace_reserve(work, n_max * Dh * sizeof(float)));
    float *L = static_cast<float *>(work->p);
    size_t n = 0;
    KVL_TRY(v41_compressor_push_cuda(L, &n, &c->compressor, &w->compressor, st, x, S));
    KVL_TRY(v41_index_keys_cuda(keys, &c->indexer, w->w_ik, w->ik_norm, L, n, first));
    KVL_TRY(v41_main_entry_cuda(Z, c, L, n, first));
    *n_new = n;
    return KVL_OK;
}

/* ---- the attention core ------------------------------------------------------------------------------ */

namespace {

int check_attend(const v41_config *c, const void *entries, size_t N, const int32_t *sel, size_t start,
                 size_t win_first, v41_cuda_store store)
{
    const int rc = v41_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "v41_attend_cuda: %s", kvl_error());
    if (store != V41_CUDA_F32 && store != V41_CUDA_NATIVE)
        return kvl_fail(KVL_EINVAL, "v41_attend_cuda: unknown store %d", static_cast<int>(store));
    if (store == V41_CUDA_NATIVE && c->core.head_dim != KVF_V41_DIM)
        return kvl_fail(KVL_EINVAL, "v41_attend_cuda: the 528- and 288-byte rows hold Dh %d; the config has %zu",
                        KVF_V41_DIM, c->core.head_dim);
    if (win_first > start)
        return kvl_fail(KVL_EINVAL, "v41_attend_cuda: window rows start at %zu, after the chunk (%zu)", win_first,
                        start);
    if (c->kind != KVL_LAYER_WINDOW && !sel)
        return kvl_fail(KVL_EINVAL, "v41_attend_cuda: a %s layer needs its picks", v41_mode_name(c->kind));
    if (c->kind != KVL_LAYER_WINDOW && N && !entries) return kvl_fail(KVL_EINVAL, "v41_attend_cuda: NULL entries");
    return KVL_OK;
}

} /* namespace */

int v41_attend_cuda(float *o, const v41_config *c, const float *sinks, const float *q, const void *win,
                     size_t win_first, const void *entries, size_t N, const int32_t *sel, size_t S, size_t start,
                     v41_cuda_store store, kvl_workspace *work)
{
    KVL_TRY(check_attend(c, entries, N, sel, start, win_first, store));
    if (S == 0) return KVL_OK;
    if (!o || !q || !win || !sinks || !work) return kvl_fail(KVL_EINVAL, "v41_attend_cuda: NULL array");
    const size_t H = c->core.n_heads, Dh = c->core.head_dim, K = c->kind == KVL_LAYER_WINDOW ? 0 : c->indexer.topk;
    const size_t nk = c->core.window + K, split = kvl_decode_split(0, nk, S * H);
    const kvl_attend_shape sh{S, H, H, Dh, Dh, 1, 0, 0, nk, split, kvl_div_up(nk, split), 0,
                              static_cast<float>(1.0 / sqrt(static_cast<double>(Dh)))};
    KVL_TRY(kvl_workspace_reserve(work, (kvl_attend_work_floats(sh) + 1) * sizeof(float)));
    float *part = static_cast<float *>(work->p);
    if (K)
        KVL_TRY(kvl_selection_check_cuda(sel, S * K, N,
                                         reinterpret_cast<unsigned *>(part + kvl_attend_work_floats(sh)), "v41_attend_cuda"));
    const kvl_v41_keys keys{static_cast<const uint8_t *>(win), static_cast<const uint8_t *>(entries),
                             v41_cuda_window_bytes(store, Dh), v41_cuda_entry_bytes(store, Dh), win_first, start,
                             c->core.window, sel, K};
    KVL_TRY(store == V41_CUDA_NATIVE
                ? kvl_gather_attend_two_cuda<kvl_rows_v41_window, kvl_rows_v41_main>(o, q, sh, keys, sinks, part)
                : kvl_gather_attend_cuda<kvl_rows_f32>(o, q, sh, keys, sinks, part));
    /* ō: the trailing Dr channels of every head rotated back at the query's rotary position */
    for (size_t i = 0; i < S; i++)
        KVL_TRY(kvl_rope_rotate_heads_interleaved_cuda(o + i * H * Dh, 1, H * Dh, Dh - c->core.rope.Dr, H, Dh,
                                                       &c->core.rope,
                                                       -(static_cast<int64_t>(start + i) + c->core.rope_offset), 0));
    return KVL_OK;
}

/* ---- the layer modes ----------------------------------------------------------------------------------- */

void v41_work_free_cuda(v41_work_cuda *work)
{
    kvl_workspace_free(&work->buffers);
    kvl_workspace_free(&work->scratch);
}

namespace {

struct layer_buffers {
    float *cq, *q, *o;   /* [S][Dq'], [S][H][Dh], [S][H][Dh] */
    float *q_idx, *w_idx; /* [S][HI][DI], [S][HI] */
    float *I;            /* [S][N] a Reindex layer's scores */
};

/* floats rounded up to 16 bytes, so that every buffer cut after them is aligned for the block quantisers */
size_t aligned(size_t floats) { return (floats + 3) / 4 * 4; }

int buffers_alloc(layer_buffers *b, const v41_config *c, size_t S, size_t N, kvl_workspace *work)
{
    const size_t HD = c->core.n_heads * c->core.head_dim, HI = c->indexer.n_heads, DI = c->indexer.head_dim;
    const size_t sizes[6] = {aligned(S * c->core.q_lora_rank), aligned(S * HD), aligned(S * HD), aligned(S * HI * DI),
                             aligned(S * HI), aligned(S * N)};
    size_t total = 0;
    for (size_t i = 0; i < 6; i++) {
        if (sizes[i] > SIZE_MAX / sizeof(float) / 8) return kvl_fail(KVL_EINVAL, "v41: a chunk of %zu overflows", S);
        total += sizes[i];
    }
    KVL_TRY(kvl_workspace_reserve(work, total * sizeof(float)));
    float *p = static_cast<float *>(work->p);
    float **fields[6] = {&b->cq, &b->q, &b->o, &b->q_idx, &b->w_idx, &b->I};
    for (size_t i = 0; i < 6; p += sizes[i], i++) *fields[i] = p;
    return KVL_OK;
}

int check_layer(const char *fn, const v41_config *c, kvl_layer_kind kind, const v41_weights *w,
                const v41_chunk_cuda *ch, const v41_work_cuda *work)
{
    const int rc = v41_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", fn, kvl_error());
    if (c->kind != kind) return kvl_fail(KVL_EINVAL, "%s: layer is %s", fn, v41_mode_name(c->kind));
    const v4_weights *k = w ? &w->core : NULL;
    if (!k || !k->w_dq || !k->q_norm || !k->w_uq || !k->sinks || !k->w_oa || !k->w_ob ||
        (kind != KVL_LAYER_WINDOW && kind != KVL_LAYER_REUSE && (!w->w_iq || !w->w_iw)))
        return kvl_fail(KVL_EINVAL, "%s: missing weights", fn);
    if (!ch || !ch->x || !ch->win || ch->S == 0 || ch->win_first > ch->start || !work)
        return kvl_fail(KVL_EINVAL, "%s: an empty chunk or no workspace", fn);
    return KVL_OK;
}

int check_source(const char *fn, const v41_source_cuda *src, int needs_keys)
{
    if (!src || (src->N && (!src->entries || (needs_keys && !src->keys))))
        return kvl_fail(KVL_EINVAL, "%s: the source has no entries or keys", fn);
    return KVL_OK;
}

/* b->cq = RMSNorm(W_DQ x), b->q = W_UQ cq with the trailing Dr of each head rotated at start + i + Δ */
int queries(layer_buffers *b, const v41_config *c, const v41_weights *w, const v41_chunk_cuda *ch)
{
    const v4_config *k = &c->core;
    const size_t S = ch->S, Dq = k->q_lora_rank, H = k->n_heads, Dh = k->head_dim;
    KVL_TRY(kvl_matmul_abt_f32_cuda(b->cq, ch->x, w->core.w_dq, S, Dq, k->d));
    KVL_TRY(kvl_rmsnorm_f32_cuda(b->cq, b->cq, w->core.q_norm, S, Dq, Dq, k->norm_eps));
    KVL_TRY(kvl_matmul_abt_f32_cuda(b->q, b->cq, w->core.w_uq, S, H * Dh, Dq));
    return kvl_rope_rotate_heads_interleaved_cuda(b->q, S, H * Dh, Dh - k->rope.Dr, H, Dh, &k->rope,
                                                  static_cast<int64_t>(ch->start) + k->rope_offset, 1);
}

/* b->q_idx = W_IQ cq rotated as the queries, b->w_idx = W_IW x·(HI·DI)^−½; rounded like the keys they meet */
int index_queries(layer_buffers *b, const v41_config *c, const v41_weights *w, const v41_source_cuda *src,
                  const v41_chunk_cuda *ch, kvl_workspace *scratch)
{
    const v41_indexer_config *ix = &c->indexer;
    const size_t S = ch->S, HI = ix->n_heads, DI = ix->head_dim;
    KVL_TRY(kvl_matmul_abt_f32_cuda(b->q_idx, b->cq, w->w_iq, S, HI * DI, ix->q_lora_rank));
    KVL_TRY(kvl_rope_rotate_heads_interleaved_cuda(b->q_idx, S, HI * DI, DI - ix->rope.Dr, HI, DI, &ix->rope,
                                                   static_cast<int64_t>(ch->start) + c->core.rope_offset, 1));
    KVL_TRY(kvl_matmul_abt_f32_cuda(b->w_idx, ch->x, w->w_iw, S, HI, ix->d));
    const float scale = static_cast<float>(1.0 / sqrt(static_cast<double>(HI * DI)));
    if (kvl_div_up(S * HI, SCALE_THREADS) > 0x7FFFFFFFu)
        return kvl_fail(KVL_EINVAL, "v41: %zu index weights are more than one launch takes", S * HI);
    CUDA_CHECK(KVL_LAUNCH(kvl_scale_kernel, dim3(static_cast<unsigned>(kvl_div_up(S * HI, SCALE_THREADS))),
                          SCALE_THREADS, 0, b->w_idx, S * HI, scale));
    return src->keys_mxfp4 ? v41_index_round_mxfp4_cuda(b->q_idx, S * HI, DI, scratch) : KVL_OK;
}

/* sel[S][K] = the top-K of I[S][N] (all −1 when there is no entry) */
int top_k(int32_t *sel, const float *I, size_t S, size_t N, size_t K)
{
    if (N == 0) return kvl_cuda_fill(sel, 0xFF, S * K * sizeof(int32_t));
    return kvl_topk_cuda(sel, I, S, N, K);
}

/* out[S][d]: attention over the window rows and the picks sel[S][K] (NULL: none), then the grouped output */
int attend_and_output(float *out, const v41_config *c, const v41_weights *w, layer_buffers *b,
                      const v41_chunk_cuda *ch, const v41_source_cuda *src, const int32_t *sel,
                      v41_work_cuda *work)
{
    KVL_TRY(v41_attend_cuda(b->o, c, w->core.sinks, b->q, ch->win, ch->win_first, src ? src->entries : NULL,
                             src ? src->N : 0, sel, ch->S, ch->start, ch->store, &work->scratch));
    return v4_output_cuda(out, &c->core, w->core.w_oa, w->core.w_ob, b->o, ch->S, &work->scratch);
}

} /* namespace */

int v41_window_layer_cuda(float *out, const v41_config *c, const v41_weights *w, const v41_chunk_cuda *ch,
                           v41_work_cuda *work)
{
    KVL_TRY(check_layer(__func__, c, KVL_LAYER_WINDOW, w, ch, work));
    if (!out) return kvl_fail(KVL_EINVAL, "%s: NULL output", __func__);
    layer_buffers b;
    KVL_TRY(buffers_alloc(&b, c, ch->S, 0, &work->buffers));
    KVL_TRY(queries(&b, c, w, ch));
    return attend_and_output(out, c, w, &b, ch, NULL, NULL, work);
}

int v41_full_layer_cuda(float *out, int32_t *sel, float *I, const v41_config *c, const v41_weights *w,
                         const v41_source_cuda *src, const v41_chunk_cuda *ch, v41_work_cuda *work)
{
    KVL_TRY(check_layer(__func__, c, KVL_LAYER_FULL, w, ch, work));
    KVL_TRY(check_source(__func__, src, 1));
    if (!out || !sel || (src->N && !I)) return kvl_fail(KVL_EINVAL, "%s: NULL output", __func__);
    const v41_indexer_config *ix = &c->indexer;
    layer_buffers b;
    KVL_TRY(buffers_alloc(&b, c, ch->S, 0, &work->buffers));
    KVL_TRY(queries(&b, c, w, ch));
    KVL_TRY(index_queries(&b, c, w, src, ch, &work->scratch));
    if (src->N) KVL_TRY(v41_index_scores_all_cuda(I, ix, b.q_idx, b.w_idx, src->keys, ch->S, src->N, ch->start));
    KVL_TRY(top_k(sel, I, ch->S, src->N, ix->topk));
    return attend_and_output(out, c, w, &b, ch, src, sel, work);
}

int v41_reindex_layer_cuda(float *out, int32_t *sel, const v41_config *c, const v41_weights *w,
                            const v41_source_cuda *src, const uint8_t *pool, const v41_chunk_cuda *ch,
                            v41_work_cuda *work)
{
    KVL_TRY(check_layer(__func__, c, KVL_LAYER_REINDEX, w, ch, work));
    KVL_TRY(check_source(__func__, src, 1));
    if (!out || !sel) return kvl_fail(KVL_EINVAL, "%s: NULL output", __func__);
    const v41_indexer_config *ix = &c->indexer;
    const size_t S = ch->S, N = src->N;
    layer_buffers b;
    KVL_TRY(buffers_alloc(&b, c, S, N, &work->buffers));
    KVL_TRY(queries(&b, c, w, ch));
    KVL_TRY(index_queries(&b, c, w, src, ch, &work->scratch));
    if (N && pool)
        KVL_TRY(v41_index_scores_pool_cuda(b.I, ix, b.q_idx, b.w_idx, src->keys, pool, S, N, &work->scratch));
    if (N && !pool) KVL_TRY(v41_index_scores_all_cuda(b.I, ix, b.q_idx, b.w_idx, src->keys, S, N, ch->start));
    KVL_TRY(top_k(sel, b.I, S, N, ix->topk));
    return attend_and_output(out, c, w, &b, ch, src, sel, work);
}

int v41_reuse_layer_cuda(float *out, const v41_config *c, const v41_weights *w, const v41_source_cuda *src,
                          const int32_t *sel, const v41_chunk_cuda *ch, v41_work_cuda *work)
{
    KVL_TRY(check_layer(__func__, c, KVL_LAYER_REUSE, w, ch, work));
    KVL_TRY(check_source(__func__, src, 0));
    if (!out) return kvl_fail(KVL_EINVAL, "%s: NULL output", __func__);
    layer_buffers b;
    KVL_TRY(buffers_alloc(&b, c, ch->S, 0, &work->buffers));
    KVL_TRY(queries(&b, c, w, ch));
    return attend_and_output(out, c, w, &b, ch, src, sel, work);
}

/* ---- weights on the device ----------------------------------------------------------------------------- */

namespace {

/* a device copy of host[n] (NULL when n is 0) */
int upload_block(float **dev, const float *host, size_t n)
{
    *dev = NULL;
    if (n == 0) return KVL_OK;
    KVL_TRY(kvl_cuda_alloc(reinterpret_cast<void **>(dev), n * sizeof(float)));
    const int rc = kvl_cuda_upload(*dev, host, n * sizeof(float));
    if (rc != KVL_OK) {
        kvl_cuda_free(*dev);
        *dev = NULL;
    }
    return rc;
}

/* where p points in the host block, in the device block (NULL stays NULL) */
float *rebase(const float *p, const float *host_block, float *dev_block)
{
    return p ? dev_block + (p - host_block) : NULL;
}

} /* namespace */

int v41_weights_to_cuda(v41_weights *dev, const v41_weights *host)
{
    memset(dev, 0, sizeof *dev);
    if (!host || !host->core.block) return kvl_fail(KVL_EINVAL, "%s: no host weights", __func__);
    const v4_weights *hc = &host->core;
    v4_weights *dc = &dev->core;
    KVL_TRY(upload_block(&dc->block, hc->block, hc->n_floats));
    const int rc = upload_block(&dev->block, host->block, host->n_floats);
    if (rc != KVL_OK) {
        v41_weights_free_cuda(dev);
        return rc;
    }
    dc->n_floats = hc->n_floats;
    dev->n_floats = host->n_floats;
    float *const *core_from[] = {&hc->w_dq, &hc->q_norm, &hc->w_uq, &hc->w_kv, &hc->kv_norm, &hc->sinks, &hc->w_oa,
                                 &hc->w_ob};
    float **core_to[] = {&dc->w_dq, &dc->q_norm, &dc->w_uq, &dc->w_kv, &dc->kv_norm, &dc->sinks, &dc->w_oa, &dc->w_ob};
    for (size_t i = 0; i < sizeof core_from / sizeof core_from[0]; i++)
        *core_to[i] = rebase(*core_from[i], hc->block, dc->block);
    float *const *from[] = {&host->compressor.w_c, &host->compressor.w_z, &host->compressor.norm, &host->w_ik,
                            &host->ik_norm, &host->w_iq, &host->w_iw};
    float **to[] = {&dev->compressor.w_c, &dev->compressor.w_z, &dev->compressor.norm, &dev->w_ik, &dev->ik_norm,
                    &dev->w_iq, &dev->w_iw};
    for (size_t i = 0; i < sizeof from / sizeof from[0]; i++) *to[i] = rebase(*from[i], host->block, dev->block);
    return KVL_OK;
}

void v41_weights_free_cuda(v41_weights *dev)
{
    kvl_cuda_free(dev->core.block);
    kvl_cuda_free(dev->block);
    memset(dev, 0, sizeof *dev);
}
