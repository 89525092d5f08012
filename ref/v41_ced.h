/* V4.1's causal encoder–decoder and bounded replay, on the layer stack of ref/v41_stack.h (DeepSeek-V4.1
 * report, sections 2.2 and 3.2.2; chapters/07_v41/README.md; tests/test_ch07_replay.c proves both).
 *
 * Encoder: layers 0 … E − 1, decoder: E … L − 1, E = L/2. A decoder KV source reads the encoder's final
 * hidden state h_enc. In V4.1-Flash the only one is layer 20 = E, whose input is h_enc in the ordinary
 * forward too, so the early exit changes no number: a prefill runs the encoder, then only the decoder KV
 * source's compressor and index keys on h_enc, and every decoder layer's global branch is complete. Its
 * window rows are not: they come from decoder replay.
 *
 * v41_ced_check refuses a stack with a decoder KV source other than layer E, whose input would depend on
 * decoder layers the early exit skips. (Feeding such a source h_enc instead, one reading of the report's
 * equation 1, would change the model's forward, which a reference of the published model should not do.)
 *
 * Replay from s < len (= P, the tokens cached): the tokens s … P − 1 run through a range of layers with
 * every window restarted at s, so query i sees window rows [max(s, i − W + 1), i]; entries, index keys and
 * compressor tails are taken as the cache holds them. Over n layers, layer ℓ's rows are exact from
 * position s + ℓ(W − 1) on, so
 *   exact replay     s ≤ P − n(W − 1): every layer's last W − 1 rows, hence the next token, exact;
 *   bounded replay   s = P − W, the last W tokens (the report's n_win): the first layer's rows exact, the
 *                    deeper ones approximate. The error is measured (chapter 7), not assumed small:
 *                    random weights have no trained fading of influence.
 * Encoder replay rebuilds the encoder's windows after a prefix-cache hit and yields h_enc for the replayed
 * tokens; decoder replay feeds those h_enc through the decoder to make its windows.
 *
 * Letters: S chunk, P tokens cached, s replay start, d width, L layers, E encoder layers, W window. */
#ifndef KVL_CED_H
#define KVL_CED_H

#include <stddef.h>
#include <stdint.h>

#include "v41_stack.h"

/* KVL_EINVAL naming the layer unless 0 < E < L and every decoder KV source is layer E. */
int v41_ced_check(const v41_stack_config *s);

/* Early-exit prefill of x[S][d] at positions len … len + S − 1: h_enc[S][d] = the encoder's output; the
 * encoder's windows, entries and keys and every decoder KV source's entries, keys and tail are cached;
 * the decoder's windows restart empty at len + S (decoder replay fills them). */
int v41_ced_prefill(float *h_enc, const v41_stack_config *s, const v41_stack_weights *w, v41_cache *c,
                const float *x, size_t S);

/* Replay of the encoder from `from`: h[P − from][d] enters as the prompt's x and leaves as h_enc. */
int v41_ced_encoder_replay(float *h, const v41_stack_config *s, const v41_stack_weights *w, v41_cache *c, size_t from);

/* Replay of the decoder from `from`: h[P − from][d] enters as h_enc and leaves as the stack's output. */
int v41_ced_decoder_replay(float *h, const v41_stack_config *s, const v41_stack_weights *w, v41_cache *c, size_t from);

/* The replay start that rebuilds n_layers windows of W exactly for a prefix of P tokens: P − n(W − 1), 0
 * when that is negative (replay everything). */
size_t v41_ced_exact_replay_start(size_t P, size_t n_layers, size_t W);

/* Bounded replay's start: P − W, the last W tokens (0 for a shorter prefix). */
size_t v41_ced_bounded_replay_start(size_t P, size_t W);

/* The work of a prefill per prompt token: layers whose attention runs, and the parameters it reads. */
typedef struct {
    size_t layers;
    uint64_t params;
} v41_ced_work;

/* full: every layer (pre-norm and attention); early: the encoder's layers, plus each decoder KV source's
 * pre-norm, compressor and index-key weights (its attention does not run). From the config's widths. */
void v41_ced_prefill_work(v41_ced_work *full, v41_ced_work *early, const v41_stack_config *s);

#endif
