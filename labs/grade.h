/* What every chapter's grader (labs/NN_name/grade.c) shares: compare a lab's answer with the
 * definition, element by element, and say where it first goes wrong.
 *
 * A grader runs each lab through a few cases chosen so that a wrong answer cannot pass by accident
 * (sizes past one tile, ties, ragged blocks, several heads per group), checks every element of
 * every output, and prints one verdict per lab:
 *
 *     gqa_decode: right (3 cases, 14,336 elements)
 *
 * or, at the first element outside the tolerance,
 *
 *     gqa_decode: WRONG in case "T = 37, H = 8, Hkv = 2, Dh = 64"
 *       first difference at o[3][17]: expected 0.421130438, got 0
 *       tolerance: |got − expected| ≤ 1e-05 + 1e-05·|expected|
 *       hint: o_h = Σ_t softmax_t(q_h·K[t][g] / √Dh)·V[t][g] with g = ⌊h/(H/Hkv)⌋ (chapter 1,
 *             "What it computes")
 *
 * After its first difference a lab's later checks print nothing: one message, the first one. Inputs
 * are drawn with ref/core/rng.h at fixed seeds, so a run is repeatable. */
#ifndef KVL_LABS_GRADE_H
#define KVL_LABS_GRADE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *lab;   /* the lab's file and function name, "gqa_decode" */
    const char *hint;  /* the formula it computes and the chapter section that states it */
    const char *case_; /* the case being checked, set by grade_case */
    size_t cases, elements;
    int wrong; /* a difference was found: later checks are skipped */
} lab_grade;

/* Start grading lab `lab`; `hint` is printed with its first difference. */
void grade_begin(lab_grade *g, const char *lab, const char *hint);

/* Name the case the next checks belong to (printf-style; kept until the next call). */
void grade_case(lab_grade *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* An array's name and shape, for naming an element: {"o", {8, 64}, 2} names element 209
 * "o[3][17]". */
typedef struct {
    const char *name;
    size_t dims[4];
    size_t rank; /* 1 to 4 */
} grade_shape;

/* got[n] against want[n] (n = the shape's elements): each |got − want| ≤ atol + rtol·|want|, and a
 * NaN or infinity where want is finite is a difference (an infinite want needs the same infinity).
 * 0 when every element holds, else 1 after printing the first difference. */
int grade_f32(lab_grade *g, const grade_shape *s, const float *got, const double *want, double atol,
              double rtol);

/* Exact comparisons: codes printed in hex, counts and indices in decimal. */
int grade_u8(lab_grade *g, const grade_shape *s, const uint8_t *got, const uint8_t *want);
int grade_i64(lab_grade *g, const grade_shape *s, const int64_t *got, const int64_t *want);

/* A single value that must equal `want` exactly (a count, a byte size). */
int grade_value(lab_grade *g, const char *name, int64_t got, int64_t want);

/* A single real value: |got − want| ≤ atol + rtol·|want| (a NaN or infinity is a difference). */
int grade_real(lab_grade *g, const char *name, double got, double want, double atol, double rtol);

/* A single value that must be a whole number equal to `want` (bytes, sequences): a fraction or a
 * NaN is a difference. */
int grade_whole(lab_grade *g, const char *name, double got, double want);

/* Print the lab's verdict; 0 when right. */
int grade_end(lab_grade *g);

/* A grader's main: run each lab's grading function in a child process, so that a lab that crashes
 * or never returns is reported by name (with the case it was in) and the others still run. Returns
 * the exit status: 0 when every lab is right, 1 otherwise. */
typedef int (*grade_fn)(void);
int grade_main(const grade_fn *labs, size_t n);

/* Stop the grader when the project's own call it grades against failed (status not KVL_OK): a
 * missing config (KVL_ROOT unset) or a definition that refused its inputs, which is the grader's
 * fault, never the student's. */
void grade_require(int status);

/* The configs of ref/configs/ (kvl_config_files) sorted by path, so that cases come in the same
 * order on every machine; free with kvl_config_files_free. */
void grade_configs(char ***paths, size_t *n);

/* malloc that stops the grader with a message when memory runs out. */
void *grade_alloc(size_t bytes);

#endif
