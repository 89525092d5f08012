/* What the groups measure on: random inputs and the configs of ref/configs. */
#include <stdlib.h>

#include "bench.h"
#include "status.h"

float *kvb_random_floats(size_t n, kvl_rng *rng)
{
    float *x = malloc(n * sizeof *x);
    if (x) kvl_rng_uniform_f32(rng, x, n, -1.0, 1.0);
    return x;
}

int kvb_load_config(kvl_model *m, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/ref/configs/%s", KVL_SOURCE_DIR, name);
    if (kvl_model_load(m, path) == KVL_OK) return 0;
    fprintf(stderr, "kvbench: %s\n", kvl_error());
    return 1;
}

int kvb_v4_layer(v4_config *c, const kvl_model *m, kvl_layer_kind kind)
{
    for (size_t l = 0; l < m->n_layers; l++)
        if (m->layers[l].kind == kind) return v4_config_from_model(c, m, l) != KVL_OK;
    return 1;
}
