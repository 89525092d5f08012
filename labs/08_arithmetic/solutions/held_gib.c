/* Lab solution: the GiB one sequence of T tokens holds (the contract is above the stub,
 * labs/08_arithmetic/held_gib.c). */
#include "lab.h"

double held_gib(const kvl_model *m, const kv_rows *r, double bytes_per_token, double T)
{
    const double W = (double)m->window;
    const int bounded = m->generation == KVL_GEN_MHA && W > 0;
    const double held = bounded && T > W ? W : T;
    const double window_bytes = (double)m->n_layers * W * (double)r->window_row;
    return (held * bytes_per_token + window_bytes) / (1024.0 * 1024.0 * 1024.0);
}
