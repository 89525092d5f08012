/* What the GGUF reader must do with any bytes at all, checked by tests/fuzz/fuzz_gguf.c on every input
 * the fuzzer makes and by tests/test_reliability_fuzz.c on every saved one.
 *
 * kvl_gguf_parse either succeeds, and then every key and string lies inside the input and each key is
 * found again by its name, and the model read from it (kvl_model_from_gguf) is accepted or refused in
 * one line; or it fails with KVL_EPARSE, KVL_EINVAL or KVL_ENOMEM, nothing left allocated, and one line
 * of text in kvl_error() that starts with the origin. */
#ifndef KVL_TESTS_FUZZ_GGUF_PROPERTY_H
#define KVL_TESTS_FUZZ_GGUF_PROPERTY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf.h"
#include "status.h"

#define FUZZ_GGUF_ORIGIN "fuzz.gguf"

/* NULL when kvl_error() is one line naming the origin, else what is wrong with it. */
static inline const char *fuzz_gguf_message_fault(void)
{
    const char *msg = kvl_error();
    if (strncmp(msg, FUZZ_GGUF_ORIGIN ": ", sizeof FUZZ_GGUF_ORIGIN + 1) != 0) return "message does not name the file";
    if (strlen(msg) <= sizeof FUZZ_GGUF_ORIGIN + 1) return "empty message";
    for (const char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20) return "message is not one line of text";
    return NULL;
}

static inline int fuzz_gguf_inside(const kvl_gguf_str *s, const uint8_t *data, size_t size)
{
    const uint8_t *b = (const uint8_t *)s->bytes;
    return b >= data && s->len <= (size_t)(data + size - b);
}

/* NULL when every pair of a parsed g lies inside data[size] and is found by its key, else what is wrong. */
static inline const char *fuzz_gguf_pairs_fault(const kvl_gguf *g, const uint8_t *data, size_t size)
{
    char key[64];
    for (size_t i = 0; i < g->n_kv; i++) {
        const kvl_gguf_kv *kv = &g->kv[i];
        if (!fuzz_gguf_inside(&kv->key, data, size)) return "a key lies outside the input";
        if (kv->type == KVL_GGUF_STRING && !fuzz_gguf_inside(&kv->v.s, data, size)) return "a string lies outside the input";
        if (kv->type == KVL_GGUF_ARRAY && kv->count > size) return "an array longer than the input";
        if (kv->key.len >= sizeof key || memchr(kv->key.bytes, '\0', kv->key.len)) continue;
        memcpy(key, kv->key.bytes, kv->key.len);
        key[kv->key.len] = '\0';
        if (kvl_gguf_find(g, key) != kv) return "a key is not found by its name";
    }
    return NULL;
}

/* NULL when reading data[size] behaves, else what went wrong. */
static inline const char *fuzz_gguf_fault(const uint8_t *data, size_t size)
{
    kvl_gguf g;
    kvl_clear_error();
    int rc = kvl_gguf_parse(&g, data, size, size, FUZZ_GGUF_ORIGIN);
    if (rc != KVL_OK) {
        if (rc != KVL_EINVAL && rc != KVL_EPARSE && rc != KVL_ENOMEM) return "an unexpected status code";
        if (g.kv || g.n_kv) return "a failed parse left memory allocated";
        return fuzz_gguf_message_fault();
    }
    const char *fault = fuzz_gguf_pairs_fault(&g, data, size);
    kvl_model m;
    kvl_clear_error();
    rc = fault ? KVL_OK : kvl_model_from_gguf(&m, &g);
    if (!fault && rc == KVL_OK) {
        if (!m.layers || m.n_layers == 0 || m.n_heads % m.n_kv_heads) fault = "an accepted model is inconsistent";
        kvl_model_free(&m);
    } else if (!fault) {
        if (m.layers) fault = "a refused model left memory allocated";
        else if (rc != KVL_EINVAL && rc != KVL_ENOMEM) fault = "an unexpected status code for the model";
        else fault = fuzz_gguf_message_fault();
    }
    kvl_gguf_free(&g);
    return fault;
}

#endif
