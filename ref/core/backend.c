#include "backend.h"

#include "index_scan.h"
#include "linalg.h"

const kvl_backend kvl_backend_ref = {
    .name = "ref",
    .matmul_abt = kvl_matmul_abt_f32_ref,
    .matmul_ab = kvl_matmul_ab_f32_ref,
    .matvec = kvl_matvec_f32_ref,
    .attend = kvl_attend_ref,
    .index_scores = kvl_index_scores_ref,
    .index_scores_listed = kvl_index_scores_listed_ref,
    .attend_chunk_head = kvl_attend_chunk_head_ref,
};

static const kvl_backend *in_use = &kvl_backend_ref;

const kvl_backend *kvl_backend_in_use(void) { return in_use; }

void kvl_backend_use(const kvl_backend *b) { in_use = b ? b : &kvl_backend_ref; }
