#include "topk.h"

#include <math.h>
#include <stdlib.h>

#include "status.h"

typedef struct {
    float score;
    int32_t pos;
} candidate;

/* a ranks above b: larger score, or the same score at a smaller position (a strict total order) */
static int ranks_above(candidate a, candidate b) { return a.score > b.score || (a.score == b.score && a.pos < b.pos); }

/* A heap of the best candidates so far with the lowest-ranked at the root. */
static void sift_down(candidate *h, size_t n, size_t i)
{
    for (;;) {
        size_t low = i;
        const size_t l = 2 * i + 1, r = l + 1;
        if (l < n && ranks_above(h[low], h[l])) low = l;
        if (r < n && ranks_above(h[low], h[r])) low = r;
        if (low == i) return;
        const candidate t = h[i];
        h[i] = h[low];
        h[low] = t;
        i = low;
    }
}

static void sift_up(candidate *h, size_t i)
{
    while (i > 0 && ranks_above(h[(i - 1) / 2], h[i])) {
        const candidate t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static int cmp_pos(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* sel[K] from one row of scores I[N], with heap[K] as scratch */
static void topk_row(int32_t *sel, const float *I, size_t N, size_t K, candidate *heap)
{
    size_t n = 0;
    for (size_t s = 0; s < N; s++) {
        if (isnan(I[s]) || I[s] == -INFINITY) continue;
        const candidate cand = {I[s], (int32_t)s};
        if (n < K) {
            heap[n] = cand;
            sift_up(heap, n++);
        } else if (ranks_above(cand, heap[0])) {
            heap[0] = cand;
            sift_down(heap, n, 0);
        }
    }
    for (size_t k = 0; k < n; k++) sel[k] = heap[k].pos;
    qsort(sel, n, sizeof *sel, cmp_pos);
    for (size_t k = n; k < K; k++) sel[k] = -1;
}

int kvl_topk(int32_t *sel, const float *I, size_t S, size_t N, size_t K)
{
    if (K == 0) return kvl_fail(KVL_EINVAL, "kvl_topk: K must be positive");
    if (N > (size_t)INT32_MAX) return kvl_fail(KVL_EINVAL, "kvl_topk: %zu keys do not fit int32 positions", N);
    if (S && (!sel || (N && !I))) return kvl_fail(KVL_EINVAL, "kvl_topk: NULL array");
    candidate *heap = malloc((K < N ? K : N) * sizeof *heap + 1);
    if (!heap) return kvl_fail(KVL_ENOMEM, "kvl_topk: out of memory for %zu candidates", K < N ? K : N);
    for (size_t i = 0; i < S; i++) topk_row(sel + i * K, I + i * N, N, K, heap);
    free(heap);
    return KVL_OK;
}

