/* The outside referee: ref/ against the Hugging Face implementations on the same weights and inputs.
 *
 * tests/reference/make_reference.py built tiny random attention layers with transformers' own classes
 * (DeepseekV3Attention, DeepseekV32Attention, DeepseekV4Attention for a window-only, a CSA and an HCA
 * layer), ran them in float64 and wrote their weights (under the checkpoint names, V3's as FP8 blocks
 * with weight_scale_inv), the hidden states x and the outputs. Here the files are read through the
 * safetensors reader and the name mapping, the modules run in float32, and every path (whole sequence,
 * prefill + decode in each form) must match. The torch and transformers versions the files were made
 * with are in their metadata and are printed with any failure. kvlayer, the program a reader runs on a
 * checkpoint, is checked on the same files as a new user would run it, and on each kind of bad input.
 * V4.1 has no transformers class: its referee is the script's own torch rendering of the formulas of
 * the DeepSeek-V4.1-Flash inference/model.py as chapters/07_v41/README.md states them (a six-layer stack
 * with every mode and the candidate pool), without the FP4/FP8 round trips, so it is compared with the
 * float32 paths.
 *
 * Where transformers' ports could differ from DeepSeek's inference code (chapters/DISAGREEMENTS.md),
 * they agree on these files:
 *   indexer RoPE: transformers' V3.2 rotates the leading channels half-split, as the V3.2 inference code;
 *   index weights: V3.2 and V4 apply HI^−½ and DI^−½, as the inference code;
 *   per-head query RMSNorm: V4's q_b_norm, as the V4 inference code;
 *   V4 causality: the installed revision masks compressed entries i ≥ ⌊(t+1)/M⌋ in both HCA and the CSA
 *         indexer, the inference code's rule (not the zero-padded revisions);
 *   V4 RoPE: interleaved pairs on the trailing channels, as the inference code;
 *   Hadamard rotation: transformers has none; the f32 indexers (the forwards') have none either, and the
 *         rotation is orthonormal, so scores are equal in exact arithmetic;
 *   YaRN: transformers takes it from the config; V3's mscale = mscale_all_dim and V4's forced
 *         attention_factor 1 keep its cos/sin unscaled, as the inference code.
 * torch.topk breaks ties in no stated order, ref/core/topk.h by the smaller position; ReLU makes exact
 * ties at 0 common, so the script draws until every query's K-th and (K+1)-th index scores differ by
 * more than 10^−3, and the comparison is of that rule on tie-free data.
 * transformers applies V3's interleaved RoPE by splitting the even and odd channels into two halves;
 * queries and keys are permuted alike, so every score, and so the output, is the same.
 *
 * tests/reference/make_ecosystem.py wrote the second set, tests/reference/ecosystem/: configs as
 * transformers 5's save_pretrained writes them (rope_parameters, rope_interleave false, mscale unlike
 * mscale_all_dim, YaRN without mscale keys, V4's layer_types and compress_rates) and one in DeepSeek's
 * inference spelling, each with the transformers module's output; kvlayer must compute what the code
 * that wrote each file computes, and refuse, naming the field, what it does not. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "v41_stack.h"
#include "dsa.h"
#include "file_io.h"
#include "mla.h"
#include "npy.h"
#include "safetensors.h"
#include "status.h"
#include "v4.h"
#include "weight_read.h"
#include "weights_load.h"

/* The module in float32 against the float64 reference: 4 chained products of length ≤ 64 (W_DQ, W_UQ,
 * the scores, W_O), each with a relative error ≤ 64·2^−24 = 2^−18 of its terms' magnitude; outputs are
 * O(1), so 2^−13 allows 8× the worst case of all four together. */
#define REF_ATOL 0x1p-13
#define REF_RTOL 0x1p-13
/* Decodes and prefills compute the same sums in other orders and batch shapes: the same bound. */
#define REF_MIN_COS 0.999999

typedef struct {
    kvl_model model;
    kvl_st_checkpoint ck;
    float *x, *out;   /* [T][d] */
    size_t T, d;
    char versions[256];
} reference;

/* The reference whose config and checkpoint are at the paths (relative to the source tree) `config`
 * and `weights` (a file or a folder), its output tensor `out_name`. */
static void open_reference_at(reference *r, const char *config, const char *weights, const char *out_name)
{
    ck_assert_msg(kvl_model_load(&r->model, kvl_path(config)) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(kvl_st_checkpoint_open(&r->ck, kvl_path(weights)) == KVL_OK, "%s", kvl_error());
    const kvl_st_file *f = &r->ck.files[0];
    const char *tv = kvl_st_metadata(f, "transformers_version"), *pv = kvl_st_metadata(f, "torch_version");
    const char *by = kvl_st_metadata(f, "referee");
    ck_assert_msg(tv && pv && by, "%s: no transformers_version, torch_version or referee in the metadata", f->origin);
    snprintf(r->versions, sizeof r->versions, "%s (transformers %s, torch %s)", by, tv, pv);
    const kvl_st_tensor *x = kvl_st_find(f, "x"), *out = kvl_st_find(f, out_name);
    ck_assert(x && out && x->n_dims == 2 && out->n_dims == 2);
    r->T = x->shape[0];
    r->d = x->shape[1];
    ck_assert_uint_eq(r->d, r->model.d);
    ck_assert(kvl_st_expect_shape(out, f->origin, 2, x->shape) == KVL_OK);
    r->x = malloc(r->T * r->d * sizeof *r->x);
    r->out = malloc(r->T * r->d * sizeof *r->out);
    ck_assert(r->x && r->out);
    ck_assert(kvl_st_read_f32(r->x, x, f->origin) == KVL_OK && kvl_st_read_f32(r->out, out, f->origin) == KVL_OK);
}

/* The reference tests/reference/`name`.json and .safetensors. */
static void open_reference_out(reference *r, const char *name, const char *out_name)
{
    char config[128], weights[128];
    snprintf(config, sizeof config, "tests/reference/%s.json", name);
    snprintf(weights, sizeof weights, "tests/reference/%s.safetensors", name);
    open_reference_at(r, config, weights, out_name);
}

static void open_reference(reference *r, const char *name)
{
    open_reference_out(r, name, "out");
}

static void close_reference(reference *r)
{
    free(r->x);
    free(r->out);
    kvl_st_checkpoint_close(&r->ck);
    kvl_model_free(&r->model);
}

static void expect_matches(const reference *r, const char *path, const float *got)
{
    size_t n = r->T * r->d;
    double *want = malloc(n * sizeof *want);
    ck_assert(want);
    for (size_t i = 0; i < n; i++) want[i] = r->out[i];
    char what[512];
    snprintf(what, sizeof what, "%s against %s", path, r->versions);
    kvl_expect_close(what, got, want, n, REF_ATOL, REF_RTOL, REF_MIN_COS);
    free(want);
}

/* ---- V3: MLA --------------------------------------------------------------------------------------- */

typedef int (*mla_decode_fn)(float *, const mla_config *, const mla_weights *, mla_cache *, const float *);

/* out[T][d] by prefilling the first `split` tokens, then decoding one at a time. */
static void mla_prefill_then_decode(float *out, const mla_config *c, const mla_weights *w, const reference *r,
                                    size_t split, mla_decode_fn decode)
{
    mla_cache cache;
    ck_assert(mla_cache_init(&cache, c, r->T, KV_STORE_F32) == KVL_OK);
    ck_assert_msg(mla_prefill(out, c, w, &cache, r->x, split) == KVL_OK, "%s", kvl_error());
    for (size_t t = split; t < r->T; t++)
        ck_assert_msg(decode(out + t * r->d, c, w, &cache, r->x + t * r->d) == KVL_OK, "%s", kvl_error());
    mla_cache_free(&cache);
}

START_TEST(test_mla_matches_transformers_deepseek_v3_on_fp8_weights)
{
    reference r;
    open_reference(&r, "deepseek_v3_tiny");
    mla_config c;
    ck_assert_msg(mla_config_from_model(&c, &r.model) == KVL_OK, "%s", kvl_error());
    mla_weights w;
    ck_assert_msg(mla_weights_load(&w, &c, &r.model.rope, &r.ck, 0) == KVL_OK, "%s", kvl_error());
    float *got = malloc(r.T * r.d * sizeof *got);
    ck_assert(got);
    ck_assert_msg(mla_forward(got, &c, &w, r.x, r.T) == KVL_OK, "%s", kvl_error());
    expect_matches(&r, "mla_forward", got);
    memset(got, 0, r.T * r.d * sizeof *got);
    mla_prefill_then_decode(got, &c, &w, &r, 5, mla_decode_naive);
    expect_matches(&r, "mla_prefill + mla_decode_naive", got);
    memset(got, 0, r.T * r.d * sizeof *got);
    mla_prefill_then_decode(got, &c, &w, &r, 1, mla_decode_absorbed);
    expect_matches(&r, "mla_prefill + mla_decode_absorbed", got);
    free(got);
    mla_weights_free(&w);
    close_reference(&r);
}
END_TEST

/* ---- V3.2: DSA ------------------------------------------------------------------------------------- */

typedef int (*dsa_decode_fn)(float *, int32_t *, const dsa_config *, const dsa_weights *, dsa_cache *, const float *);

static void dsa_prefill_then_decode(float *out, const dsa_config *c, const dsa_weights *w, const reference *r,
                                    size_t split, dsa_decode_fn decode)
{
    dsa_cache cache;
    ck_assert(dsa_cache_init(&cache, c, r->T, DSA_CACHE_F32) == KVL_OK);
    ck_assert_msg(dsa_prefill(out, NULL, c, w, &cache, r->x, split) == KVL_OK, "%s", kvl_error());
    for (size_t t = split; t < r->T; t++)
        ck_assert_msg(decode(out + t * r->d, NULL, c, w, &cache, r->x + t * r->d) == KVL_OK, "%s", kvl_error());
    dsa_cache_free(&cache);
}

START_TEST(test_dsa_matches_transformers_deepseek_v32)
{
    reference r;
    open_reference(&r, "deepseek_v32_tiny");
    dsa_config c;
    ck_assert_msg(dsa_config_from_model(&c, &r.model) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_lt(c.index_topk, r.T);   /* the selection is not everything */
    dsa_weights w;
    ck_assert_msg(dsa_weights_load(&w, &c, &r.model.rope, &r.ck, 0) == KVL_OK, "%s", kvl_error());
    float *got = malloc(r.T * r.d * sizeof *got);
    ck_assert(got);
    ck_assert_msg(dsa_forward(got, NULL, &c, &w, r.x, r.T) == KVL_OK, "%s", kvl_error());
    expect_matches(&r, "dsa_forward", got);
    memset(got, 0, r.T * r.d * sizeof *got);
    dsa_prefill_then_decode(got, &c, &w, &r, 6, dsa_decode_masked);
    expect_matches(&r, "dsa_prefill + dsa_decode_masked", got);
    memset(got, 0, r.T * r.d * sizeof *got);
    dsa_prefill_then_decode(got, &c, &w, &r, 2, dsa_decode_gather);
    expect_matches(&r, "dsa_prefill + dsa_decode_gather", got);
    free(got);
    dsa_weights_free(&w);
    close_reference(&r);
}
END_TEST

/* ---- V4: window-only, CSA and HCA layers ------------------------------------------------------------ */

static void v4_prefill_then_decode(float *out, const v4_config *c, const v4_weights *w, const reference *r,
                                   size_t split)
{
    v4_cache cache;
    ck_assert_msg(v4_cache_init(&cache, c, r->T, V4_CACHE_F32) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(v4_prefill(out, NULL, c, w, &cache, r->x, split) == KVL_OK, "%s", kvl_error());
    for (size_t t = split; t < r->T; t++)
        ck_assert_msg(v4_decode(out + t * r->d, NULL, c, w, &cache, r->x + t * r->d) == KVL_OK, "%s", kvl_error());
    v4_cache_free(&cache);
}

static void check_v4_layer(size_t layer, kvl_layer_kind kind)
{
    char out_name[16], path[64];
    snprintf(out_name, sizeof out_name, "out.%zu", layer);
    reference r;
    open_reference_out(&r, "deepseek_v4_tiny", out_name);
    v4_config c;
    ck_assert_msg(v4_config_from_model(&c, &r.model, layer) == KVL_OK, "%s", kvl_error());
    ck_assert_int_eq(c.kind, kind);
    v4_weights w;
    ck_assert_msg(v4_weights_load(&w, &c, &r.ck, layer) == KVL_OK, "%s", kvl_error());
    float *got = malloc(r.T * r.d * sizeof *got);
    ck_assert(got);
    ck_assert_msg(v4_forward(got, NULL, &c, &w, r.x, r.T) == KVL_OK, "%s", kvl_error());
    snprintf(path, sizeof path, "v4_forward, layer %zu", layer);
    expect_matches(&r, path, got);
    memset(got, 0, r.T * r.d * sizeof *got);
    v4_prefill_then_decode(got, &c, &w, &r, 11);   /* a split inside a block of 4 and of 8 */
    snprintf(path, sizeof path, "v4_prefill + v4_decode, layer %zu", layer);
    expect_matches(&r, path, got);
    free(got);
    v4_weights_free(&w);
    close_reference(&r);
}

START_TEST(test_v4_window_layer_matches_transformers_deepseek_v4)
{
    check_v4_layer(0, KVL_LAYER_WINDOW);
}
END_TEST

START_TEST(test_v4_csa_layer_matches_transformers_deepseek_v4)
{
    check_v4_layer(1, KVL_LAYER_CSA);
}
END_TEST

START_TEST(test_v4_hca_layer_matches_transformers_deepseek_v4)
{
    check_v4_layer(2, KVL_LAYER_HCA);
}
END_TEST

/* ---- V4.1: a stack of every mode -------------------------------------------------------------------- */

/* The stack's weights from the reference: each layer's attention (ref/weights_load.h) and its pre-norm
 * gain layers.N.attn_norm.weight (the inference code's Block.attn_norm). */
static void load_v41_stack(v41_stack_weights *w, const v41_stack_config *s, const reference *r)
{
    w->n_layers = s->n_layers;
    w->attn_norm = malloc(s->n_layers * s->d * sizeof *w->attn_norm);
    w->layers = calloc(s->n_layers, sizeof *w->layers);
    ck_assert(w->attn_norm && w->layers);
    for (size_t l = 0; l < s->n_layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "layers.%zu.attn_norm.weight", l);
        const size_t shape[1] = {s->d};
        ck_assert_msg(kvl_read_weight(w->attn_norm + l * s->d, &r->ck, name, 1, shape) == KVL_OK, "%s", kvl_error());
        ck_assert_msg(v41_weights_load(&w->layers[l], &s->layers[l], &r->ck, l) == KVL_OK, "%s", kvl_error());
    }
}

START_TEST(test_v41_stack_matches_the_inference_formulas)
{
    reference r;
    open_reference(&r, "deepseek_v41_tiny");
    v41_stack_config s;
    ck_assert_msg(v41_stack_config_from_model(&s, &r.model) == KVL_OK, "%s", kvl_error());
    v41_stack_weights w;
    load_v41_stack(&w, &s, &r);
    float *got = malloc(r.T * r.d * sizeof *got);
    ck_assert(got);
    ck_assert_msg(v41_stack_forward(got, NULL, NULL, &s, &w, r.x, r.T) == KVL_OK, "%s", kvl_error());
    expect_matches(&r, "v41_stack_forward", got);
    memset(got, 0, r.T * r.d * sizeof *got);
    v41_cache cache;
    ck_assert_msg(v41_cache_init(&cache, &s, r.T, V41_CACHE_F32) == KVL_OK, "%s", kvl_error());
    const size_t split = 9;   /* inside a block of 2 and a candidate block of 4 */
    ck_assert_msg(v41_stack_prefill(got, NULL, &s, &w, &cache, r.x, split) == KVL_OK, "%s", kvl_error());
    for (size_t t = split; t < r.T; t++)
        ck_assert_msg(v41_stack_decode(got + t * r.d, &s, &w, &cache, r.x + t * r.d) == KVL_OK, "%s", kvl_error());
    expect_matches(&r, "v41_stack_prefill + v41_stack_decode", got);
    v41_cache_free(&cache);
    free(got);
    v41_stack_weights_free(&w);
    v41_stack_config_free(&s);
    close_reference(&r);
}
END_TEST

START_TEST(test_reference_files_name_their_versions)
{
    static const char *const names[] = {"deepseek_v3_tiny", "deepseek_v32_tiny", "deepseek_v4_tiny", "deepseek_v41_tiny"};
    for (size_t i = 0; i < 4; i++) {
        reference r;
        open_reference_out(&r, names[i], i == 2 ? "out.0" : "out");
        const kvl_st_file *f = &r.ck.files[0];
        ck_assert(strlen(kvl_st_metadata(f, "transformers_version")) > 0);
        ck_assert(strlen(kvl_st_metadata(f, "torch_version")) > 0);
        ck_assert(kvl_st_metadata(f, "config") != NULL);
        close_reference(&r);
    }
}
END_TEST

/* ---- kvlayer on the referee's files ----------------------------------------------------------------- */

/* bf16 latent rows (unit roundoff 2^−9) feed two more products before the output: 2^−6 is 8× that,
 * and the cosine says the error is spread, not a wrong row. */
#define BF16_CACHE_TOL 0x1p-6
#define BF16_CACHE_MIN_COS 0.9999

static void temp_dir(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/kvl_layer_XXXXXX");
    ck_assert(mkdtemp(dir) != NULL);
}

static void rm_dir(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Run kvlayer with `args` after --config/--weights of the reference `name`; returns the exit status. */
static int kvlayer(const char *name, const char *args, char *err, size_t cap)
{
    char cmd[4096], out[4096], root[1024];
    snprintf(root, sizeof root, "%s", kvl_path("."));
    snprintf(cmd, sizeof cmd, "kvlayer --config %s/tests/reference/%s.json --weights %s/tests/reference/%s.safetensors %s",
             root, name, root, name, args);
    return kvl_run(cmd, NULL, out, sizeof out, err, cap);
}

static void expect_one_line(int status, const char *err, const char *piece)
{
    ck_assert_msg(status == 2, "exit %d, want 2 (stderr: %s)", status, err);
    const char *nl = strchr(err, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "stderr is not one line: %s", err);
    ck_assert_msg(strncmp(err, "kvlayer: ", 9) == 0 && strstr(err, piece), "'%s' lacks '%s'", err, piece);
}

START_TEST(test_kvlayer_runs_a_v3_fp8_checkpoint_from_npy_as_transformers_does)
{
    reference r;
    open_reference(&r, "deepseek_v3_tiny");
    char dir[64], args[512], err[1024];
    temp_dir(dir, sizeof dir);
    char in[128], out[128];
    snprintf(in, sizeof in, "%s/x.npy", dir);
    snprintf(out, sizeof out, "%s/out.npy", dir);
    ck_assert(kvl_npy_write(in, r.x, r.T, r.d) == KVL_OK);
    float *got;
    size_t rows, cols;
    snprintf(args, sizeof args, "--layer 0 --input %s --output %s --prefill 5 --cache f32", in, out);
    int status = kvlayer("deepseek_v3_tiny", args, err, sizeof err);
    ck_assert_msg(status == 0, "exit %d: %s", status, err);
    ck_assert_msg(kvl_npy_read(&got, &rows, &cols, out) == KVL_OK, "%s", kvl_error());
    ck_assert(rows == r.T && cols == r.d);
    expect_matches(&r, "kvlayer --prefill 5 --cache f32", got);
    free(got);

    snprintf(args, sizeof args, "--layer 0 --input %s --output %s --prefill 0 --cache native", in, out);
    status = kvlayer("deepseek_v3_tiny", args, err, sizeof err);
    ck_assert_msg(status == 0, "exit %d: %s", status, err);
    ck_assert_msg(kvl_npy_read(&got, &rows, &cols, out) == KVL_OK, "%s", kvl_error());
    double *want = malloc(r.T * r.d * sizeof *want);
    for (size_t i = 0; i < r.T * r.d; i++) want[i] = r.out[i];
    kvl_expect_close("kvlayer --cache native (bf16 rows)", got, want, r.T * r.d, BF16_CACHE_TOL, BF16_CACHE_TOL,
                     BF16_CACHE_MIN_COS);
    free(want);
    free(got);
    rm_dir(dir);
    close_reference(&r);
}
END_TEST

START_TEST(test_kvlayer_runs_a_v32_checkpoint_from_safetensors_as_transformers_does)
{
    reference r;
    open_reference(&r, "deepseek_v32_tiny");
    char dir[64], args[1024], err[1024], out[128];
    temp_dir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/out.safetensors", dir);
    char v32[512];
    snprintf(v32, sizeof v32, "%s", kvl_path("tests/reference/deepseek_v32_tiny.safetensors"));
    snprintf(args, sizeof args, "--layer 0 --input %s --output %s --prefill 9", v32, out);
    int status = kvlayer("deepseek_v32_tiny", args, err, sizeof err);
    ck_assert_msg(status == 0, "exit %d: %s", status, err);
    kvl_st_file f;
    ck_assert_msg(kvl_st_open(&f, out) == KVL_OK, "%s", kvl_error());
    ck_assert_str_eq(kvl_st_metadata(&f, "generation"), "DSA");
    const kvl_st_tensor *t = kvl_st_find(&f, "out");
    ck_assert(t && t->n_elements == r.T * r.d);
    float *got = malloc(r.T * r.d * sizeof *got);
    ck_assert(kvl_st_read_f32(got, t, out) == KVL_OK);
    expect_matches(&r, "kvlayer --prefill 9 (V3.2)", got);
    free(got);
    kvl_st_close(&f);
    rm_dir(dir);
    close_reference(&r);
}
END_TEST

START_TEST(test_kvlayer_runs_a_v4_csa_layer_as_transformers_does)
{
    reference r;
    open_reference_out(&r, "deepseek_v4_tiny", "out.1");
    char dir[64], args[1024], err[1024], out[128], v4[512];
    temp_dir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/out.npy", dir);
    snprintf(v4, sizeof v4, "%s", kvl_path("tests/reference/deepseek_v4_tiny.safetensors"));
    snprintf(args, sizeof args, "--layer 1 --input %s --output %s --prefill 6", v4, out);
    int status = kvlayer("deepseek_v4_tiny", args, err, sizeof err);
    ck_assert_msg(status == 0, "exit %d: %s", status, err);
    float *got;
    size_t rows, cols;
    ck_assert_msg(kvl_npy_read(&got, &rows, &cols, out) == KVL_OK, "%s", kvl_error());
    ck_assert(rows == r.T && cols == r.d);
    expect_matches(&r, "kvlayer --layer 1 --prefill 6 (V4 CSA)", got);
    free(got);
    rm_dir(dir);
    close_reference(&r);
}
END_TEST

START_TEST(test_kvlayer_refuses_bad_input_with_one_line)
{
    char err[1024], args[1024], x[512];
    snprintf(x, sizeof x, "%s", kvl_path("tests/reference/deepseek_v3_tiny.safetensors"));
    expect_one_line(kvlayer("deepseek_v3_tiny", "--layer 0 --output /tmp/kvl_never.npy", err, sizeof err), err,
                    "--input is required");
    expect_one_line(kvlayer("deepseek_v3_tiny", "--layer 0 --frob 1", err, sizeof err), err, "unknown flag: --frob");
    expect_one_line(kvlayer("deepseek_v3_tiny", "--layer x", err, sizeof err), err, "--layer needs a non-negative integer");
    expect_one_line(kvlayer("deepseek_v3_tiny", "--layer +0", err, sizeof err), err, "--layer needs a non-negative integer: +0");
    expect_one_line(kvlayer("deepseek_v3_tiny", "--layer ' 0'", err, sizeof err), err, "--layer needs a non-negative integer");
    expect_one_line(kvlayer("deepseek_v3_tiny", "--layer 0 --layer 0", err, sizeof err), err, "--layer given twice");
    snprintf(args, sizeof args, "--layer 0 --input %s --output /tmp/kvl_never.npy --cache fp2", x);
    expect_one_line(kvlayer("deepseek_v3_tiny", args, err, sizeof err), err, "--cache must be native or f32");
    snprintf(args, sizeof args, "--layer 1 --input %s --output /tmp/kvl_never.npy", x);
    expect_one_line(kvlayer("deepseek_v3_tiny", args, err, sizeof err), err, "--layer 1: the config has 1 layers");
    snprintf(args, sizeof args, "--layer 0 --input %s --output /tmp/kvl_never.npy --prefill 17", x);
    expect_one_line(kvlayer("deepseek_v3_tiny", args, err, sizeof err), err, "--prefill 17 exceeds the 16 input tokens");
    snprintf(args, sizeof args, "--layer 0 --input /nonexistent/x.npy --output /tmp/kvl_never.npy");
    expect_one_line(kvlayer("deepseek_v3_tiny", args, err, sizeof err), err, "/nonexistent/x.npy: cannot open");
    /* the V3.2 weights lack nothing MLA needs, but a V3.2 config asks for its indexer on V3's file */
    char cmd[2048], out[256], cfg[512];
    snprintf(cfg, sizeof cfg, "%s", kvl_path("tests/reference/deepseek_v32_tiny.json"));
    snprintf(cmd, sizeof cmd, "kvlayer --config %s --weights %s --layer 0 --input %s --output /tmp/kvl_never.npy", cfg, x, x);
    expect_one_line(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), err,
                    "tensor \"model.layers.0.self_attn.indexer.wq_b.weight\" not found");
    char v32[512];
    snprintf(v32, sizeof v32, "%s", kvl_path("tests/reference/deepseek_v32_tiny.safetensors"));
    snprintf(args, sizeof args, "--layer 0 --input %s --output /tmp/kvl_never.npy --cache native", v32);
    expect_one_line(kvlayer("deepseek_v32_tiny", args, err, sizeof err), err, "the v32 rows hold Dc 512");
    snprintf(cfg, sizeof cfg, "%s", kvl_path("ref/configs/deepseek-v4.1-flash.json"));
    snprintf(cmd, sizeof cmd, "kvlayer --config %s --weights %s --layer 0 --input %s --output /tmp/kvl_never.npy", cfg, x, x);
    expect_one_line(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), err, "kvlayer runs MLA (V2/V3), DSA (V3.2) and V4");
    char makefile[512];
    snprintf(cfg, sizeof cfg, "%s", kvl_path("tests/reference/deepseek_v3_tiny.json"));
    snprintf(makefile, sizeof makefile, "%s", kvl_path("Makefile"));
    snprintf(cmd, sizeof cmd, "kvlayer --config %s --weights %s --layer 0 --input %s --output /tmp/kvl_never.npy", cfg,
             makefile, x);
    expect_one_line(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), err, "Makefile: header length");
    ck_assert(access("/tmp/kvl_never.npy", F_OK) != 0);
    snprintf(cfg, sizeof cfg, "%s", kvl_path("tests/reference/deepseek_v3_tiny.json"));
    snprintf(cmd, sizeof cmd, "{ kvlayer --config %s --weights %s --layer 0 --input %s --output /tmp/kvl_full.npy "
             ">/dev/full; }", cfg, x, x);
    int status = kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(status == 1 && strstr(err, "kvlayer: cannot write the output"), "exit %d: %s", status, err);
    unlink("/tmp/kvl_full.npy");
}
END_TEST

/* ---- checkpoints as the ecosystem writes them (tests/reference/make_ecosystem.py) ------------------- */

#define ECO "tests/reference/ecosystem/"

/* Run kvlayer on case `name` (config.json and the folder's checkpoint), layer `layer`, input `input`
 * (a file of the folder), with `extra` flags; the output is out.npy in a new folder `dir`. */
static int kvlayer_case(const char *name, size_t layer, const char *input, const char *extra, char *dir, size_t cap,
                        char *line, size_t line_cap, char *err, size_t err_cap)
{
    char cmd[4096], root[1024];
    temp_dir(dir, cap);
    snprintf(root, sizeof root, "%s/" ECO "%s", kvl_path("."), name);
    snprintf(cmd, sizeof cmd, "kvlayer --config %s/config.json --weights %s --layer %zu --input %s/%s --output %s/out.npy %s",
             root, root, layer, root, input, dir, extra);
    return kvl_run(cmd, NULL, line, line_cap, err, err_cap);
}

/* kvlayer on case `name`'s layer with the hidden states of the folder's file `input`, against the
 * transformers output `out_name` of its file `ref_file`, prefilling `prefill` tokens and decoding the rest;
 * its one line must contain `says`. */
static void expect_kvlayer_matches_from(const char *name, const char *input, const char *ref_file, size_t layer,
                                        const char *out_name, size_t prefill, const char *says)
{
    char config[128], weights[128], dir[64], extra[64], line[1024], err[1024], out[128];
    snprintf(config, sizeof config, ECO "%s/config.json", name);
    snprintf(weights, sizeof weights, ECO "%s/%s", name, ref_file);
    reference r;
    open_reference_at(&r, config, weights, out_name);
    snprintf(extra, sizeof extra, "--prefill %zu", prefill);
    int status = kvlayer_case(name, layer, input, extra, dir, sizeof dir, line, sizeof line, err, sizeof err);
    ck_assert_msg(status == 0, "%s: exit %d: %s", name, status, err);
    ck_assert_msg(strstr(line, says) != NULL, "%s: kvlayer says '%s', not '%s'", name, line, says);
    float *got;
    size_t rows, cols;
    snprintf(out, sizeof out, "%s/out.npy", dir);
    ck_assert_msg(kvl_npy_read(&got, &rows, &cols, out) == KVL_OK, "%s", kvl_error());
    ck_assert(rows == r.T && cols == r.d);
    char what[160];
    snprintf(what, sizeof what, "kvlayer on %s, layer %zu, prefill %zu", name, layer, prefill);
    expect_matches(&r, what, got);
    free(got);
    rm_dir(dir);
    close_reference(&r);
}

static void expect_kvlayer_matches(const char *name, size_t layer, const char *out_name, size_t prefill,
                                   const char *says)
{
    expect_kvlayer_matches_from(name, "model.safetensors", "model.safetensors", layer, out_name, prefill, says);
}

/* The config of ecosystem case `name`, loaded. */
static kvl_model eco_model(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, ECO "%s/config.json", name);
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path(rel)) == KVL_OK, "%s", kvl_error());
    return m;
}

START_TEST(test_transformers_5_rope_parameters_are_read_as_transformers_does)
{
    kvl_model m = eco_model("v3_rope_parameters");
    ck_assert_int_eq(m.rope_spelling, KVL_ROPE_PARAMETERS);
    ck_assert_double_eq(m.rope.theta, 50000);   /* no top-level rope_theta: the 10,000 default would be wrong */
    ck_assert_double_eq(m.rope.factor, 4);
    kvl_model_free(&m);
    expect_kvlayer_matches("v3_rope_parameters", 0, "out", 5, "YaRN factor 4 from rope_parameters");
}
END_TEST

START_TEST(test_rope_interleave_false_rotates_half_split_pairs_as_transformers_does)
{
    expect_kvlayer_matches("v3_no_interleave", 0, "out", 16, "pairs (i, i + Dr/2)");
    expect_kvlayer_matches("v3_no_interleave", 0, "out", 1, "pairs (i, i + Dr/2)");
}
END_TEST

/* transformers' attention_factor m(4, 0.707)/m(4, 1) on cos and sin, m(4, 1)² on the softmax scale */
START_TEST(test_mscale_unlike_mscale_all_dim_scales_cos_and_sin_as_transformers_does)
{
    kvl_model m = eco_model("v3_mscale_differs");
    const double m1 = 0.1 * log(4.0) + 1, m707 = 0.1 * 0.707 * log(4.0) + 1;
    ck_assert_double_eq_tol(m.rope.attention_factor, m707 / m1, 1e-15);
    ck_assert_double_eq(m.rope.mscale, 1.0);
    kvl_model_free(&m);
    expect_kvlayer_matches("v3_mscale_differs", 0, "out", 7, "cos and sin x 0.9");
}
END_TEST

/* The same YaRN settings with no mscale keys mean two layers: transformers puts m(4, 1) on cos and sin
 * and nothing on the softmax scale, DeepSeek's inference code m(4, 1)² on the softmax scale only. */
START_TEST(test_yarn_without_mscale_keys_is_read_in_the_convention_of_its_spelling)
{
    kvl_model hf = eco_model("v3_yarn_no_mscale"), ds = eco_model("v3_deepseek_flat");
    ck_assert_double_eq_tol(hf.rope.attention_factor, 0.1 * log(4.0) + 1, 1e-15);
    ck_assert_double_eq(hf.rope.mscale, 0);
    ck_assert_double_eq(ds.rope.attention_factor, 1);
    ck_assert_double_eq(ds.rope.mscale, 1);
    ck_assert_int_eq(ds.rope_spelling, KVL_ROPE_FLAT);
    kvl_model_free(&hf);
    kvl_model_free(&ds);
    expect_kvlayer_matches("v3_yarn_no_mscale", 0, "out", 4, "as transformers computes it: cos and sin x 1.13863");
    expect_kvlayer_matches("v3_deepseek_flat", 0, "out", 4, "as DeepSeek's inference code computes it: cos and sin x 1,");
}
END_TEST

START_TEST(test_the_v32_indexer_carries_transformers_factor_on_cos_and_sin)
{
    expect_kvlayer_matches("v32_yarn_no_mscale", 0, "out", 16, "cos and sin x 1.13863");
    expect_kvlayer_matches("v32_yarn_no_mscale", 0, "out", 6, "cos and sin x 1.13863");
}
END_TEST

/* layer_types with compress_rates CSA 2 and HCA 4: HCA at ratio 4, which compress_ratios would read
 * as CSA, and a CSA layer at a ratio other than V4-Flash's. */
START_TEST(test_v4_layer_types_and_compress_rates_of_transformers_5_are_read)
{
    kvl_model m = eco_model("v4_layer_types");
    ck_assert_int_eq(m.generation, KVL_GEN_V4);
    ck_assert_uint_eq(m.qk_rope_head_dim, 8);
    const kvl_layer_kind kind[] = {KVL_LAYER_WINDOW, KVL_LAYER_CSA, KVL_LAYER_HCA};
    const size_t ratio[] = {0, 2, 4};
    for (size_t l = 0; l < 3; l++) {
        ck_assert_int_eq(m.layers[l].kind, kind[l]);
        ck_assert_uint_eq(m.layers[l].compress_ratio, ratio[l]);
    }
    kvl_model_free(&m);
    expect_kvlayer_matches("v4_layer_types", 0, "out.0", 11, "(V4 window)");
    expect_kvlayer_matches("v4_layer_types", 1, "out.1", 11, "(V4 CSA, ratio 2)");
    expect_kvlayer_matches("v4_layer_types", 2, "out.2", 11, "(V4 HCA, ratio 4)");
}
END_TEST

START_TEST(test_float64_safetensors_input_is_read)
{
    expect_kvlayer_matches_from("v3_rope_parameters", "x_f64.safetensors", "model.safetensors", 0, "out", 16,
                                "from rope_parameters");
}
END_TEST

/* Case `name`'s config with `from` replaced by `to` (the first occurrence), written to dir/config.json. */
static void edited_config(char *path, size_t cap, const char *dir, const char *name, const char *from, const char *to)
{
    char rel[128];
    snprintf(rel, sizeof rel, ECO "%s/config.json", name);
    FILE *f = fopen(kvl_path(rel), "rb");
    ck_assert(f != NULL);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *at = strstr(text, from);
    ck_assert_msg(at != NULL, "'%s' not in %s", from, rel);
    snprintf(path, cap, "%s/config.json", dir);
    f = fopen(path, "wb");
    ck_assert(f != NULL);
    fprintf(f, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    ck_assert(fclose(f) == 0);
}

/* Both kvlayer and kvtable refuse the edited config with one line naming `piece`, and print nothing. */
static void expect_refused_edit(const char *name, const char *from, const char *to, const char *piece)
{
    char dir[64], cfg[128], cmd[4096], out[1024], err[1024], root[1024];
    temp_dir(dir, sizeof dir);
    edited_config(cfg, sizeof cfg, dir, name, from, to);
    snprintf(root, sizeof root, "%s/" ECO "%s", kvl_path("."), name);
    snprintf(cmd, sizeof cmd, "kvlayer --config %s --weights %s --layer 0 --input %s/model.safetensors --output %s/o.npy",
             cfg, root, root, dir);
    int status = kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
    expect_one_line(status, err, piece);
    ck_assert_msg(out[0] == '\0', "kvlayer printed '%s'", out);
    snprintf(cmd, sizeof cmd, "kvtable %s", cfg);
    status = kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(status == 2 && strstr(err, piece) && out[0] == '\0', "kvtable: exit %d, stdout '%s', stderr '%s'",
                  status, out, err);
    rm_dir(dir);
}

/* rms_norm_eps 1e-2 is the decoder layer's: transformers' DeepseekV3Attention builds q_a_layernorm and
 * kv_a_layernorm with their own 1e-6, and so must the layer. */
START_TEST(test_the_latent_norms_keep_their_own_eps_beside_a_config_rms_norm_eps_of_1e_2)
{
    kvl_model m = eco_model("v3_norm_eps");
    ck_assert_double_eq(m.norm_eps, 1e-2);
    mla_config c;
    ck_assert_msg(mla_config_from_model(&c, &m) == KVL_OK, "%s", kvl_error());
    ck_assert_double_eq(c.norm_eps, 1e-6);
    kvl_model_free(&m);
    expect_kvlayer_matches("v3_norm_eps", 0, "out", 16, "(MLA dense)");
    expect_kvlayer_matches("v3_norm_eps", 0, "out", 3, "(MLA dense)");
}
END_TEST

/* A whole DeepseekV4ForCausalLM saved by transformers 5's save_pretrained in bfloat16: two shards and an index,
 * the attention under model.layers.N.attn. with the inference leaves and its kv_norm as norm.weight. Every
 * layer kind against the module's float64 output. */
START_TEST(test_a_v4_model_saved_by_transformers_5_in_two_shards_is_read_whole)
{
    kvl_st_checkpoint ck;
    ck_assert_msg(kvl_st_checkpoint_open(&ck, kvl_path(ECO "v4_saved_sharded")) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(ck.n_files, 2);
    ck_assert_ptr_nonnull(kvl_st_checkpoint_find(&ck, "model.layers.0.attn.norm.weight", NULL));
    kvl_st_checkpoint_close(&ck);
    const char *says[] = {"(V4 window)", "(V4 CSA, ratio 2)", "(V4 HCA, ratio 4)"};
    for (size_t l = 0; l < 3; l++) {
        char out[16];
        snprintf(out, sizeof out, "out.%zu", l);
        expect_kvlayer_matches_from("v4_saved_sharded", "io.safetensors", "io.safetensors", l, out, 24, says[l]);
        expect_kvlayer_matches_from("v4_saved_sharded", "io.safetensors", "io.safetensors", l, out, 9, says[l]);
    }
}
END_TEST

/* Case `name`, a whole two-layer V3 or V3.2 model saved by transformers 5's save_pretrained in bfloat16 over two
 * shards and an index, the attention under model.layers.N.self_attn.: layer 0's o_proj in one shard, layer 1's in
 * the other. Each layer against the module's float64 output, all prefilled and prefilled up to a point before the
 * top-k first selects (V3.2 keeps 5 of 16): at REF_ATOL and REF_RTOL, the bound of the single-layer V3 and V3.2
 * references, since here too the module ran on exactly the stored bfloat16 weights, the only difference is the
 * layer's float32 arithmetic, and each V3.2 layer's top-k was drawn with a margin over 10^-3 that no float32
 * rounding can flip. kvlayer's line must contain `says`. */
static void expect_whole_model_matches(const char *name, const char *says)
{
    char root[128];
    snprintf(root, sizeof root, ECO "%s", name);
    kvl_st_checkpoint ck;
    ck_assert_msg(kvl_st_checkpoint_open(&ck, kvl_path(root)) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(ck.n_files, 2);
    const kvl_st_file *first = NULL, *second = NULL;
    ck_assert_ptr_nonnull(kvl_st_checkpoint_find(&ck, "model.layers.0.self_attn.o_proj.weight", &first));
    ck_assert_ptr_nonnull(kvl_st_checkpoint_find(&ck, "model.layers.1.self_attn.o_proj.weight", &second));
    ck_assert_ptr_ne(first, second);
    kvl_st_checkpoint_close(&ck);
    for (size_t l = 0; l < 2; l++) {
        char out[16];
        snprintf(out, sizeof out, "out.%zu", l);
        expect_kvlayer_matches_from(name, "io.safetensors", "io.safetensors", l, out, 16, says);
        expect_kvlayer_matches_from(name, "io.safetensors", "io.safetensors", l, out, 4, says);
    }
}

/* YaRN in transformers 5's rope_parameters, mscale = mscale_all_dim as DeepSeek-V3 ships it. */
START_TEST(test_a_v3_model_saved_by_transformers_5_in_two_shards_is_read_whole)
{
    expect_whole_model_matches("v3_saved_sharded", "YaRN factor 4 from rope_parameters, as transformers computes it");
}
END_TEST

START_TEST(test_a_v32_model_saved_by_transformers_5_in_two_shards_is_read_whole)
{
    expect_whole_model_matches("v32_saved_sharded", "(DSA sparse)");
}
END_TEST

/* Case v3_rope_parameters' checkpoint copied to dir/model.safetensors with the tensor `extra` [n] added. */
static void copy_with_tensor(const char *dir, const char *extra, size_t n)
{
    kvl_st_file f;
    ck_assert_msg(kvl_st_open(&f, kvl_path(ECO "v3_rope_parameters/model.safetensors")) == KVL_OK, "%s", kvl_error());
    kvl_st_entry *e = calloc(f.n_tensors + 1, sizeof *e);
    float *zeros = calloc(n, sizeof *zeros);
    ck_assert(e && zeros);
    for (size_t i = 0; i < f.n_tensors; i++) {
        const kvl_st_tensor *t = &f.tensors[i];
        e[i] = (kvl_st_entry){t->name, t->dtype, t->n_dims, {0}, t->data};
        memcpy(e[i].shape, t->shape, sizeof t->shape);
    }
    e[f.n_tensors] = (kvl_st_entry){extra, KVL_ST_F32, 1, {n}, zeros};
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ck_assert_msg(kvl_st_write(path, e, f.n_tensors + 1, NULL, 0) == KVL_OK, "%s", kvl_error());
    free(zeros);
    free(e);
    kvl_st_close(&f);
}

/* kvlayer on case v3_rope_parameters with config `config` and weights `weights`: one line naming `piece`,
 * nothing on stdout, no output file. */
static void expect_kvlayer_refuses(const char *config, const char *weights, const char *input, const char *dir,
                                   const char *piece)
{
    char cmd[4096], out[1024], err[1024], o[128];
    snprintf(o, sizeof o, "%s/o.npy", dir);
    snprintf(cmd, sizeof cmd, "kvlayer --config %s --weights %s --layer 0 --input %s --output %s", config, weights,
             input, o);
    expect_one_line(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), err, piece);
    ck_assert_msg(out[0] == '\0', "kvlayer printed '%s'", out);
    ck_assert(access(o, F_OK) != 0);
}

/* transformers adds biases to q_a_proj, kv_a_proj_with_mqa and o_proj under attention_bias true; the layer
 * computes without them, so that config is refused by name, and so is a bias tensor the config does not
 * declare, rather than run as if zero. */
START_TEST(test_attention_biases_are_refused_by_name_rather_than_dropped)
{
    char dir[64], cfg[1100], root[1024], x[1100];
    snprintf(root, sizeof root, "%s/" ECO "v3_rope_parameters", kvl_path("."));
    snprintf(x, sizeof x, "%s/model.safetensors", root);
    temp_dir(dir, sizeof dir);
    edited_config(cfg, sizeof cfg, dir, "v3_rope_parameters", "\"attention_bias\": false", "\"attention_bias\": true");
    expect_kvlayer_refuses(cfg, root, x, dir, "field attention_bias is true: kvlayer computes the attention layer "
                                              "without biases");
    copy_with_tensor(dir, "model.layers.0.self_attn.o_proj.bias", 64);
    snprintf(cfg, sizeof cfg, "%s/config.json", root);
    expect_kvlayer_refuses(cfg, dir, x, dir, "tensor \"model.layers.0.self_attn.o_proj.bias\" is present, but the "
                                             "attention projections here carry no bias");
    rm_dir(dir);
}
END_TEST

/* Finite hidden states near FLT_MAX: the projections overflow float32, so the output would be NaN; kvlayer
 * refuses, naming the largest input element and the overflow. */
START_TEST(test_an_input_near_flt_max_is_refused_naming_the_element_that_overflows)
{
    enum { T = 16, D = 64 };
    static float xs[T * D];
    for (size_t i = 0; i < T * D; i++) xs[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    for (size_t j = 0; j < D; j++) xs[3 * D + j] = j % 2 ? 3e38f : -3e38f;
    xs[3 * D + 7] = 3.4e38f;
    char dir[64], cfg[1100], root[1024], x[128];
    snprintf(root, sizeof root, "%s/" ECO "v3_rope_parameters", kvl_path("."));
    snprintf(cfg, sizeof cfg, "%s/config.json", root);
    temp_dir(dir, sizeof dir);
    snprintf(x, sizeof x, "%s/x.npy", dir);
    ck_assert(kvl_npy_write(x, xs, T, D) == KVL_OK);
    expect_kvlayer_refuses(cfg, root, x, dir, "x[3][7] = 3.4e+38, its largest element: the layer's float32 arithmetic overflows");
    rm_dir(dir);
}
END_TEST

/* transformers reads compress_ratios for each layer's kind only and takes its ratio from the older
 * compress_rate_csa / compress_rate_hca: one that disagrees is refused at the config, naming it, not at a
 * layer's tensor shapes (or run at the other ratio). */
START_TEST(test_an_older_compress_rate_beside_compress_ratios_is_refused_by_name)
{
    char *text;
    size_t n;
    ck_assert(kvl_file_read_all(&text, &n, kvl_path("tests/reference/deepseek_v4_tiny.json"), 1 << 20) == KVL_OK);
    char dir[64], cfg[128], weights[1100], cmd[4096], out[1024], err[1024];
    temp_dir(dir, sizeof dir);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    FILE *f = fopen(cfg, "wb");
    ck_assert(f && text[0] == '{');
    fprintf(f, "{\"compress_rate_csa\": 2, %s", text + 1);
    ck_assert(fclose(f) == 0);
    free(text);
    snprintf(weights, sizeof weights, "%s/tests/reference/deepseek_v4_tiny.safetensors", kvl_path("."));
    snprintf(cmd, sizeof cmd, "kvlayer --config %s --weights %s --layer 1 --input %s --output %s/o.npy", cfg, weights,
             weights, dir);
    expect_one_line(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), err,
                    "layer 1 is CSA at ratio 4 under \"compress_ratios\", but field \"compress_rate_csa\" gives 2");
    ck_assert_msg(out[0] == '\0', "kvlayer printed '%s'", out);
    rm_dir(dir);
}
END_TEST

START_TEST(test_two_spellings_of_one_setting_that_disagree_are_refused)
{
    /* under a model_type, DeepSeek's inference spelling is no second spelling: transformers ignores it */
    expect_refused_edit("v4_layer_types", "\"sliding_window\": 8", "\"sliding_window\": 8, \"window_size\": 16",
                        "field \"window_size\" is DeepSeek's inference spelling, which transformers' \"deepseek_v4\"");
    /* DeepseekV3Config's attribute_map makes num_mtp_layers a second name of num_nextn_predict_layers */
    expect_refused_edit("v3_rope_parameters", "\"num_nextn_predict_layers\": 1",
                        "\"num_nextn_predict_layers\": 1, \"num_mtp_layers\": 2",
                        "\"num_nextn_predict_layers\" (1) and \"num_mtp_layers\" (2) spell one setting and disagree");
    expect_refused_edit("v3_rope_parameters", "\"qk_rope_head_dim\": 8,", "\"qk_rope_head_dim\": 8, \"rope_theta\": 10000,",
                        "\"rope_theta\" (10000) and \"rope_parameters.rope_theta\" (50000)");
    expect_refused_edit("v3_rope_parameters", "\"rope_type\": \"yarn\"", "\"rope_type\": \"yarn\", \"type\": \"linear\"",
                        "\"rope_parameters.rope_type\" (\"yarn\") and \"rope_parameters.type\" (\"linear\")");
    expect_refused_edit("v3_rope_parameters", "\"qk_rope_head_dim\": 8,", "\"qk_rope_head_dim\": 8, \"rope_factor\": 4,",
                        "field \"rope_factor\" is DeepSeek's inference spelling");
    expect_refused_edit("v3_rope_parameters", "\"qk_rope_head_dim\": 8,",
                        "\"qk_rope_head_dim\": 8, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4},",
                        "fields \"rope_scaling\" and \"rope_parameters\" both hold rotary settings");
    expect_refused_edit("v4_layer_types", "\"sliding_window\": 8", "\"sliding_window\": 8, \"compress_ratios\": [0, 2, 4]",
                        "layer 1 is CSA at ratio 2 under \"layer_types\" and \"compress_rates\", but HCA at ratio 2");
    expect_refused_edit("v4_layer_types", "\"sliding_window\": 8", "\"sliding_window\": 8, \"compress_rate_csa\": 4",
                        "\"compress_rates.compressed_sparse_attention\" (2) and \"compress_rate_csa\" (4)");
}
END_TEST

/* What the project does not compute is refused naming the field, never run another way. */
START_TEST(test_rotary_settings_the_project_does_not_compute_are_refused)
{
    expect_refused_edit("v3_rope_parameters", "\"rope_type\": \"yarn\"", "\"rope_type\": \"dynamic\"",
                        "field \"rope_parameters.rope_type\" is \"dynamic\": only \"default\" and \"yarn\"");
    expect_refused_edit("v3_rope_parameters", "\"rope_type\": \"yarn\"", "\"truncate\": false, \"rope_type\": \"yarn\"",
                        "field \"rope_parameters.truncate\" is false");
    expect_refused_edit("v4_layer_types", "\"attention_factor\": 1.0", "\"attention_factor\": 1.25",
                        "field \"rope_parameters.compress.attention_factor\" is 1.25");
    expect_refused_edit("v4_layer_types", "\"sliding_window\": 8", "\"sliding_window\": 8, \"rope_interleave\": false",
                        "field \"rope_interleave\" is not one transformers' \"deepseek_v4\" configuration defines");
    expect_refused_edit("v4_layer_types", "\"partial_rotary_factor\": 0.25", "\"partial_rotary_factor\": 0.5",
                        "\"partial_rotary_factor\" (0.5) rotates 16 of the 32 head channels");
}
END_TEST

/* A weight of case v3_rope_parameters, element [r][c], set to NaN in a copy of its checkpoint. */
static void nan_weight_copy(const char *dir, const char *tensor, size_t r, size_t c)
{
    kvl_st_file f;
    ck_assert_msg(kvl_st_open(&f, kvl_path(ECO "v3_rope_parameters/model.safetensors")) == KVL_OK, "%s", kvl_error());
    const kvl_st_tensor *t = kvl_st_find(&f, tensor);
    ck_assert(t && t->dtype == KVL_ST_BF16 && t->n_dims == 2);
    size_t at = (size_t)(t->data - (const uint8_t *)f.map) + 2 * (r * t->shape[1] + c);
    uint8_t *bytes = malloc(f.map_bytes);
    ck_assert(bytes);
    memcpy(bytes, f.map, f.map_bytes);
    bytes[at] = 0xc0;       /* bf16 0x7fc0, little-endian: a quiet NaN */
    bytes[at + 1] = 0x7f;
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *out = fopen(path, "wb");
    ck_assert(out && fwrite(bytes, 1, f.map_bytes, out) == f.map_bytes && fclose(out) == 0);
    free(bytes);
    kvl_st_close(&f);
}

START_TEST(test_non_finite_weights_or_inputs_are_refused_naming_the_tensor_and_index)
{
    char dir[64], cmd[4096], out[1024], err[1024], root[1024], x[128];
    snprintf(root, sizeof root, "%s/" ECO "v3_rope_parameters", kvl_path("."));
    temp_dir(dir, sizeof dir);
    nan_weight_copy(dir, "model.layers.0.self_attn.kv_b_proj.weight", 17, 5);
    snprintf(cmd, sizeof cmd, "kvlayer --config %s/config.json --weights %s --layer 0 --input %s/model.safetensors "
             "--output %s/o.npy", root, dir, root, dir);
    expect_one_line(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), err,
                    "tensor \"model.layers.0.self_attn.kv_b_proj.weight\" holds nan at [17, 5]");
    float xs[16 * 64];
    for (size_t i = 0; i < 16 * 64; i++) xs[i] = (float)i / 1024.0f;
    xs[3 * 64 + 7] = INFINITY;
    snprintf(x, sizeof x, "%s/x.npy", dir);
    ck_assert(kvl_npy_write(x, xs, 16, 64) == KVL_OK);
    snprintf(cmd, sizeof cmd, "kvlayer --config %s/config.json --weights %s --layer 0 --input %s --output %s/o.npy", root,
             root, x, dir);
    expect_one_line(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), err, "tensor \"x\" holds inf at [3, 7]");
    snprintf(x, sizeof x, "%s/o.npy", dir);
    ck_assert(access(x, F_OK) != 0);
    rm_dir(dir);
}
END_TEST

START_TEST(test_kvlayer_help_states_the_geometries_the_native_rows_need)
{
    char out[4096], err[256];
    ck_assert_int_eq(kvl_run("kvlayer --help", NULL, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "656-byte FP8 latent rows and 132-byte index keys: kv_lora_rank 512, qk_rope_head_dim 64, "
                              "index_head_dim 128") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "584-byte FP8 rows and 68-byte MXFP4 index keys: head_dim 512, qk_rope_head_dim 64") != NULL,
                  "%s", out);
}
END_TEST

/* Field k (from 0) of a CSV line, RFC 4180 quotes removed. */
static void csv_field(char *out, size_t cap, const char *line, size_t k)
{
    int quoted = 0;
    for (; *line && *line != '\n' && k; line++) {
        if (*line == '"') quoted = !quoted;
        else if (*line == ',' && !quoted) k--;
    }
    size_t o = 0;
    for (quoted = 0; *line && *line != '\n' && (quoted || *line != ',') && o + 1 < cap; line++)
        if (*line == '"') quoted = !quoted;
        else out[o++] = *line;
    out[o] = '\0';
}

/* The published V4-Flash config.json, loaded into transformers' DeepseekV4Config and saved again: the
 * layer map, the rotary tables and the table's bytes per token are those of the published file. */
START_TEST(test_a_transformers_5_save_of_v4_flash_reads_as_the_published_file)
{
    kvl_model a, b;
    ck_assert_msg(kvl_model_load(&a, kvl_path("ref/configs/deepseek-v4-flash.json")) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(kvl_model_load(&b, kvl_path(ECO "v4_flash/config.json")) == KVL_OK, "%s", kvl_error());
    ck_assert_int_eq(b.generation, KVL_GEN_V4);
    ck_assert_int_eq(b.rope_spelling, KVL_ROPE_PARAMETERS);
    ck_assert_uint_eq(a.n_layers, b.n_layers);
    for (size_t l = 0; l < a.n_layers; l++) {
        ck_assert_int_eq(a.layers[l].kind, b.layers[l].kind);
        ck_assert_uint_eq(a.layers[l].compress_ratio, b.layers[l].compress_ratio);
    }
    ck_assert_uint_eq(a.window, b.window);
    ck_assert_uint_eq(a.qk_rope_head_dim, b.qk_rope_head_dim);
    ck_assert_uint_eq(a.index_topk, b.index_topk);
    const kvl_rope_config *ra[] = {&a.rope, &a.compress_rope}, *rb[] = {&b.rope, &b.compress_rope};
    for (size_t i = 0; i < 2; i++) {
        ck_assert_double_eq(ra[i]->theta, rb[i]->theta);
        ck_assert_double_eq(ra[i]->factor, rb[i]->factor);
        ck_assert_double_eq(ra[i]->original_len, rb[i]->original_len);
        ck_assert_double_eq(ra[i]->beta_fast, rb[i]->beta_fast);
        ck_assert_double_eq(ra[i]->attention_factor, rb[i]->attention_factor);
    }
    kvl_model_free(&a);
    kvl_model_free(&b);
    char cmd[2048], out[4096], err[512];
    snprintf(cmd, sizeof cmd, "kvtable --format csv %s %s", kvl_path("ref/configs/deepseek-v4-flash.json"),
             kvl_path(ECO "v4_flash/config.json"));
    ck_assert_msg(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err) == 0, "%s", err);
    char *first = strchr(out, '\n'), *second = first ? strchr(first + 1, '\n') : NULL;
    ck_assert(first && second);
    /* columns 2 on (attention … GiB@1M) but "x prev", which is relative to the row above */
    for (size_t k = 2; k < 13; k++) {
        char fa[64], fb[64];
        if (k == 8) continue;
        csv_field(fa, sizeof fa, first + 1, k);
        csv_field(fb, sizeof fb, second + 1, k);
        ck_assert_msg(strcmp(fa, fb) == 0, "kvtable column %zu: %s against %s\n%s", k, fa, fb, out);
    }
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("reference_hf");
    TCase *tc = tcase_create("transformers");
    tcase_add_test(tc, test_mla_matches_transformers_deepseek_v3_on_fp8_weights);
    tcase_add_test(tc, test_dsa_matches_transformers_deepseek_v32);
    tcase_add_test(tc, test_v4_window_layer_matches_transformers_deepseek_v4);
    tcase_add_test(tc, test_v4_csa_layer_matches_transformers_deepseek_v4);
    tcase_add_test(tc, test_v4_hca_layer_matches_transformers_deepseek_v4);
    tcase_add_test(tc, test_v41_stack_matches_the_inference_formulas);
    tcase_add_test(tc, test_reference_files_name_their_versions);
    suite_add_tcase(s, tc);
    TCase *prog = tcase_create("kvlayer");
    tcase_add_test(prog, test_kvlayer_runs_a_v3_fp8_checkpoint_from_npy_as_transformers_does);
    tcase_add_test(prog, test_kvlayer_runs_a_v32_checkpoint_from_safetensors_as_transformers_does);
    tcase_add_test(prog, test_kvlayer_runs_a_v4_csa_layer_as_transformers_does);
    tcase_add_test(prog, test_kvlayer_refuses_bad_input_with_one_line);
    suite_add_tcase(s, prog);
    TCase *eco = tcase_create("ecosystem");
    tcase_add_test(eco, test_transformers_5_rope_parameters_are_read_as_transformers_does);
    tcase_add_test(eco, test_rope_interleave_false_rotates_half_split_pairs_as_transformers_does);
    tcase_add_test(eco, test_mscale_unlike_mscale_all_dim_scales_cos_and_sin_as_transformers_does);
    tcase_add_test(eco, test_yarn_without_mscale_keys_is_read_in_the_convention_of_its_spelling);
    tcase_add_test(eco, test_the_v32_indexer_carries_transformers_factor_on_cos_and_sin);
    tcase_add_test(eco, test_v4_layer_types_and_compress_rates_of_transformers_5_are_read);
    tcase_add_test(eco, test_float64_safetensors_input_is_read);
    tcase_add_test(eco, test_two_spellings_of_one_setting_that_disagree_are_refused);
    tcase_add_test(eco, test_rotary_settings_the_project_does_not_compute_are_refused);
    tcase_add_test(eco, test_non_finite_weights_or_inputs_are_refused_naming_the_tensor_and_index);
    tcase_add_test(eco, test_kvlayer_help_states_the_geometries_the_native_rows_need);
    tcase_add_test(eco, test_a_transformers_5_save_of_v4_flash_reads_as_the_published_file);
    tcase_add_test(eco, test_the_latent_norms_keep_their_own_eps_beside_a_config_rms_norm_eps_of_1e_2);
    tcase_add_test(eco, test_a_v4_model_saved_by_transformers_5_in_two_shards_is_read_whole);
    tcase_add_test(eco, test_a_v3_model_saved_by_transformers_5_in_two_shards_is_read_whole);
    tcase_add_test(eco, test_a_v32_model_saved_by_transformers_5_in_two_shards_is_read_whole);
    tcase_add_test(eco, test_attention_biases_are_refused_by_name_rather_than_dropped);
    tcase_add_test(eco, test_an_input_near_flt_max_is_refused_naming_the_element_that_overflows);
    tcase_add_test(eco, test_an_older_compress_rate_beside_compress_ratios_is_refused_by_name);
    suite_add_tcase(s, eco);
    return s;
}
