#include "v41_ced.h"

#include <stdlib.h>
#include <string.h>

#include "status.h"

int v41_ced_check(const v41_stack_config *s)
{
    if (!s || !s->layers) return kvl_fail(KVL_EINVAL, "v41_ced: no stack");
    const size_t E = s->n_encoder;
    if (E == 0 || E >= s->n_layers)
        return kvl_fail(KVL_EINVAL, "v41_ced: %zu encoder layers of %zu leave no encoder or no decoder", E, s->n_layers);
    for (size_t l = E + 1; l < s->n_layers; l++)
        if (s->layers[l].kind == KVL_LAYER_FULL)
            return kvl_fail(KVL_EINVAL,
                            "v41_ced: layer %zu is a decoder KV source after layer %zu; its input depends on decoder "
                            "layers an early exit skips",
                            l, E);
    return KVL_OK;
}

int v41_ced_prefill(float *h_enc, const v41_stack_config *s, const v41_stack_weights *w, v41_cache *c,
                const float *x, size_t S)
{
    KVL_TRY(v41_ced_check(s));
    if (!h_enc || !x || !c || S == 0) return kvl_fail(KVL_EINVAL, "v41_ced_prefill: NULL argument or no tokens");
    const size_t E = s->n_encoder;
    memcpy(h_enc, x, S * s->d * sizeof *h_enc);
    KVL_TRY(v41_stack_prefill_layers(h_enc, s, w, c, 0, E, S));
    if (s->layers[E].kind == KVL_LAYER_FULL) KVL_TRY(v41_stack_push_source(s, w, c, E, h_enc, S));
    c->len += S;
    for (size_t l = E; l < s->n_layers; l++) v4_rows_restart(&c->window[l], c->len);
    return KVL_OK;
}

int v41_ced_encoder_replay(float *h, const v41_stack_config *s, const v41_stack_weights *w, v41_cache *c, size_t from)
{
    KVL_TRY(v41_ced_check(s));
    return v41_stack_replay_layers(h, NULL, s, w, c, 0, s->n_encoder, from);
}

int v41_ced_decoder_replay(float *h, const v41_stack_config *s, const v41_stack_weights *w, v41_cache *c, size_t from)
{
    KVL_TRY(v41_ced_check(s));
    return v41_stack_replay_layers(h, NULL, s, w, c, s->n_encoder, s->n_layers, from);
}

size_t v41_ced_exact_replay_start(size_t P, size_t n_layers, size_t W)
{
    const size_t reach = n_layers * (W ? W - 1 : 0);
    return P > reach ? P - reach : 0;
}

size_t v41_ced_bounded_replay_start(size_t P, size_t W) { return P > W ? P - W : 0; }

void v41_ced_prefill_work(v41_ced_work *full, v41_ced_work *early, const v41_stack_config *s)
{
    *full = (v41_ced_work){0};
    *early = (v41_ced_work){0};
    for (size_t l = 0; l < s->n_layers; l++) {
        const v41_params p = v41_layer_params(&s->layers[l]);
        const uint64_t layer = s->d + p.core + p.compressor + p.index_keys + p.index_query;
        full->layers++;
        full->params += layer;
        if (l < s->n_encoder) {
            early->layers++;
            early->params += layer;
        } else if (s->layers[l].kind == KVL_LAYER_FULL) {
            early->params += s->d + p.compressor + p.index_keys;
        }
    }
}
