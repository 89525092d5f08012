/* What kvl_model_parse must do with any bytes at all, checked by tests/fuzz/fuzz_config.c on every input
 * the fuzzer makes and by tests/test_reliability_fuzz.c on every saved regression.
 *
 * Either KVL_OK, for bytes that are exactly one JSON object with no key repeated at any depth and
 * nothing but blanks after it (cJSON, walked here, is the judge), and a model whose every field is in
 * range and whose layer map points only at earlier or equal layers of the model; or a KVL_E* code with
 * one line of text in kvl_error() that starts with the origin. Memory errors and undefined behaviour
 * are the sanitizers' to catch. */
#ifndef KVL_TESTS_FUZZ_CONFIG_PROPERTY_H
#define KVL_TESTS_FUZZ_CONFIG_PROPERTY_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "status.h"

#define FUZZ_CONFIG_ORIGIN "fuzz.json"

/* The layer map of a parsed model is consistent: NULL, or what is wrong with it. */
static inline const char *fuzz_config_model_fault(const kvl_model *m)
{
    if (!m->layers || m->n_layers < 1 || m->n_layers > 4096) return "layer count out of range or no layers";
    if (m->d < 1 || m->n_heads < 1 || m->n_kv_heads < 1 || m->n_heads % m->n_kv_heads) return "head counts";
    if (m->qk_rope_head_dim % 2 || m->qk_rope_head_dim > m->head_dim) return "rotary width";
    if (!(m->norm_eps > 0 && m->norm_eps <= 1)) return "norm_eps";
    if ((unsigned)m->generation > KVL_GEN_V41 || (unsigned)m->kv_cache > KVL_CACHE_MLA_FP8) return "enum out of range";
    if (!kvl_generation_name(m->generation) || !kvl_cache_layout_name(m->kv_cache)) return "unnamed enum";
    for (size_t i = 0; i < m->n_layers; i++) {
        const kvl_layer *l = &m->layers[i];
        if ((unsigned)l->kind > KVL_LAYER_REUSE || !kvl_layer_kind_name(l->kind)) return "layer kind out of range";
        if (l->kv_source >= (int)m->n_layers || l->index_source >= (int)m->n_layers) return "source past the layers";
        if (l->kv_source > (int)i || l->index_source > (int)i) return "a layer reads a later layer";
        if (l->kind == KVL_LAYER_WINDOW && (l->compress_ratio != 0 || l->kv_source != -1)) return "window layer";
        if (l->kind != KVL_LAYER_WINDOW && (l->compress_ratio == 0 || l->kv_source < 0)) return "compressing layer";
        (void)kvl_layer_writes_cache(m, i);
    }
    return NULL;
}

/* NULL when some object at or under `it` holds a key twice, else that key. */
static inline const char *fuzz_config_repeated_key(const cJSON *it)
{
    for (const cJSON *a = it->child; a; a = a->next) {
        if (cJSON_IsObject(it))
            for (const cJSON *b = a->next; b; b = b->next)
                if (strcmp(a->string, b->string) == 0) return a->string;
        const char *inner = fuzz_config_repeated_key(a);
        if (inner) return inner;
    }
    return NULL;
}

/* A parse that succeeded read exactly one JSON object, blanks around it, with no repeated key. */
static inline const char *fuzz_config_text_fault(const uint8_t *data, size_t size)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts((const char *)data, size, &end, 0);
    const char *fault = NULL;
    if (!root || !cJSON_IsObject(root)) fault = "accepted text that is not a JSON object";
    else if (fuzz_config_repeated_key(root)) fault = "accepted a repeated key";
    else
        for (const char *p = end; p < (const char *)data + size && !fault; p++)
            if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') fault = "accepted text after the object";
    cJSON_Delete(root);
    return fault;
}

/* NULL when parsing data[size] behaves, else what went wrong. */
static inline const char *fuzz_config_fault(const uint8_t *data, size_t size)
{
    kvl_model m;
    kvl_clear_error();
    int rc = kvl_model_parse(&m, (const char *)data, size, FUZZ_CONFIG_ORIGIN);
    if (rc == KVL_OK) {
        const char *fault = fuzz_config_model_fault(&m);
        kvl_model_free(&m);
        return fault ? fault : fuzz_config_text_fault(data, size);
    }
    if (rc != KVL_EINVAL && rc != KVL_EPARSE && rc != KVL_ENOMEM) return "an unexpected status code";
    if (m.layers) return "a failed parse left layers allocated";
    const char *msg = kvl_error();
    if (strncmp(msg, FUZZ_CONFIG_ORIGIN ": ", sizeof FUZZ_CONFIG_ORIGIN + 1) != 0)
        return "message does not name the file";
    if (strlen(msg) <= sizeof FUZZ_CONFIG_ORIGIN + 1) return "empty message";
    for (const char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20) return "message is not one line of text";
    return NULL;
}

#endif
