/* Every field a config.json may hold for the model types ref/core/config.h reads, with what the loader does
 * with it: the audit behind "read with the writer's meaning, or refused by name".
 *
 * The writers are transformers 5's configuration classes (their to_dict() keys, attribute_map aliases and the
 * legacy keywords their __post_init__ converts), DeepSeek's own Hugging Face configs for V2 and V3, and the
 * inference code's ModelArgs (DeepSeek-V3 and V3.2-Exp inference/model.py, the V4-Flash and V4.1-Flash
 * inference configs). tests/data/config_fields.tsv lists them as those classes define them, and
 * test_core_config_fields holds this table to that list and to the loader: a field read changes the model or
 * is refused when its value changes, a field ignored never changes it, a field held at its default is
 * refused at any other value.
 *
 * The rule the loader applies with it (config.c, check_fields):
 *   - a file without model_type is read as DeepSeek's ModelArgs reads its keywords, and ModelArgs(**config)
 *     raises on a keyword it does not define: every key must be one of this table;
 *   - a file with a model_type is read as transformers reads it, which keeps unknown keys as attributes that
 *     its model never reads: an unknown key or an ignored one changes nothing; a key the loader reads must
 *     be one that model type's writers define, or it is refused (another class's setting, which that model
 *     type's code would ignore);
 *   - a KVL_FIELD_DEFAULT key at any other value than its default is refused, whoever writes it. */
#ifndef KVL_CONFIG_FIELDS_H
#define KVL_CONFIG_FIELDS_H

#include <stddef.h>

/* Who defines a field. */
enum {
    W_BASE = 1u << 0,       /* transformers' PretrainedConfig: every model type */
    W_V2 = 1u << 1,         /* DeepseekV2Config */
    W_V3 = 1u << 2,         /* DeepseekV3Config */
    W_V32 = 1u << 3,        /* DeepseekV32Config */
    W_V4 = 1u << 4,         /* DeepseekV4Config */
    W_LLAMA = 1u << 5,
    W_MISTRAL = 1u << 6,
    W_MIXTRAL = 1u << 7,
    W_QWEN2 = 1u << 8,
    W_QWEN3 = 1u << 9,
    W_GEMMA = 1u << 10,
    W_FALCON = 1u << 11,
    W_HUB = 1u << 12,       /* DeepSeek's own Hugging Face configs (configuration_deepseek.py, V2 and V3) */
    W_DS3 = 1u << 13,       /* ModelArgs of DeepSeek-V3's inference/model.py (V2 and V3 configs) */
    W_DS32 = 1u << 14,      /* ModelArgs of DeepSeek-V3.2-Exp */
    W_DS4 = 1u << 15,       /* the V4-Flash inference config */
    W_DS41 = 1u << 16,      /* the V4.1-Flash inference config */
    W_KVLINEAGE = 1u << 17, /* this project's annotations */
};
#define W_DEEPSEEK_INFERENCE (W_DS3 | W_DS32 | W_DS4 | W_DS41)

typedef enum {
    KVL_FIELD_READ,     /* read by config.c with its writer's meaning */
    KVL_FIELD_IGNORED,  /* no bearing on attention, the cache, the parameter count or the precision */
    KVL_FIELD_DEFAULT,  /* read at its default only; another value is refused */
} kvl_field_use;

typedef struct {
    const char *name;
    unsigned writers;    /* W_* */
    kvl_field_use use;
    const char *note;    /* IGNORED: why it changes nothing here; DEFAULT: the default, as JSON text */
} kvl_config_field;

extern const kvl_config_field kvl_config_fields[];
extern const size_t kvl_config_fields_count;

/* The row of `name`, or NULL. */
const kvl_config_field *kvl_config_field_find(const char *name);

#endif
