/* V4.1's causal encoder–decoder and replay on the GPU: the twins of ref/v41_ced.h's entry points, as host code
 * over the layer stack's device pieces (v41_stack_cuda.h); the checks and replay starts are ref/v41_ced.h's own
 * (v41_ced_check, v41_ced_exact_replay_start, v41_ced_bounded_replay_start).
 *
 *   v41_ced_prefill_cuda          the early exit: the encoder's layers, then the decoder KV source's compressor
 *                             and index keys on the encoder's output h_enc; no decoder layer attends
 *   v41_ced_encoder_replay_cuda   the encoder's layers again from a start s, every window restarted at s
 *   v41_ced_decoder_replay_cuda   the decoder's layers from s over h_enc: the windows the early exit left empty
 * Arrays are device buffers; weights as v41_stack_weights_to_cuda gives them. Outputs match the ref's to
 * float rounding (tests/cuda/test_cuda_v41_ced.c). Functions return KVL_OK, KVL_EINVAL (kvl_error() names the
 * problem), KVL_ENOMEM or KVL_ECUDA.
 *
 * Letters: S chunk, P tokens cached, s replay start, d width, L layers, E encoder layers. */
#ifndef KVL_CED_CUDA_H
#define KVL_CED_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "v41_ced.h"
#include "v41_stack_cuda.h"

/* h_enc[S][d] = the encoder's output for x[S][d] at positions len … len + S − 1; the encoder's windows,
 * entries and keys and the decoder KV source's entries, keys and tail are cached; the decoder's windows
 * restart empty at len + S. */
int v41_ced_prefill_cuda(float *h_enc, const v41_stack_config *s, const v41_stack_weights *w, v41_cache_cuda *c,
                     const float *x, size_t S);

/* h[P − from][d] enters as the prompt's x and leaves as h_enc. */
int v41_ced_encoder_replay_cuda(float *h, const v41_stack_config *s, const v41_stack_weights *w, v41_cache_cuda *c,
                            size_t from);

/* h[P − from][d] enters as h_enc and leaves as the stack's output. */
int v41_ced_decoder_replay_cuda(float *h, const v41_stack_config *s, const v41_stack_weights *w, v41_cache_cuda *c,
                            size_t from);

#ifdef __cplusplus
}
#endif

#endif
