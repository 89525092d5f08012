/* Chapter 7: prefix caching without window rows (ref/prefix_cache.h; the DeepSeek-V4 report's
 * Zero SWA Caching and the DeepSeek-V4.1 report's bounded replay). A V4.1 cache persists its global KV only and round-trips bit for bit; a hit
 * followed by encoder and decoder replay decodes as the full run does; the file holds exactly the global
 * bytes the live cache reports; every kind of damaged, truncated or foreign file is refused and leaves the
 * cache as it was. V4 stacks persist the same way, with or without their window rows. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "v41_ced.h"
#include "ch07_stack_toy.h"
#include "ch07_toy.h"
#include "common.h"
#include "prefix_cache.h"
#include "prefix_file.h"
#include "v4_toy.h"

#define P 100
#define MAX_T 104



static const char *tmp_path(const char *name)
{
    static char path[4][256];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "/tmp/kvl_test_%ld_%s", (long)getpid(), name);
    return p;
}

static size_t file_size(const char *path)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return (size_t)st.st_size;
}

static uint8_t *slurp(const char *path, size_t *n)
{
    *n = file_size(path);
    uint8_t *b = malloc(*n);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void spit(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* FNV-1a over everything a v41 cache holds, to see that a refused load left it alone. */
static uint64_t cache_hash(const v41_cache *c)
{
    uint64_t h = prefix_fnv1a(PREFIX_FNV_BASIS, &c->len, sizeof c->len);
    for (size_t l = 0; l < c->n_layers; l++) {
        const v4_rows *r[] = {&c->window[l], &c->entries[l], &c->keys[l]};
        for (size_t i = 0; i < 3; i++) {
            if (!r[i]->bytes) continue;
            h = prefix_fnv1a(h, &r[i]->len, sizeof r[i]->len);
            h = prefix_fnv1a(h, &r[i]->first, sizeof r[i]->first);
            h = prefix_fnv1a(h, r[i]->bytes, r[i]->slots * r[i]->row_bytes);
        }
        if (c->state[l].a) h = prefix_fnv1a(h, c->state[l].a, v41_compressor_state_bytes(&c->state[l]));
    }
    return h;
}

START_TEST(test_persisted_global_kv_round_trips_bit_for_bit)
{
    ch07_stack_toy t;
    ch07_stack_toy_make(&t, 8201, MAX_T);
    v41_cache c, back;
    ch07_stack_toy_prefill(&c, NULL, &t, P, 0);
    const char *path = tmp_path("roundtrip.kvp");
    ck_assert_msg(v41_prefix_save(path, &t.s, &c) == KVL_OK, "%s", kvl_error());
    ck_assert_int_eq(v41_cache_init(&back, &t.s, MAX_T, V41_CACHE_F32), KVL_OK);
    ck_assert_msg(v41_prefix_load(&back, &t.s, path) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(back.len, P);
    for (size_t l = 0; l < t.L; l++) {
        ck_assert_uint_eq(v4_rows_held(&back.window[l]), 0);
        ck_assert_uint_eq(back.window[l].len, P);
        if (t.s.layers[l].kind != KVL_LAYER_FULL) continue;
        ck_assert_uint_eq(back.entries[l].len, c.entries[l].len);
        ck_assert(memcmp(back.entries[l].bytes, c.entries[l].bytes, v4_rows_bytes_used(&c.entries[l])) == 0);
        ck_assert(memcmp(back.keys[l].bytes, c.keys[l].bytes, v4_rows_bytes_used(&c.keys[l])) == 0);
        ck_assert_uint_eq(back.state[l].pos, P);
        ck_assert(memcmp(back.state[l].a, c.state[l].a, v41_compressor_state_bytes(&c.state[l])) == 0);
    }
    /* The file is the global bytes the cache reports, the tails, and the framing: no window row. */
    size_t n_sections = 0;
    for (size_t l = 0; l < t.L; l++) n_sections += t.s.layers[l].kind == KVL_LAYER_FULL ? 3 : 0;
    ck_assert_uint_eq(file_size(path), PREFIX_HEADER_BYTES + PREFIX_ENTRY_BYTES * n_sections + v41_cache_bytes_used(&c) +
                                           v41_cache_state_bytes(&c) + 8);
    remove(path);
    v41_cache_free(&c);
    v41_cache_free(&back);
    ch07_stack_toy_free(&t);
}
END_TEST

START_TEST(test_prefix_hit_with_encoder_and_decoder_replay_decodes_as_the_full_run)
{
    ch07_stack_toy t;
    ch07_stack_toy_make(&t, 8201, MAX_T);
    const size_t s = v41_ced_exact_replay_start(P, t.L, t.W);
    v41_cache full, hit;
    ch07_stack_toy_prefill(&full, NULL, &t, P, s);
    const char *path = tmp_path("hit.kvp");
    ck_assert_msg(v41_prefix_save(path, &t.s, &full) == KVL_OK, "%s", kvl_error());
    ck_assert_int_eq(v41_cache_init(&hit, &t.s, MAX_T, V41_CACHE_F32), KVL_OK);
    ck_assert_msg(v41_prefix_load(&hit, &t.s, path) == KVL_OK, "%s", kvl_error());
    float *h = malloc((P - s) * t.d * sizeof *h);
    memcpy(h, t.x + s * t.d, (P - s) * t.d * sizeof *h);
    ck_assert_msg(v41_ced_encoder_replay(h, &t.s, &t.w, &hit, s) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(v41_ced_decoder_replay(h, &t.s, &t.w, &hit, s) == KVL_OK, "%s", kvl_error());
    float want[64 * 4], got[64 * 4];
    ck_assert_uint_le(t.d * (MAX_T - P), sizeof want / sizeof *want);
    for (size_t i = P; i < MAX_T; i++) {
        ck_assert_int_eq(v41_stack_decode(want + (i - P) * t.d, &t.s, &t.w, &full, t.x + i * t.d), KVL_OK);
        ck_assert_int_eq(v41_stack_decode(got + (i - P) * t.d, &t.s, &t.w, &hit, t.x + i * t.d), KVL_OK);
    }
    ck_assert(memcmp(got, want, t.d * (MAX_T - P) * sizeof *got) == 0);
    remove(path);
    free(h);
    v41_cache_free(&full);
    v41_cache_free(&hit);
    ch07_stack_toy_free(&t);
}
END_TEST

/* Load `path` into a prefilled cache: refused with KVL_EPARSE (or KVL_EIO), the cache untouched, and the
 * message naming the file. */
static void expect_refused(const ch07_stack_toy *t, v41_cache *c, const char *path, const char *why)
{
    const uint64_t before = cache_hash(c);
    const int rc = v41_prefix_load(c, &t->s, path);
    ck_assert_msg(rc == KVL_EPARSE || rc == KVL_EIO, "%s: loaded (rc %d)", why, rc);
    ck_assert_msg(strstr(kvl_error(), path) != NULL, "%s: message does not name the file: %s", why, kvl_error());
    ck_assert_msg(cache_hash(c) == before, "%s: the refused load changed the cache", why);
}

START_TEST(test_damaged_truncated_or_foreign_files_are_refused_whole)
{
    ch07_stack_toy t;
    ch07_stack_toy_make(&t, 8201, MAX_T);
    v41_cache c;
    ch07_stack_toy_prefill(&c, NULL, &t, P, 0);
    const char *good = tmp_path("good.kvp"), *bad = tmp_path("bad.kvp");
    ck_assert_int_eq(v41_prefix_save(good, &t.s, &c), KVL_OK);
    size_t n;
    uint8_t *b = slurp(good, &n);

    /* truncated anywhere: in the header, the table, a section, the checksum */
    for (size_t cut = 0; cut < n; cut += cut < 256 ? 1 : 397) {
        spit(bad, b, cut);
        expect_refused(&t, &c, bad, "truncated");
    }
    /* one bit flipped anywhere */
    for (size_t at = 0; at < n; at += 101) {
        b[at] ^= 0x10;
        spit(bad, b, n);
        expect_refused(&t, &c, bad, "bit flipped");
        b[at] ^= 0x10;
    }
    /* another version, a missing file */
    b[8] = 2;
    spit(bad, b, n);
    expect_refused(&t, &c, bad, "version 2");
    ck_assert_ptr_nonnull(strstr(kvl_error(), "version"));
    remove(bad);
    expect_refused(&t, &c, bad, "missing");

    /* well-formed files whose content lies: checksums valid, so only the content checks can refuse them */
    prefix_file f;
    ck_assert_int_eq(prefix_file_parse(&f, b, n, good), KVL_EPARSE);  /* the version byte is still 2 */
    b[8] = 1;
    ck_assert_int_eq(prefix_file_parse(&f, b, n, good), KVL_OK);
    prefix_section *sec = malloc(f.n * sizeof *sec);
    memcpy(sec, f.sections, f.n * sizeof *sec);
    sec[0].rows -= 1;   /* an entry short */
    ck_assert_int_eq(prefix_file_write(bad, f.tokens, f.fingerprint, sec, f.n), KVL_OK);
    expect_refused(&t, &c, bad, "entry short");
    sec[0].rows += 1;
    ck_assert_int_eq(prefix_file_write(bad, f.tokens, f.fingerprint ^ 1, sec, f.n), KVL_OK);
    expect_refused(&t, &c, bad, "another model");
    ck_assert_ptr_nonnull(strstr(kvl_error(), "another model"));
    ck_assert_int_eq(prefix_file_write(bad, MAX_T + 1, f.fingerprint, sec, f.n), KVL_OK);
    expect_refused(&t, &c, bad, "longer than the cache");
    ck_assert_int_eq(prefix_file_write(bad, f.tokens, f.fingerprint, sec, f.n - 1), KVL_OK);
    expect_refused(&t, &c, bad, "a section missing");
    uint8_t *nan_rows = malloc(sec[0].rows * sec[0].row_bytes);
    memcpy(nan_rows, sec[0].bytes, sec[0].rows * sec[0].row_bytes);
    const float nan = NAN;
    memcpy(nan_rows + 4 * 3, &nan, sizeof nan);
    sec[0].bytes = nan_rows;
    ck_assert_int_eq(prefix_file_write(bad, f.tokens, f.fingerprint, sec, f.n), KVL_OK);
    expect_refused(&t, &c, bad, "a NaN in an entry");

    remove(bad);
    remove(good);
    free(nan_rows);
    free(sec);
    prefix_file_free(&f);
    free(b);
    v41_cache_free(&c);
    ch07_stack_toy_free(&t);
}
END_TEST

START_TEST(test_write_leaves_no_partial_file)
{
    ch07_stack_toy t;
    ch07_stack_toy_make(&t, 8201, MAX_T);
    v41_cache c;
    ch07_stack_toy_prefill(&c, NULL, &t, P, 0);
    ck_assert_int_eq(v41_prefix_save("/nonexistent-dir/x.kvp", &t.s, &c), KVL_EIO);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "/nonexistent-dir/x.kvp"));
    ck_assert_int_eq(access("/nonexistent-dir/x.kvp.tmp", F_OK), -1);
    const prefix_section bad_tag = {.tag = "", .rows = 0};
    ck_assert_int_eq(prefix_file_write(tmp_path("tag.kvp"), 1, 0, &bad_tag, 1), KVL_EINVAL);
    ck_assert_int_eq(access(tmp_path("tag.kvp"), F_OK), -1);
    v41_cache_free(&c);
    ch07_stack_toy_free(&t);
}
END_TEST

/* A FIFO named as a prefix file would block a reader that opened it before checking its type. */
START_TEST(test_a_fifo_is_refused_without_blocking)
{
    const char *fifo = tmp_path("fifo.kvp");
    unlink(fifo);
    ck_assert(mkfifo(fifo, 0600) == 0);
    prefix_file f;
    ck_assert_int_eq(prefix_file_read(&f, fifo), KVL_EIO);
    ck_assert_msg(strstr(kvl_error(), "not a regular file") != NULL, "%s", kvl_error());
    unlink(fifo);
}
END_TEST

START_TEST(test_fuzz_seeds_are_current_files_of_the_toy)
{
    /* The fuzz target's seeds must load, or the fuzzer starts from files the reader refuses at once. */
    kvl_model m;
    v41_stack_config s;
    ck_assert_int_eq(ch07_toy_model(&m), KVL_OK);
    ck_assert_int_eq(v41_stack_config_from_model(&s, &m), KVL_OK);
    const char *seeds[] = {"tests/fuzz/corpus/prefix/toy-7-tokens.kvp", "tests/fuzz/corpus/prefix/toy-20-tokens.kvp"};
    const size_t tokens[] = {7, 20};
    for (size_t i = 0; i < 2; i++) {
        v41_cache c;
        ck_assert_int_eq(v41_cache_init(&c, &s, 64, V41_CACHE_F32), KVL_OK);
        ck_assert_msg(v41_prefix_load(&c, &s, kvl_path(seeds[i])) == KVL_OK, "%s", kvl_error());
        ck_assert_uint_eq(c.len, tokens[i]);
        v41_cache_free(&c);
    }
    v41_stack_config_free(&s);
    kvl_model_free(&m);
}
END_TEST

/* ---- V4 stacks ---------------------------------------------------------------------------------------------- */

typedef struct {
    model_config c;
    model_weights w;
} v4_stack;

static void v4_stack_make(v4_stack *s)
{
    kvl_model m;
    v4_toy_model(&m, 3);
    ck_assert_msg(model_config_from_model(&s->c, &m, 0, MODEL_MLP_SWIGLU) == KVL_OK, "%s", kvl_error());
    kvl_model_free(&m);
    kvl_rng rng;
    kvl_rng_seed(&rng, 8202);
    ck_assert_msg(model_weights_init_random(&s->w, &s->c, &rng) == KVL_OK, "%s", kvl_error());
}

static void v4_stack_free(v4_stack *s)
{
    model_weights_free(&s->w);
    model_config_free(&s->c);
}

START_TEST(test_v4_files_with_and_without_window_rows_restore_the_next_tokens)
{
    v4_stack st;
    v4_stack_make(&st);
    const size_t d = st.c.d, L = st.c.n_layers, W = st.c.layers[0].v4.window, s = P - 1 - L * (W - 1);
    float *x = v4_toy_inputs(MAX_T, d, 8203), *o = malloc(MAX_T * d * sizeof *o);
    model_cache full, global, windowed;
    ck_assert_int_eq(model_cache_init_v4(&full, &st.c, MAX_T, V4_CACHE_F32), KVL_OK);
    ck_assert_int_eq(model_prefill(o, &st.c, &st.w, &full, x, s), KVL_OK);
    ck_assert_int_eq(model_prefill(o, &st.c, &st.w, &full, x + s * d, P - s), KVL_OK);
    const char *pg = tmp_path("v4g.kvp"), *pw = tmp_path("v4w.kvp");
    ck_assert_msg(v4_prefix_save(pg, &st.c, &full) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(v4_prefix_save_with_window(pw, &st.c, &full) == KVL_OK, "%s", kvl_error());
    size_t window_bytes = 0;
    for (size_t l = 0; l < L; l++) window_bytes += v4_cache_window_bytes(&full.v4[l]);
    ck_assert_uint_eq(file_size(pw) - file_size(pg), window_bytes + L * PREFIX_ENTRY_BYTES);

    ck_assert_int_eq(model_cache_init_v4(&global, &st.c, MAX_T, V4_CACHE_F32), KVL_OK);
    ck_assert_int_eq(model_cache_init_v4(&windowed, &st.c, MAX_T, V4_CACHE_F32), KVL_OK);
    ck_assert_msg(v4_prefix_load(&global, &st.c, pg) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(v4_prefix_load(&windowed, &st.c, pw) == KVL_OK, "%s", kvl_error());
    ck_assert_int_eq(model_cache_drop_windows(&global, s), KVL_OK);
    ck_assert_msg(model_replay(o, &st.c, &st.w, &global, x + s * d, P - s) == KVL_OK, "%s", kvl_error());
    float *want = malloc(d * sizeof *want), *g = malloc(d * sizeof *g), *wv = malloc(d * sizeof *wv);
    for (size_t i = P; i < MAX_T; i++) {
        ck_assert_int_eq(model_decode(want, &st.c, &st.w, &full, x + i * d), KVL_OK);
        ck_assert_int_eq(model_decode(g, &st.c, &st.w, &global, x + i * d), KVL_OK);
        ck_assert_int_eq(model_decode(wv, &st.c, &st.w, &windowed, x + i * d), KVL_OK);
        ck_assert(memcmp(g, want, d * sizeof *g) == 0);
        ck_assert(memcmp(wv, want, d * sizeof *wv) == 0);
    }
    remove(pg);
    remove(pw);
    free(want); free(g); free(wv); free(x); free(o);
    model_cache_free(&full);
    model_cache_free(&global);
    model_cache_free(&windowed);
    v4_stack_free(&st);
}
END_TEST

START_TEST(test_a_v41_file_is_not_a_v4_file)
{
    ch07_stack_toy t;
    ch07_stack_toy_make(&t, 8201, MAX_T);
    v41_cache c;
    ch07_stack_toy_prefill(&c, NULL, &t, P, 0);
    const char *path = tmp_path("v41.kvp");
    ck_assert_int_eq(v41_prefix_save(path, &t.s, &c), KVL_OK);
    v4_stack st;
    v4_stack_make(&st);
    model_cache mc;
    ck_assert_int_eq(model_cache_init_v4(&mc, &st.c, MAX_T, V4_CACHE_F32), KVL_OK);
    ck_assert_int_eq(v4_prefix_load(&mc, &st.c, path), KVL_EPARSE);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "another model"));
    ck_assert_uint_eq(model_cache_len(&mc), 0);
    remove(path);
    model_cache_free(&mc);
    v4_stack_free(&st);
    v41_cache_free(&c);
    ch07_stack_toy_free(&t);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch07_replay_persist");
    TCase *tc = tcase_create("persist");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_persisted_global_kv_round_trips_bit_for_bit);
    tcase_add_test(tc, test_prefix_hit_with_encoder_and_decoder_replay_decodes_as_the_full_run);
    tcase_add_test(tc, test_damaged_truncated_or_foreign_files_are_refused_whole);
    tcase_add_test(tc, test_write_leaves_no_partial_file);
    tcase_add_test(tc, test_a_fifo_is_refused_without_blocking);
    tcase_add_test(tc, test_fuzz_seeds_are_current_files_of_the_toy);
    tcase_add_test(tc, test_v4_files_with_and_without_window_rows_restore_the_next_tokens);
    tcase_add_test(tc, test_a_v41_file_is_not_a_v4_file);
    suite_add_tcase(s, tc);
    return s;
}
