/* MLA decode on the GPU (mla_cuda.h): the ref's steps, each a launch or a few.
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c mla_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernels: mla_cuda.cuh, attend_cuda.cuh. */
#include "mla_cuda.cuh"

#include <math.h>
#include <string.h>

#include "linalg_cuda.h"
#include "mha_cuda.h"
#include "mla_cuda.h"
#include "norm_cuda.h"
#include "rope_cuda.h"
#include "status.h"

#define MLA_THREADS 128

namespace {

size_t qk_width(const mla_config *c) { return c->qk_nope + c->qk_rope; }
size_t row_width(const mla_config *c) { return c->kv_lora_rank + c->qk_rope; }

int check_config(const mla_config *c, const char *fn)
{
    if (!c || !c->d || !c->n_heads || !c->kv_lora_rank || !c->qk_nope || !c->qk_rope || !c->v_head ||
        c->rope.Dr != c->qk_rope)
        return kvl_fail(KVL_EINVAL, "%s: the config needs positive dims and rope.Dr = qk_rope", fn);
    return KVL_OK;
}

int check_cache(const mla_config *c, const mla_cache_cuda *cache, size_t n, const char *fn)
{
    KVL_TRY(check_config(c, fn));
    const kv_ring_cuda *r = &cache->ring;
    if (!r->rows || r->width != row_width(c))
        return kvl_fail(KVL_EINVAL, "%s: cache rows hold %zu values, the config's Dc+Dr is %zu", fn, r->width,
                        row_width(c));
    if (n > r->max_tokens - r->len)
        return kvl_fail(KVL_EINVAL, "%s: %zu tokens after %zu exceed the cache's %zu positions", fn, n, r->len,
                        r->max_tokens);
    return KVL_OK;
}

dim3 grid_of(size_t threads) { return dim3(static_cast<unsigned>(kvl_div_up(threads, MLA_THREADS))); }

int head_matvec(float *out, const float *W, const float *x, const kvl_head_product &p)
{
    const size_t threads = p.B * p.H * p.n_out;
    if (kvl_div_up(threads, MLA_THREADS) > 0x7FFFFFFFu)
        return kvl_fail(KVL_EINVAL, "mla: %zu head outputs are more than one launch takes", threads);
    CUDA_CHECK(KVL_LAUNCH(kvl_head_matvec_kernel, grid_of(threads), MLA_THREADS, 0, out, W, x, p));
    return KVL_OK;
}

int broadcast_cols(float *dst, size_t dst_row, size_t dst_head, const float *src, size_t src_row, size_t R, size_t H,
                   size_t n)
{
    const size_t threads = R * H * n;
    if (kvl_div_up(threads, MLA_THREADS) > 0x7FFFFFFFu)
        return kvl_fail(KVL_EINVAL, "mla: %zu copied values are more than one launch takes", threads);
    CUDA_CHECK(KVL_LAUNCH(kvl_broadcast_cols_kernel, grid_of(threads), MLA_THREADS, 0, dst, dst_row, dst_head, src,
                          src_row, R, H, n));
    return KVL_OK;
}

/* q[B][H][Dnope+Dr] for x[B][d], q^R rotated at position pos (the B tokens share it); cq[B][Dq'] scratch */
int query(float *q, float *cq, const mla_config *c, const mla_weights *w, const float *x, size_t B, size_t pos)
{
    const size_t H = c->n_heads, Dqk = qk_width(c), Dq = c->q_lora_rank;
    if (Dq) {
        KVL_TRY(kvl_matmul_abt_f32_cuda(cq, x, w->w_dq, B, Dq, c->d));
        KVL_TRY(kvl_rmsnorm_f32_cuda(cq, cq, w->q_norm, B, Dq, Dq, c->norm_eps));
        KVL_TRY(kvl_matmul_abt_f32_cuda(q, cq, w->w_uq, B, H * Dqk, Dq));
    } else {
        KVL_TRY(kvl_matmul_abt_f32_cuda(q, x, w->w_q, B, H * Dqk, c->d));
    }
    return kvl_rope_rotate_heads_interleaved_cuda(q, 1, B * H * Dqk, c->qk_nope, B * H, Dqk, &c->rope,
                                                  static_cast<int64_t>(pos), 0);
}

/* rows[B][Dc+Dr] = [RMSNorm(c̃) | RoPE(k̃)] of x[B][d] at position pos */
int latent(float *rows, const mla_config *c, const mla_weights *w, const float *x, size_t B, size_t pos)
{
    const size_t Dw = row_width(c), Dc = c->kv_lora_rank;
    KVL_TRY(kvl_matmul_abt_f32_cuda(rows, x, w->w_dkv, B, Dw, c->d));
    KVL_TRY(kvl_rmsnorm_f32_cuda(rows, rows, w->kv_norm, B, Dc, Dw, c->norm_eps));
    return kvl_rope_rotate_heads_interleaved_cuda(rows, B, Dw, Dc, 1, 0, &c->rope, static_cast<int64_t>(pos), 0);
}

/* W_UK^h [Dnope][Dc] and W_UV^h [Dv][Dc] in W_UKV [H][Dnope+Dv][Dc] */
size_t head_block(const mla_config *c) { return (c->qk_nope + c->v_head) * c->kv_lora_rank; }

/* q̂[B][H][Dc+Dr] = [W_UK^hᵀ q^C_h | q^R_h] */
int absorb(float *q_hat, const float *q, const mla_config *c, const mla_weights *w, size_t B)
{
    const size_t H = c->n_heads, Dc = c->kv_lora_rank, Dw = row_width(c), Dqk = qk_width(c);
    const kvl_head_product p{B, H, Dc, c->qk_nope, head_block(c), 1, Dc, H * Dqk, Dqk, H * Dw, Dw};
    KVL_TRY(head_matvec(q_hat, w->w_ukv, q, p));
    return broadcast_cols(q_hat + Dc, Dw, 0, q + c->qk_nope, Dqk, B * H, 1, c->qk_rope);
}

/* o[B][H][Dv] = W_UV^h ô_h for ô[B][H][Dc] */
int unabsorb(float *o, const float *o_hat, const mla_config *c, const mla_weights *w, size_t B)
{
    const size_t H = c->n_heads, Dc = c->kv_lora_rank, Dv = c->v_head;
    const kvl_head_product p{B, H, Dv, Dc, head_block(c), Dc, 1, H * Dc, Dc, H * Dv, Dv};
    return head_matvec(o, w->w_ukv + c->qk_nope * Dc, o_hat, p);
}

/* heads_per_block: heads one block of the kernel attends (1, or KVL_MMA_HEADS on tensor cores) */
kvl_attend_shape absorbed_shape(const mla_config *c, const kv_ring_cuda *r, size_t split, size_t heads_per_block)
{
    const size_t n = kv_ring_held_cuda(r);
    split = kvl_decode_split(split, n, r->batch * kvl_div_up(c->n_heads, heads_per_block));
    return kvl_attend_shape{r->batch, c->n_heads, c->n_heads, row_width(c), c->kv_lora_rank, 1, r->len - 1,
                            r->len - n, n, split, kvl_div_up(n, split), c->window,
                            static_cast<float>(c->softmax_scale)};
}

/* every held row of the ring, each one key head whose first Dc channels are also the value */
kvl_attend_kv ring_rows(const kv_ring_cuda *r)
{
    return kvl_attend_kv{static_cast<const uint8_t *>(r->rows), r->slots, r->row_bytes, r->len, NULL, 0, 0, 0, 0, 0, 0};
}

/* ô over the ring's held rows, read as they are stored */
int attend_rows(float *o_hat, const float *q_hat, const kvl_attend_shape &sh, const kv_ring_cuda *r, float *work)
{
    const kvl_attend_kv kv = ring_rows(r);
    switch (r->store) {
    case KV_CUDA_F32: return kvl_attend_cuda<kvl_rows_f32, 1>(o_hat, q_hat, sh, kv, work);
    case KV_CUDA_BF16: return kvl_attend_cuda<kvl_rows_bf16, 1>(o_hat, q_hat, sh, kv, work);
    case KV_CUDA_V32_MAIN: return kvl_attend_cuda<kvl_rows_v32, 1>(o_hat, q_hat, sh, kv, work);
    }
    return kvl_fail(KVL_EINVAL, "mla: unknown cache store %d", static_cast<int>(r->store));
}

/* The token's query q[B][H][Dqk] and its row appended; cq and row are scratch. */
int step_begin(float *q, float *cq, float *row, const mla_config *c, const mla_weights *w, mla_cache_cuda *cache,
               const float *x)
{
    kv_ring_cuda *r = &cache->ring;
    KVL_TRY(query(q, cq, c, w, x, r->batch, r->len));
    KVL_TRY(latent(row, c, w, x, r->batch, r->len));
    return kv_ring_append_cuda(r, row, 1);
}

} /* namespace */

int mla_weights_to_cuda(mla_weights *dev, const mla_weights *host, const mla_config *c)
{
    memset(dev, 0, sizeof *dev);
    KVL_TRY(check_config(c, __func__));
    float *block = NULL;
    CUDA_CHECK(cudaMalloc(&block, host->n_floats * sizeof(float)));
    cudaError_t e = cudaMemcpy(block, host->block, host->n_floats * sizeof(float), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        cudaFree(block);
        CUDA_CHECK(e);
    }
    float *const *from[] = {&host->w_dq, &host->q_norm, &host->w_uq, &host->w_q, &host->w_dkv, &host->kv_norm,
                            &host->w_ukv, &host->w_o};
    float **to[] = {&dev->w_dq, &dev->q_norm, &dev->w_uq, &dev->w_q, &dev->w_dkv, &dev->kv_norm, &dev->w_ukv,
                    &dev->w_o};
    for (size_t i = 0; i < sizeof from / sizeof from[0]; i++)
        *to[i] = *from[i] ? block + (*from[i] - host->block) : NULL;
    dev->block = block;
    dev->n_floats = host->n_floats;
    return KVL_OK;
}

void mla_weights_free_cuda(mla_weights *dev)
{
    if (dev->block) cudaFree(dev->block);
    memset(dev, 0, sizeof *dev);
}

int mla_cache_init_cuda(mla_cache_cuda *cache, const mla_config *c, size_t max_tokens, kv_cuda_store store,
                        size_t batch)
{
    memset(cache, 0, sizeof *cache);
    KVL_TRY(check_config(c, __func__));
    KVL_TRY(kv_ring_init_cuda(&cache->ring, c->window, max_tokens, row_width(c), store, batch));
    return KVL_OK;
}

int mla_cache_append_cuda(mla_cache_cuda *cache, const mla_config *c, const float *rows, size_t n)
{
    KVL_TRY(check_cache(c, cache, n, __func__));
    return kv_ring_append_cuda(&cache->ring, rows, n);
}

size_t mla_cache_bytes_used_cuda(const mla_cache_cuda *cache) { return kv_ring_bytes_used_cuda(&cache->ring); }

void mla_cache_free_cuda(mla_cache_cuda *cache)
{
    kv_ring_free_cuda(&cache->ring);
    kvl_workspace_free(&cache->work);
    memset(cache, 0, sizeof *cache);
}

int mla_absorb_query_cuda(float *q_hat, const float *q, const mla_config *c, const mla_weights *w, size_t B)
{
    KVL_TRY(check_config(c, __func__));
    return absorb(q_hat, q, c, w, B);
}

int mla_unabsorb_output_cuda(float *o, const float *o_hat, const mla_config *c, const mla_weights *w, size_t B)
{
    KVL_TRY(check_config(c, __func__));
    return unabsorb(o, o_hat, c, w, B);
}

int mla_attend_absorbed_cuda(float *o_hat, const float *q_hat, const mla_config *c, mla_cache_cuda *cache)
{
    KVL_TRY(check_cache(c, cache, 0, __func__));
    if (cache->ring.len == 0) return kvl_fail(KVL_EINVAL, "%s: the cache holds no rows", __func__);
    const kvl_attend_shape sh = absorbed_shape(c, &cache->ring, cache->split, 1);
    KVL_TRY(kvl_workspace_reserve(&cache->work, kvl_attend_work_floats(sh) * sizeof(float)));
    return attend_rows(o_hat, q_hat, sh, &cache->ring, static_cast<float *>(cache->work.p));
}

namespace {

/* a kernel as attend_mma takes it: its name, then itself */
#define MMA_KERNEL(k) #k, k

/* The tensor-core attention with kernel k (named `name`, smem bytes of shared memory per block), then the
 * merge. */
template <typename... P>
int attend_mma(const char *name, void (*k)(P...), size_t smem, float *o_hat, const float *q_hat,
               const kvl_attend_shape &sh, const kv_ring_cuda *r, float *work)
{
    const size_t head_blocks = kvl_div_up(sh.H, KVL_MMA_HEADS);
    if (sh.n_splits > 0x7FFFFFFFu || head_blocks > 65535 || sh.B > 65535)
        return kvl_fail(KVL_EINVAL, "mla_attend_absorbed_mma_cuda: %zu splits of %zu heads in %zu sequences are more "
                        "than one launch takes", sh.n_splits, sh.H, sh.B);
    const kvl_attend_kv kv = ring_rows(r);
    float *part_o = work;
    kvl_softmax_part *part_ml = reinterpret_cast<kvl_softmax_part *>(work + sh.B * sh.H * sh.n_splits * sh.Dv);
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    const dim3 grid(static_cast<unsigned>(sh.n_splits), static_cast<unsigned>(head_blocks),
                    static_cast<unsigned>(sh.B));
    CUDA_CHECK(kvl_launch(name, k, grid, KVL_MMA_THREADS, smem, part_o, part_ml, q_hat, sh, kv));
    const dim3 merge_grid(1, static_cast<unsigned>(sh.H), static_cast<unsigned>(sh.B));
    CUDA_CHECK(KVL_LAUNCH(kvl_attend_merge_kernel<float>, merge_grid, KVL_ATT_THREADS, 0, o_hat, part_o, part_ml,
                          static_cast<const float *>(NULL), sh.H, static_cast<size_t>(1), sh.Dv, sh.n_splits));
    return KVL_OK;
}

int check_mma_cache(const mla_config *c, mla_cache_cuda *cache, const char *fn)
{
    KVL_TRY(check_cache(c, cache, 0, fn));
    const kv_ring_cuda *r = &cache->ring;
    if (c->kv_lora_rank != KVL_MMA_DV || c->qk_rope != KVL_MMA_DK - KVL_MMA_DV || r->store == KV_CUDA_F32)
        return kvl_fail(KVL_EINVAL, "%s: the tensor-core kernel takes Dc %d and Dr %d over bf16 or FP8 rows (got "
                        "Dc %zu, Dr %zu, %s rows)", fn, KVL_MMA_DV, KVL_MMA_DK - KVL_MMA_DV, c->kv_lora_rank,
                        c->qk_rope, r->store == KV_CUDA_F32 ? "float32" : r->store == KV_CUDA_BF16 ? "bf16" : "FP8");
    if (r->len == 0) return kvl_fail(KVL_EINVAL, "%s: the cache holds no rows", fn);
    return KVL_OK;
}

} /* namespace */

/* At B 64, 64 heads and 4,096 rows this gives 2 splits, whose partial sums (64 heads × 512 floats per
 * block, written, then read by the merge) add 11% to the bf16 rows' bytes (19% to FP8's); the attention
 * kernels' rule (two blocks per SM) gives 5, adding 28% (49%). */
size_t mla_mma_split_cuda(size_t n, size_t batch, size_t heads, size_t row_bytes)
{
    const size_t blocks = batch * kvl_div_up(heads, KVL_MMA_HEADS), sms = static_cast<size_t>(kvl_cuda_sm_count());
    const size_t fill = blocks >= sms ? 1 : sms / blocks;
    const size_t partial_bytes = 2 * KVL_MMA_HEADS * KVL_MMA_DV * sizeof(float);
    const size_t most = n / kvl_div_up(4 * partial_bytes, row_bytes), n_splits = fill < most ? fill : most ? most : 1;
    return kvl_div_up(kvl_div_up(n, n_splits), KVL_MMA_TK) * KVL_MMA_TK;
}

int mla_attend_absorbed_mma_cuda(float *o_hat, const float *q_hat, const mla_config *c, mla_cache_cuda *cache)
{
    KVL_TRY(check_mma_cache(c, cache, __func__));
    const kv_ring_cuda *r = &cache->ring;
    const size_t split =
        cache->split ? cache->split : mla_mma_split_cuda(kv_ring_held_cuda(r), r->batch, c->n_heads, r->row_bytes);
    const kvl_attend_shape sh = absorbed_shape(c, r, split, KVL_MMA_HEADS);
    KVL_TRY(kvl_workspace_reserve(&cache->work, kvl_attend_work_floats(sh) * sizeof(float)));
    float *work = static_cast<float *>(cache->work.p);
    return r->store == KV_CUDA_BF16
               ? attend_mma(MMA_KERNEL(kvl_mla_flash_kernel<kvl_fill_bf16>), KVL_FLASH_SMEM, o_hat, q_hat, sh, r, work)
               : attend_mma(MMA_KERNEL(kvl_mla_flash_kernel<kvl_fill_v32>), KVL_FLASH_SMEM, o_hat, q_hat, sh, r, work);
}

int mla_attend_absorbed_mma_simple_cuda(float *o_hat, const float *q_hat, const mla_config *c, mla_cache_cuda *cache)
{
    KVL_TRY(check_mma_cache(c, cache, __func__));
    const kv_ring_cuda *r = &cache->ring;
    const kvl_attend_shape sh = absorbed_shape(c, r, cache->split, KVL_MMA_HEADS);
    KVL_TRY(kvl_workspace_reserve(&cache->work, kvl_attend_work_floats(sh) * sizeof(float)));
    float *work = static_cast<float *>(cache->work.p);
    return r->store == KV_CUDA_BF16
               ? attend_mma(MMA_KERNEL(kvl_mla_mma_kernel<kvl_chunks_bf16>), KVL_MMA_SMEM, o_hat, q_hat, sh, r, work)
               : attend_mma(MMA_KERNEL(kvl_mla_mma_kernel<kvl_chunks_v32>), KVL_MMA_SMEM, o_hat, q_hat, sh, r, work);
}

int mla_decode_absorbed_cuda(float *out, const mla_config *c, const mla_weights *w, mla_cache_cuda *cache,
                             const float *x)
{
    KVL_TRY(check_cache(c, cache, 1, __func__));
    const kv_ring_cuda *r = &cache->ring;
    const size_t B = r->batch, H = c->n_heads, Dw = row_width(c), Dc = c->kv_lora_rank;
    const size_t held = r->len + 1 < r->slots ? r->len + 1 : r->slots;
    const size_t split = kvl_decode_split(cache->split, held, B * H);
    const kvl_attend_shape future{B, H, H, Dw, Dc, 1, 0, 0, held, split, kvl_div_up(held, split), 0, 0};
    const size_t floats = B * (H * qk_width(c) + c->q_lora_rank + Dw + H * Dw + H * Dc + H * c->v_head) +
                          kvl_attend_work_floats(future);
    KVL_TRY(kvl_workspace_reserve(&cache->work, floats * sizeof(float)));
    float *q = static_cast<float *>(cache->work.p), *cq = q + B * H * qk_width(c), *row = cq + B * c->q_lora_rank;
    float *q_hat = row + B * Dw, *o_hat = q_hat + B * H * Dw, *o = o_hat + B * H * Dc, *part = o + B * H * c->v_head;
    KVL_TRY(step_begin(q, cq, row, c, w, cache, x));
    KVL_TRY(absorb(q_hat, q, c, w, B));
    KVL_TRY(attend_rows(o_hat, q_hat, absorbed_shape(c, r, cache->split, 1), r, part));
    KVL_TRY(unabsorb(o, o_hat, c, w, B));
    return kvl_matmul_abt_f32_cuda(out, o, w->w_o, B, c->d, H * c->v_head);
}

int mla_decode_naive_cuda(float *out, const mla_config *c, const mla_weights *w, mla_cache_cuda *cache, const float *x)
{
    KVL_TRY(check_cache(c, cache, 1, __func__));
    const kv_ring_cuda *r = &cache->ring;
    const size_t B = r->batch, H = c->n_heads, Dw = row_width(c), Dc = c->kv_lora_rank, Dn = c->qk_nope;
    const size_t Dqk = qk_width(c), Dv = c->v_head, Dkv = Dqk + Dv;
    const size_t N = r->len + 1 < r->slots ? r->len + 1 : r->slots, t = r->len;
    const size_t split = kvl_decode_split(cache->split, N, B * H);
    const kvl_attend_shape sh{B, H, 1, Dqk, Dv, 1, t, t + 1 - N, N, split, kvl_div_up(N, split), c->window,
                              static_cast<float>(c->softmax_scale)};
    const size_t floats =
        B * (H * Dqk + c->q_lora_rank + Dw + N * Dw + N * H * Dkv + H * Dv) + kvl_attend_work_floats(sh);
    KVL_TRY(kvl_workspace_reserve(&cache->work, floats * sizeof(float)));
    float *q = static_cast<float *>(cache->work.p), *cq = q + B * H * Dqk, *row = cq + B * c->q_lora_rank;
    float *lat = row + B * Dw, *kv = lat + B * N * Dw, *o = kv + B * N * H * Dkv, *part = o + B * H * Dv;
    KVL_TRY(step_begin(q, cq, row, c, w, cache, x));
    /* every held row re-expanded, head by head: kv[B·N][H][Dnope + Dr + Dv] = [c W_UK^hᵀ | k_rope | c W_UV^hᵀ] */
    KVL_TRY(kv_ring_read_cuda(lat, r, t + 1 - N, N));
    for (size_t h = 0; h < H; h++) {
        const float *w_uk = w->w_ukv + h * head_block(c);
        KVL_TRY(kvl_matmul_abt_strided_cuda(kv + h * Dkv, H * Dkv, lat, Dw, w_uk, Dc, B * N, Dn, Dc));
        KVL_TRY(kvl_matmul_abt_strided_cuda(kv + h * Dkv + Dqk, H * Dkv, lat, Dw, w_uk + Dn * Dc, Dc, B * N, Dv, Dc));
    }
    KVL_TRY(broadcast_cols(kv + Dn, H * Dkv, Dkv, lat + Dc, Dw, B * N, H, c->qk_rope));
    const kvl_attend_kv fresh{NULL, 0, 0, t + 1 - N, reinterpret_cast<const uint8_t *>(kv), N, H * Dkv * sizeof(float),
                              0, Dkv, Dqk, Dkv};
    KVL_TRY(kvl_attend_cuda<kvl_rows_f32, 1>(o, q, sh, fresh, part));
    return kvl_matmul_abt_f32_cuda(out, o, w->w_o, B, c->d, H * Dv);
}
