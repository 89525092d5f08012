/* V4.1's causal encoder–decoder and replay on the GPU (v41_ced_cuda.h): host code only, over v41_stack_cuda.h.
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c v41_ced_cuda.cu (make cuda); g++ -x c++ for the emulator
 *        (make test). No kernel of its own. */
#include "device.cuh"

#include "v41_ced_cuda.h"
#include "status.h"

int v41_ced_prefill_cuda(float *h_enc, const v41_stack_config *s, const v41_stack_weights *w, v41_cache_cuda *c,
                     const float *x, size_t S)
{
    KVL_TRY(v41_ced_check(s));
    if (!h_enc || !x || !c || S == 0) return kvl_fail(KVL_EINVAL, "%s: NULL argument or no tokens", __func__);
    const size_t E = s->n_encoder;
    if (h_enc != x) KVL_TRY(kvl_cuda_copy(h_enc, x, S * s->d * sizeof *h_enc));
    KVL_TRY(v41_stack_prefill_layers_cuda(h_enc, s, w, c, 0, E, S));
    if (s->layers[E].kind == KVL_LAYER_FULL) KVL_TRY(v41_stack_push_source_cuda(s, w, c, E, h_enc, S));
    c->len += S;
    for (size_t l = E; l < s->n_layers; l++) v41_rows_restart_cuda(&c->window[l], c->len);
    return KVL_OK;
}

int v41_ced_encoder_replay_cuda(float *h, const v41_stack_config *s, const v41_stack_weights *w, v41_cache_cuda *c,
                            size_t from)
{
    KVL_TRY(v41_ced_check(s));
    return v41_stack_replay_layers_cuda(h, NULL, s, w, c, 0, s->n_encoder, from);
}

int v41_ced_decoder_replay_cuda(float *h, const v41_stack_config *s, const v41_stack_weights *w, v41_cache_cuda *c,
                            size_t from)
{
    KVL_TRY(v41_ced_check(s));
    return v41_stack_replay_layers_cuda(h, NULL, s, w, c, s->n_encoder, s->n_layers, from);
}
