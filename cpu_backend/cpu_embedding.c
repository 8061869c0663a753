/* cpu_embedding.c: the embedding lookup and its backward op.
 *
 * embedding (table [V, D], ids i32 [...]) -> [..., D]: output row p is
 * table row ids[p].
 * embedding_backward (dy [..., D], ids) -> dtable [V, D]: row v is the sum
 * of dy's rows at the positions p whose id is v, added in increasing p in
 * float (the GPU adds in the same order: the same bits), zeros for a row
 * no id names. Both refuse an id outside [0, V) before reading a row
 * (dg_plan_set refuses it earlier; ids can also reach the plan's memory
 * by a gather or through dg_plan_data): one pass over the ints beside
 * D floats moved for each. Parallel over tasks of
 * (a range of vocabulary rows, a block of columns): each task scans every
 * id and owns its part of dtable, so no two threads write one element and
 * every element's order of additions is fixed. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../core/status_internal.h"
#include "cpu_kernels.h"

#define COL_BLOCK 64 /* columns of one backward task */

dg_status dg__cpu_check_index(const dg_node *nd, const dg_node *idx, const int32_t *v, int64_t n, int64_t bound,
                              const char *range) {
    for (int64_t i = 0; i < n; i++)
        if (v[i] < 0 || v[i] >= bound)
            return dg__fail(DG_ERR_INVALID, "cpu: node '%s' (%s): %ld at position %lld of '%s' is outside [0, %lld), %s",
                            nd->name, dg_op_name(nd->op), (long)v[i], (long long)i, idx->name, (long long)bound,
                            range);
    return DG_OK;
}

/* rows: the table [V, D] (forward) or its gradient (backward) */
static dg_status check_ids(const dg_node *nd, const char *what, const dg_node *rows, const dg_node *idn,
                           const int32_t *ids) {
    char range[160];
    snprintf(range, sizeof range, "the rows of %s '%s'", what, rows->name);
    return dg__cpu_check_index(nd, idn, ids, dg_node_numel(idn), rows->shape.d[0], range);
}

dg_status dg__cpu_embedding(const dg_step *s) {
    const dg_node *table = s->node->in[0], *idn = s->node->in[1];
    int64_t d = table->shape.d[1], n = dg_node_numel(idn);
    const float *t = s->in[0];
    const int32_t *ids = s->in[1];
    float *y = s->out;
    dg_status st = check_ids(s->node, "embedding table", table, idn, ids);
    if (st != DG_OK) return st;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < n; p++) memcpy(y + p * d, t + (int64_t)ids[p] * d, (size_t)d * sizeof(float));
    return DG_OK;
}

dg_status dg__cpu_embedding_backward(const dg_step *s) {
    const dg_node *nd = s->node;
    int64_t v = nd->shape.d[0], d = nd->shape.d[1], n = dg_node_numel(nd->in[1]);
    const float *dy = s->in[0];
    const int32_t *ids = s->in[1];
    float *dt = s->out;
    dg_status st = check_ids(nd, "the table's gradient", nd, nd->in[1], ids);
    if (st != DG_OK) return st;
    int64_t cblocks = (d + COL_BLOCK - 1) / COL_BLOCK;
    /* enough tasks to balance ids of uneven frequency over the threads */
    int64_t want = 4 * (int64_t)omp_get_max_threads();
    int64_t vsplit = (want + cblocks - 1) / cblocks;
    if (vsplit > v) vsplit = v;
    if (vsplit < 1) vsplit = 1;
    int64_t tasks = vsplit * cblocks;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; task++) {
        int64_t vs = task / cblocks, cb = task % cblocks;
        int64_t v0 = vs * v / vsplit, v1 = (vs + 1) * v / vsplit;
        int64_t j0 = cb * COL_BLOCK, nj = d - j0 < COL_BLOCK ? d - j0 : COL_BLOCK;
        for (int64_t r = v0; r < v1; r++) memset(dt + r * d + j0, 0, (size_t)nj * sizeof(float));
        for (int64_t p = 0; p < n; p++) {
            int64_t id = ids[p];
            if (id < v0 || id >= v1) continue;
            float *dst = dt + id * d + j0;
            const float *src = dy + p * d + j0;
            for (int64_t j = 0; j < nj; j++) dst[j] += src[j];
        }
    }
    return DG_OK;
}
