/* decode_ceiling: what one decode step of one attention layer moves and computes, for one sequence
 * whose cache holds N rows of a DeepSeek layout (formats/rows.h), read by H query heads that share
 * every row (MLA's absorbed form: a score over every stored value, a weighted sum over the first
 * V), against an H200's ceilings.
 *
 *   bytes = N · row bytes        flops = 2 · H · N · (values scored + V)
 *   intensity = flops / bytes    ridge = peak flop/s / HBM bytes/s; above it the step is
 * compute-bound
 *
 * The ceilings are NVIDIA's H200 datasheet ("NVIDIA H200 Tensor Core GPU"): HBM3e 4.8 TB/s, BF16
 * tensor core 1,979 TFLOPS and FP8 3,958 TFLOPS "with sparsity", half of each dense. */
#include <stdio.h>
#include <stdlib.h>

#include "grouped.h"
#include "program.h"
#include "rows.h"

#define H200_HBM_BYTES_S 4.8e12
#define H200_BF16_DENSE 989e12 /* 1,979 TFLOPS with sparsity, halved */
#define H200_FP8_DENSE 1979e12 /* 3,958 TFLOPS with sparsity, halved */
#define MAX_ROWS 1000000000ull

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: decode_ceiling [--layout NAME] [--heads H] [--context N] [--value-dims V]\n"
        "Bytes moved and flops of one decode step of one layer for one sequence: N rows (1..%llu,\n"
        "default 65536) of the row layout NAME (v32-main, the default; v32-index, v4-main,\n"
        "v4-index, v41-main, v41-window) read by H heads (1..1024, default 128) that share every\n"
        "row, each scoring all of a row's values and weighting its first V (default 512, at most\n"
        "the row's values); then the time at an H200's HBM bandwidth and tensor-core rates.\n",
        MAX_ROWS);
}

typedef struct {
    kvf_row layout;
    size_t heads, rows, value_dims;
} options;

static int read_options(options *o, int argc, char **argv)
{
    static const kvl_flag FLAGS[] = {
        {"--layout", 1}, {"--heads", 1}, {"--context", 1}, {"--value-dims", 1}};
    *o = (options){KVF_ROW_V32_MAIN, 128, 65536, 512};
    kvl_args a =
        kvl_args_start("decode_ceiling", argc, argv, FLAGS, sizeof FLAGS / sizeof *FLAGS, 0);
    const char *v;
    for (int k; (k = kvl_args_next(&a, &v)) != KVL_ARGS_END;) {
        if (k == KVL_ARGS_HELP) return usage(stdout), -1;
        if (k == KVL_ARGS_BAD) return 2;
        if (k == 0 && kvf_row_from_name(v, &o->layout) != KVF_OK)
            return kvl_bad_usage("decode_ceiling", "--layout is not a row layout", v);
        if (k == 1 && kvl_parse_size(&o->heads, v, 1, 1024))
            return kvl_bad_usage("decode_ceiling", "--heads must be an integer in 1..1024", v);
        if (k == 2 && kvl_parse_size(&o->rows, v, 1, MAX_ROWS))
            return kvl_bad_usage("decode_ceiling", "--context must be an integer in 1..1000000000",
                                 v);
        if (k == 3 && kvl_parse_size(&o->value_dims, v, 1, 4096))
            return kvl_bad_usage("decode_ceiling", "--value-dims must be an integer in 1..4096", v);
    }
    if (o->value_dims > kvf_row_values(o->layout)) {
        char n[32];
        snprintf(n, sizeof n, "%zu", o->value_dims);
        return kvl_bad_usage("decode_ceiling", "--value-dims is more than the row's values", n);
    }
    return 0;
}

static void report(const options *o)
{
    const double row = (double)kvf_row_bytes(o->layout), scored = (double)kvf_row_values(o->layout);
    const double bytes = row * (double)o->rows;
    const double flops =
        2.0 * (double)o->heads * (double)o->rows * (scored + (double)o->value_dims);
    const double intensity = flops / bytes, ridge = H200_BF16_DENSE / H200_HBM_BYTES_S;
    printf("layout %s: %s bytes per row, %s values scored, %s weighted\n",
           kvf_row_name(o->layout), KVL_GROUPED(row), KVL_GROUPED(scored),
           KVL_GROUPED(o->value_dims));
    printf("one decode step of one layer, one sequence: %s rows, %zu heads sharing each row\n",
           KVL_GROUPED(o->rows), o->heads);
    printf("bytes moved: %s B\n", KVL_GROUPED(bytes));
    printf("flops: %s\n", KVL_GROUPED(flops));
    printf("arithmetic intensity: %.2f flop/B\n", intensity);
    printf(
        "H200 (NVIDIA datasheet): HBM 4.8 TB/s, bf16 dense 989 TFLOP/s, FP8 dense 1,979 TFLOP/s\n");
    printf("ridge: bf16 %.2f flop/B, FP8 %.2f flop/B\n", ridge, H200_FP8_DENSE / H200_HBM_BYTES_S);
    printf("time at HBM bandwidth: %.3f us\n", bytes / H200_HBM_BYTES_S * 1e6);
    printf("time at the bf16 rate: %.3f us\n", flops / H200_BF16_DENSE * 1e6);
    printf("time at the FP8 rate: %.3f us\n", flops / H200_FP8_DENSE * 1e6);
    printf("bound at bf16: %s\n", intensity > ridge ? "compute" : "memory");
}

int main(int argc, char **argv)
{
    options o;
    const int rc = read_options(&o, argc, argv);
    if (rc != 0) return rc < 0 ? kvl_exit_status("decode_ceiling", 0) : rc;
    report(&o);
    return kvl_exit_status("decode_ceiling", 0);
}
