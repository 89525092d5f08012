/* What the chapter programs refuse before they print: a config they would run at a size past the
 * bound their --help states. Each check returns KVL_OK, or KVL_EINVAL with a one-line
 * kvl_error() that names the config file, the field and its value, and the bound. */
#ifndef KVL_BOUNDS_H
#define KVL_BOUNDS_H

#include <stddef.h>

#include "config.h"

/* m's field `field` (its config.json names: "sliding_window (window_size)") holds value, from lo
 * to hi. */
int kvl_bound_field(const kvl_model *m, const char *field, size_t value, size_t lo, size_t hi);

/* Every entry of m's compress_ratios at most max. */
int kvl_bound_ratios(const kvl_model *m, size_t max);

/* A run at m's fields `fields` ("num_attention_heads 128, kv_lora_rank 512") that needs `amount` of
 * `unit` ("GiB of memory", "TFLOP"), at most max. */
int kvl_bound_run(const kvl_model *m, const char *fields, double amount, double max,
                  const char *unit);

#endif
