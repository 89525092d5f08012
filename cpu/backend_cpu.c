#include "backend_cpu.h"

#include <stdlib.h>
#include <string.h>

#include "attend_cpu.h"
#include "index_scan_cpu.h"
#include "linalg_cpu.h"

const kvl_backend kvl_backend_cpu = {
    .name = "cpu",
    .matmul_abt = kvl_matmul_abt_f32_cpu,
    .matmul_ab = kvl_matmul_ab_f32_cpu,
    .matvec = kvl_matvec_f32_cpu,
    .attend = kvl_attend_cpu,
    .index_scores = kvl_index_scores_cpu,
    .index_scores_listed = kvl_index_scores_listed_cpu,
    .attend_chunk_head = kvl_attend_chunk_head_cpu,
};

const kvl_backend *kvl_backend_choose(void)
{
    const char *name = getenv("KVL_BACKEND");
    kvl_backend_use(name && !strcmp(name, "ref") ? &kvl_backend_ref : &kvl_backend_cpu);
    return kvl_backend_in_use();
}
