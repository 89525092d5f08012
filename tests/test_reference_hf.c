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
 * V4.1 has no transformers class: its referee is the script's own torch rendering of the inference code's
 * formulas as spec §6 records them (a six-layer stack with every mode and the candidate pool), without
 * the FP4/FP8 round trips, so it is compared with the float32 paths.
 *
 * Where transformers and the spec could differ (spec generations.md §10), they agree on these files:
 *   §10.4 indexer RoPE: transformers' V3.2 rotates the leading channels half-split, as the spec;
 *   §10.5 index weights: V3.2 and V4 apply HI^−½ and DI^−½, as the spec;
 *   §10.7 per-head query RMSNorm: V4's q_b_norm, as the spec's V4;
 *   §10.8 V4 causality: the installed revision masks compressed entries i ≥ ⌊(t+1)/M⌋ in both HCA and
 *         the CSA indexer, the spec's rule (not the zero-padded revisions);
 *   §10.9 V4 RoPE: interleaved pairs on the trailing channels, as the spec;
 *   §10.14 Hadamard rotation: transformers has none; the f32 indexers (the forwards') have none either,
 *          and the rotation is orthonormal, so scores are equal in exact arithmetic;
 *   §10.15 YaRN: transformers takes it from the config, as the spec; V3's mscale = mscale_all_dim and
 *          V4's forced attention_factor 1 keep its cos/sin unscaled, as the inference code.
 * torch.topk breaks ties in no stated order, the spec by the smaller position (§11.4); ReLU makes exact
 * ties at 0 common, so the script draws until every query's K-th and (K+1)-th index scores differ by
 * more than 10^−3, and the comparison is of the spec's rule on tie-free data.
 * transformers applies V3's interleaved RoPE by splitting the even and odd channels into two halves;
 * queries and keys are permuted alike, so every score, and so the output, is the same. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "csa2_stack.h"
#include "dsa.h"
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

/* The reference `name`, its output tensor `out_name`. */
static void open_reference_out(reference *r, const char *name, const char *out_name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "tests/reference/%s.json", name);
    ck_assert_msg(kvl_model_load(&r->model, kvl_path(rel)) == KVL_OK, "%s", kvl_error());
    snprintf(rel, sizeof rel, "tests/reference/%s.safetensors", name);
    ck_assert_msg(kvl_st_checkpoint_open(&r->ck, kvl_path(rel)) == KVL_OK, "%s", kvl_error());
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
    ck_assert(mla_cache_init(&cache, c, r->T, SWA_STORE_F32) == KVL_OK);
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
    ck_assert_msg(mla_weights_load(&w, &c, &r.ck, 0) == KVL_OK, "%s", kvl_error());
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
    ck_assert_msg(dsa_weights_load(&w, &c, &r.ck, 0) == KVL_OK, "%s", kvl_error());
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
static void load_v41_stack(csa2_stack_weights *w, const csa2_stack_config *s, const reference *r)
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
        ck_assert_msg(csa2_weights_load(&w->layers[l], &s->layers[l], &r->ck, l) == KVL_OK, "%s", kvl_error());
    }
}

START_TEST(test_v41_stack_matches_the_inference_formulas)
{
    reference r;
    open_reference(&r, "deepseek_v41_tiny");
    csa2_stack_config s;
    ck_assert_msg(csa2_stack_config_from_model(&s, &r.model) == KVL_OK, "%s", kvl_error());
    csa2_stack_weights w;
    load_v41_stack(&w, &s, &r);
    float *got = malloc(r.T * r.d * sizeof *got);
    ck_assert(got);
    ck_assert_msg(csa2_stack_forward(got, NULL, NULL, &s, &w, r.x, r.T) == KVL_OK, "%s", kvl_error());
    expect_matches(&r, "csa2_stack_forward", got);
    memset(got, 0, r.T * r.d * sizeof *got);
    csa2_cache cache;
    ck_assert_msg(csa2_cache_init(&cache, &s, r.T, CSA2_CACHE_F32) == KVL_OK, "%s", kvl_error());
    const size_t split = 9;   /* inside a block of 2 and a candidate block of 4 */
    ck_assert_msg(csa2_stack_prefill(got, NULL, &s, &w, &cache, r.x, split) == KVL_OK, "%s", kvl_error());
    for (size_t t = split; t < r.T; t++)
        ck_assert_msg(csa2_stack_decode(got + t * r.d, &s, &w, &cache, r.x + t * r.d) == KVL_OK, "%s", kvl_error());
    expect_matches(&r, "csa2_stack_prefill + csa2_stack_decode", got);
    csa2_cache_free(&cache);
    free(got);
    csa2_stack_weights_free(&w);
    csa2_stack_config_free(&s);
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
    expect_one_line(kvlayer("deepseek_v3_tiny", "--layer 0 --frob 1", err, sizeof err), err, "unknown option \"--frob\"");
    expect_one_line(kvlayer("deepseek_v3_tiny", "--layer x", err, sizeof err), err, "--layer needs a non-negative integer");
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
    return s;
}
