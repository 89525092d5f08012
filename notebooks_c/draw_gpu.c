/* draw_gpu: notebook 10's plumbing (draw_gpu.h). */
#include "draw_gpu.h"

#include <string.h>

#include "device.h"
#include "nb.h"
#include "status.h"
#include "svg.h"

enum { MAX_BUFFERS = 64 };
static void *buffers[MAX_BUFFERS];
static size_t n_buffers;

void *nb10_device(const void *host, size_t bytes)
{
    void *d = NULL;
    if (n_buffers == MAX_BUFFERS) {
        kvl_fail(KVL_ENOMEM, "notebook 10 holds %d device buffers already", MAX_BUFFERS);
        return NULL;
    }
    if (kvl_cuda_alloc(&d, bytes) != KVL_OK) return NULL;
    buffers[n_buffers++] = d;
    if ((host ? kvl_cuda_upload(d, host, bytes) : kvl_cuda_fill(d, 0, bytes)) != KVL_OK)
        return NULL;
    return d;
}

int nb10_fetch(void *host, const void *dev, size_t bytes)
{
    return kvl_cuda_download(host, dev, bytes);
}

void nb10_free_all(void)
{
    while (n_buffers > 0) kvl_cuda_free(buffers[--n_buffers]);
}

void nb10_emulator_setup(void)
{
    kvl_cuda_use_order(0);
    kvl_cuda_quiet_faults(1);
}

const char *nb10_report(void)
{
    const char *e = kvl_error(), *at = strstr(e, "emulator fault");
    return at ? at : e;
}

int nb10_draw_fragment(const unsigned char *reg)
{
    static const char *const colours[] = {"#1f4e8c", "#7fa7d9", "#e07b39", "#f4c095"};
    static const char *const legend[] = {
        "a[0]: rows g, columns 2t, 2t+1", "a[1]: rows g+8, columns 2t, 2t+1",
        "a[2]: rows g, columns 2t+8, 2t+9", "a[3]: rows g+8, columns 2t+8, 2t+9"};
    svg_doc s;
    svg_grid(&s, "mma.sync m16n8k16: the register of lane 4g + t that holds A[r][c]", reg, 16, 16,
             colours, legend, 4, "row r of A", "column c of A", 4, 4);
    return nb_figure("mma_fragment_a", &s);
}
