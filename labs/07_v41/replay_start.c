/* Lab: where replay starts after a prefix-cache hit (chapter 7, "What it computes", the causal
 * encoder–decoder, replay and prefix caching).
 *
 *   P          tokens of the cached prefix; the next token is at position P
 *   n_layers   layers replayed, each with a window of W rows (query i sees rows i − W + 1 … i)
 *   bounded    0: the exact start, 1: bounded replay's start
 *   returns    s, the first token replayed
 *
 * A replay from s restarts every window at s: layer ℓ's rows come out exact from s + ℓ(W − 1) on
 * (each layer needs W − 1 exact positions from the one below). The next token reads each layer's
 * last W − 1 rows, P − W + 1 … P − 1, so
 *   exact replay     s = P − n_layers·(W − 1), the latest start that rebuilds them all;
 *   bounded replay   s = P − W, the last W tokens (the report's n_win), exact in the first layer
 * only; and 0 (replay the whole prefix) wherever that subtraction would go below 0. W ≥ 1.
 *
 * The grader (make lab-07) checks the start, exactly, against ref/v41_ced.h's
 * v41_ced_exact_replay_start and v41_ced_bounded_replay_start for every P from 0 past the exact
 * reach, at V4.1-Flash's 40 layers and W 128, its 20 encoder layers, the toy's 10 layers and W 8,
 * one layer, and W = 1 (a window of the token itself, nothing to replay). */
#include "lab.h"

size_t replay_start(size_t P, size_t n_layers, size_t W, int bounded)
{
    (void)P, (void)n_layers, (void)W, (void)bounded;
    return 0;
}
