/* kvlayer: run one attention layer of a DeepSeek-format checkpoint on hidden states from a file.
 *
 *   kvlayer --config CONFIG --weights DIR_OR_FILE --layer N --input FILE --output FILE
 *           [--prefill P] [--cache native|f32]
 *
 * CONFIG is the model's config.json in any spelling ref/core/config.h reads (Hugging Face,
 * transformers 5's save_pretrained, DeepSeek's inference), each field read as the code that writes
 * it computes; the program prints one line naming the layer it ran and how the rotary fields were
 * read. The weights are a .safetensors file, an index .json, or a directory holding
 * model.safetensors or else model.safetensors.index.json (transformers' order), under the Hugging
 * Face or the inference naming or as transformers 5 saves V4; BF16/F32, FP8 with block scales or F4
 * with E8M0 scales (ref/weights_load.h, ref/core/weight_read.h). A non-finite weight or input is
 * refused, naming the tensor and index; so are attention biases (attention_bias true, or a
 * projection's .bias tensor), which the layer does not add, and an input whose float32 arithmetic
 * overflows (named by its largest element), rather than written as NaN. The input is x[T][d]: a
 * .npy file ('<f4' or '<f8', C order) or a .safetensors file's tensor "x" (or its only tensor),
 * F32, F64, BF16 or F16. The layer prefills the first P tokens (default: all T) in one chunk and
 * decodes the rest one at a time, through a cache stored as float32 or in the generation's native
 * layout (bf16 rows for MLA; for V3.2 and V4 the rows formats/rows.h defines, which fix the
 * geometry, as --help lists); decode runs MLA's absorbed form and V3.2's masked form. The output
 * out[T][d] is written as .npy when its name ends so, else as safetensors (tensor "out").
 *
 * Generations: MLA (V2/V3), DSA (V3.2) and V4 (window-only, CSA and HCA layers). V4.1 is refused
 * with a message: its Reuse and Reindex layers read other layers' entries and picks, so one
 * layer alone is not the model's layer (ref/v41_stack.h runs the stack). Flags are read as
 * every program reads them (chapters/common/program.h: each once, counts in plain digits). Exit
 * status: 0; 2 for bad input (a flag, a file, a tensor), with one line on stderr naming it; 1
 * out of memory, or stdout not written. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dsa.h"
#include "file_io.h"
#include "mla.h"
#include "npy.h"
#include "program.h"
#include "progress.h"
#include "rows.h"
#include "safetensors.h"
#include "status.h"
#include "v4.h"
#include "weight_read.h"
#include "weights_load.h"

#define EXIT_BAD_INPUT 2

typedef struct {
    const char *config, *weights, *input, *output;
    size_t layer;
    long long prefill;   /* −1: every token */
    int native;
} options;

static int bad_input(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad_input(const char *fmt, ...)
{
    va_list ap;
    fputs("kvlayer: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return EXIT_BAD_INPUT;
}

/* A library failure: out of memory exits 1, anything else is bad input. */
static int failed(int rc)
{
    if (rc == KVL_ENOMEM) {
        fprintf(stderr, "kvlayer: %s\n", kvl_error());
        return EXIT_FAILURE;
    }
    return bad_input("%s", kvl_error());
}

static void usage(FILE *f)
{
    fputs(
        "usage: kvlayer --config CONFIG --weights DIR_OR_FILE --layer N --input FILE --output FILE\n"
        "               [--prefill P] [--cache native|f32]\n"
        "  runs attention layer N of the checkpoint on x[T][d] (.npy or safetensors tensor \"x\", float32 or float64):\n"
        "  the first P tokens (default all) as one prefill, the rest decoded one by one; writes out[T][d] (.npy or\n"
        "  safetensors) and prints one line saying what ran and how the config's rotary fields were read.\n"
        "  CONFIG: a Hugging Face config.json (rope_scaling, or transformers 5's rope_parameters, layer_types and\n"
        "  compress_rates) or DeepSeek's inference config; each field means what the code writing it computes.\n"
        "  --cache f32 runs any geometry; --cache native stores the generation's deployed rows, which fix it:\n",
        f);
    fprintf(
        f,
        "    MLA   bf16 rows of kv_lora_rank + qk_rope_head_dim values (any geometry)\n"
        "    V3.2  %zu-byte FP8 latent rows and %zu-byte index keys: kv_lora_rank %d, qk_rope_head_dim %d,"
        " index_head_dim %d\n"
        "    V4    %zu-byte FP8 rows and %zu-byte MXFP4 index keys: head_dim %d, qk_rope_head_dim %d,"
        " index_head_dim %d\n",
        kvf_row_bytes(KVF_ROW_V32_MAIN), kvf_row_bytes(KVF_ROW_V32_INDEX), KVF_V32_NOPE,
        KVF_V32_ROPE, KVF_INDEX_DIM, kvf_row_bytes(KVF_ROW_V4_MAIN),
        kvf_row_bytes(KVF_ROW_V4_INDEX), KVF_V4_NOPE + KVF_V4_ROPE, KVF_V4_ROPE, KVF_INDEX_DIM);
    kvl_usage_backend(f);
}

enum { F_CONFIG, F_WEIGHTS, F_INPUT, F_OUTPUT, F_LAYER, F_PREFILL, F_CACHE };
static const kvl_flag FLAGS[] = {{"--config", 1}, {"--weights", 1}, {"--input", 1}, {"--output", 1},
                                 {"--layer", 1},  {"--prefill", 1}, {"--cache", 1}};

/* 0 when --output may be written (ref/core/file_io.h) and is none of the files the run reads:
 * those named here, and every file opened from now on (a checkpoint directory's shards). */
static int check_output(const options *o)
{
    kvl_file_input(o->config, "--config");
    kvl_file_input(o->weights, "--weights");
    kvl_file_input(o->input, "--input");
    return kvl_check_output("kvlayer", "--output", o->output);
}

/* 0 with *o filled; 1 after --help (printed); 2 after a one-line refusal. */
static int parse_options(options *o, int argc, char **argv)
{
    *o = (options){.prefill = -1};
    size_t layer = 0, prefill = 0;
    kvl_args a = kvl_args_start("kvlayer", argc, argv, FLAGS, sizeof FLAGS / sizeof *FLAGS, 0);
    const char *v;
    const char **slot[] = {&o->config, &o->weights, &o->input, &o->output};
    for (int k; (k = kvl_args_next(&a, &v)) != KVL_ARGS_END;) {
        if (k == KVL_ARGS_HELP) { usage(stdout); return 1; }
        if (k == KVL_ARGS_BAD) return EXIT_BAD_INPUT;
        if (k <= F_OUTPUT) *slot[k] = v;
        else if (k == F_LAYER && kvl_parse_size(&layer, v, 0, (size_t)1 << 40))
            return kvl_bad_usage("kvlayer", "--layer needs a non-negative integer", v);
        else if (k == F_PREFILL && kvl_parse_size(&prefill, v, 0, (size_t)1 << 40))
            return kvl_bad_usage("kvlayer", "--prefill needs a non-negative integer", v);
        else if (k == F_PREFILL) o->prefill = (long long)prefill;
        else if (k == F_CACHE && strcmp(v, "native") && strcmp(v, "f32"))
            return kvl_bad_usage("kvlayer", "--cache must be native or f32", v);
        else if (k == F_CACHE) o->native = !strcmp(v, "native");
    }
    const char *missing = !o->config                 ? "--config"
                          : !o->weights              ? "--weights"
                          : !(a.seen >> F_LAYER & 1) ? "--layer"
                          : !o->input                ? "--input"
                          : !o->output               ? "--output"
                                                     : NULL;
    if (missing) return bad_input("%s is required (try --help)", missing);
    o->layer = layer;
    return check_output(o);
}

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

/* x[T][d] from a safetensors file: tensor "x", else its only tensor; 2-D. */
static int read_safetensors_input(float **x, size_t *T, size_t *d, const char *path)
{
    kvl_st_file f;
    int rc = kvl_st_open(&f, path);
    if (rc != KVL_OK) return rc;
    const kvl_st_tensor *t = kvl_st_find(&f, "x");
    if (!t && f.n_tensors == 1) t = &f.tensors[0];
    if (!t) rc = kvl_fail(KVL_EINVAL, "%s: no tensor \"x\" (and more than one tensor)", path);
    else if (t->n_dims != 2)
        rc = kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\" has %zu dims, want [T][d]", path, t->name,
                      t->n_dims);
    else if (!(*x = malloc(t->n_elements * sizeof **x + 1)))
        rc = kvl_fail(KVL_ENOMEM, "%s: out of memory", path);
    else {
        *T = t->shape[0];
        *d = t->shape[1];
        rc = kvl_st_read_f32(*x, t, path);
    }
    kvl_st_close(&f);
    return rc;
}

static int write_output(const options *o, const kvl_model *m, const float *out, size_t T, size_t d)
{
    if (ends_with(o->output, ".npy")) return kvl_npy_write(o->output, out, T, d);
    char layer[32], prefill[32];
    snprintf(layer, sizeof layer, "%zu", o->layer);
    snprintf(prefill, sizeof prefill, "%lld", o->prefill);
    const char *meta[] = {"generation", kvl_generation_name(m->generation), "layer", layer,
                          "prefill", prefill, "cache", o->native ? "native" : "f32"};
    kvl_st_entry e = {"out", KVL_ST_F32, 2, {T, d}, out};
    return kvl_st_write(o->output, &e, 1, meta, 4);
}

/* One line on what ran and how the config's rotary fields were read. */
static void report(const options *o, const kvl_model *m, size_t T, size_t P)
{
    char rope[192];
    kvl_rope_describe(rope, sizeof rope, m);
    const kvl_layer *l = &m->layers[o->layer];
    char ratio[32] = "";
    if (l->kind == KVL_LAYER_CSA || l->kind == KVL_LAYER_HCA)
        snprintf(ratio, sizeof ratio, ", ratio %zu", l->compress_ratio);
    printf(
        "kvlayer: layer %zu (%s %s%s) of %s, %zu tokens (%zu prefilled, %zu decoded), %s cache, wrote %s; %s\n",
        o->layer, kvl_generation_name(m->generation), kvl_layer_kind_name(l->kind), ratio,
        o->config, T, P, T - P, o->native ? "native" : "float32", o->output, rope);
}

/* A finite input whose output is not: the float32 arithmetic overflowed (a projection or a score
 * past FLT_MAX; a prefill's masked products carry it to other rows), so refuse, naming the input
 * element of largest magnitude, rather than write NaN or inf. 0 when every output is finite. */
static int refuse_overflow(const options *o, const float *x, const float *out, size_t T, size_t d)
{
    size_t t = 0;
    while (t < T * d && isfinite(out[t])) t++;
    if (t == T * d) return 0;
    size_t at = 0;
    for (size_t i = 1; i < T * d; i++)
        if (fabsf(x[i]) > fabsf(x[at])) at = i;
    return bad_input("%s: x[%zu][%zu] = %g, its largest element: the layer's float32 arithmetic "
                     "overflows on this input (output row %zu is not finite); scale the hidden "
                     "states down", o->input, at / d, at % d, (double)x[at], t / d);
}

/* ---- the layers ------------------------------------------------------------------------------ */

static int run_mla(float *out, const kvl_model *m, const kvl_st_checkpoint *ck, const options *o,
                   const float *x, size_t T, size_t P)
{
    mla_config c;
    mla_weights w;
    mla_cache cache;
    int rc = mla_config_from_model(&c, m);
    if (rc != KVL_OK) return rc;
    if ((rc = mla_weights_load(&w, &c, &m->rope, ck, o->layer)) != KVL_OK) return rc;
    rc = mla_cache_init(&cache, &c, T, o->native ? KV_STORE_BF16 : KV_STORE_F32);
    if (rc == KVL_OK) {
        if (P) rc = mla_prefill(out, &c, &w, &cache, x, P);
        for (size_t t = P; rc == KVL_OK && t < T; t++)
            rc = mla_decode_absorbed(out + t * c.d, &c, &w, &cache, x + t * c.d);
        mla_cache_free(&cache);
    }
    mla_weights_free(&w);
    return rc;
}

static int run_dsa(float *out, const kvl_model *m, const kvl_st_checkpoint *ck, const options *o,
                   const float *x, size_t T, size_t P)
{
    dsa_config c;
    dsa_weights w;
    dsa_cache cache;
    int rc = dsa_config_from_model(&c, m);
    if (rc != KVL_OK) return rc;
    if ((rc = dsa_weights_load(&w, &c, &m->rope, ck, o->layer)) != KVL_OK) return rc;
    rc = dsa_cache_init(&cache, &c, T, o->native ? DSA_CACHE_V32 : DSA_CACHE_F32);
    if (rc == KVL_OK) {
        size_t d = c.mla.d;
        if (P) rc = dsa_prefill(out, NULL, &c, &w, &cache, x, P);
        for (size_t t = P; rc == KVL_OK && t < T; t++)
            rc = dsa_decode_masked(out + t * d, NULL, &c, &w, &cache, x + t * d);
        dsa_cache_free(&cache);
    }
    dsa_weights_free(&w);
    return rc;
}

static int run_v4(float *out, const kvl_model *m, const kvl_st_checkpoint *ck, const options *o,
                  const float *x, size_t T, size_t P)
{
    v4_config c;
    v4_weights w;
    v4_cache cache;
    int rc = v4_config_from_model(&c, m, o->layer);
    if (rc != KVL_OK) return rc;
    if ((rc = v4_weights_load(&w, &c, ck, o->layer)) != KVL_OK) return rc;
    rc = v4_cache_init(&cache, &c, T, o->native ? V4_CACHE_NATIVE : V4_CACHE_F32);
    if (rc == KVL_OK) {
        if (P) rc = v4_prefill(out, NULL, &c, &w, &cache, x, P);
        for (size_t t = P; rc == KVL_OK && t < T; t++)
            rc = v4_decode(out + t * c.d, NULL, &c, &w, &cache, x + t * c.d);
        v4_cache_free(&cache);
    }
    v4_weights_free(&w);
    return rc;
}

static int run(const options *o, const kvl_model *m, const kvl_st_checkpoint *ck)
{
    float *x = NULL;
    size_t T = 0, d = 0;
    int rc = ends_with(o->input, ".npy") ? kvl_npy_read(&x, &T, &d, o->input)
                                         : read_safetensors_input(&x, &T, &d, o->input);
    if (rc != KVL_OK) {
        free(x);
        return failed(rc);
    }
    int status = 0;
    float *out = NULL;
    if ((rc = kvl_expect_finite(x, (const size_t[]){T, d}, 2, o->input, "x")) != KVL_OK)
        status = failed(rc);
    else if (d != m->d)
        status = bad_input("%s: x is [%zu][%zu], the config's width is %zu", o->input, T, d, m->d);
    else if (T == 0) status = bad_input("%s: x holds no tokens", o->input);
    else if (o->prefill > (long long)T)
        status = bad_input("--prefill %lld exceeds the %zu input tokens", o->prefill, T);
    else if (!(out = calloc(T * d, sizeof *out)))
        status = failed(kvl_fail(KVL_ENOMEM, "out of memory"));
    else {
        size_t P = o->prefill < 0 ? T : (size_t)o->prefill;
        kvl_progress("layer %zu over %zu tokens", o->layer, T);
        rc = m->generation == KVL_GEN_MLA   ? run_mla(out, m, ck, o, x, T, P)
           : m->generation == KVL_GEN_DSA ? run_dsa(out, m, ck, o, x, T, P)
                                          : run_v4(out, m, ck, o, x, T, P);
        if (rc == KVL_OK && (status = refuse_overflow(o, x, out, T, d)) != 0) rc = KVL_OK;
        else if (rc == KVL_OK) {
            kvl_progress("writing the output");
            rc = write_output(o, m, out, T, d);
        }
        if (rc != KVL_OK) status = failed(rc);
        else if (!status) report(o, m, T, P);
    }
    free(out);
    free(x);
    return status;
}

int main(int argc, char **argv)
{
    options o;
    int parsed = parse_options(&o, argc, argv);
    if (parsed) return parsed == 1 ? kvl_exit_status("kvlayer", 0) : EXIT_BAD_INPUT;
    kvl_progress_start("kvlayer");
    kvl_progress("reading the config, the weights and x");
    kvl_model m;
    int rc = kvl_model_load(&m, o.config);
    if (rc != KVL_OK) {
        kvl_progress_stop();
        return failed(rc);
    }
    int status = 0;
    if (o.layer >= m.n_layers)
        status = bad_input("--layer %zu: the config has %zu layers", o.layer, m.n_layers);
    else if (m.generation != KVL_GEN_MLA && m.generation != KVL_GEN_DSA &&
             m.generation != KVL_GEN_V4)
        status = bad_input("%s: generation %s: kvlayer runs MLA (V2/V3), DSA (V3.2) and V4 layers",
                           o.config, kvl_generation_name(m.generation));
    else if (m.attention_bias && m.generation != KVL_GEN_V4)   /* V4's modules never add one */
        status = bad_input("%s: field attention_bias is true: kvlayer computes the attention layer "
                           "without biases", o.config);
    else {
        kvl_st_checkpoint ck;
        rc = kvl_st_checkpoint_open(&ck, o.weights);
        status = rc != KVL_OK ? failed(rc) : run(&o, &m, &ck);
        if (rc == KVL_OK) kvl_st_checkpoint_close(&ck);
    }
    kvl_model_free(&m);
    kvl_progress_stop();
    return kvl_exit_status("kvlayer", status);
}
