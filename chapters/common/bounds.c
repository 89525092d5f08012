/* The sizes a chapter program refuses to run at, checked against its config. */
#include "bounds.h"

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
