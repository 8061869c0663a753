/* comm_bucket.c: see comm_bucket.h. */
#include "comm_bucket.h"

#include "cost.h"
#include "graph.h"

bool dg__bucket_full_for(const dg_bucket *b, size_t bytes) {
    return b->n == DG_BUCKET_MAX_MEMBERS || (b->n && b->bytes + bytes > b->cap);
}

bool dg__bucket_add(dg_bucket *b, const float *in, float *out, size_t count) {
    b->item[b->n++] = (dg_bucket_item){in, out, count};
    b->bytes += count * sizeof(float);
    return b->bytes >= b->cap;
}

void dg__bucket_clear(dg_bucket *b) {
    b->n = 0;
    b->bytes = 0;
}

static bool overlaps(const void *p, size_t n, const void *q, size_t m) {
    const char *a = (const char *)p, *c = (const char *)q;
    return p && q && n && m && a < c + m && c < a + n;
}

bool dg__step_races(const dg_step *s, const void *in, const void *out, size_t bytes) {
    const dg_node *n = s->node;
    size_t out_bytes = dg_node_bytes(n), scratch_bytes = dg_node_scratch_bytes(n);
    bool hazard = overlaps(s->out, out_bytes, in, bytes) || overlaps(s->out, out_bytes, out, bytes) ||
                  overlaps(s->scratch, scratch_bytes, in, bytes) || overlaps(s->scratch, scratch_bytes, out, bytes);
    for (int i = 0; i < n->n_in && !hazard; i++) {
        size_t b = dg_node_bytes(n->in[i]);
        hazard = overlaps(s->in[i], b, out, bytes) || overlaps(s->inout[i], b, in, bytes);
    }
    for (int i = 0; i < n->n_side && !hazard; i++) {
        size_t b = dg_node_bytes(n->side[i]);
        hazard = overlaps(s->side[i], b, in, bytes) || overlaps(s->side[i], b, out, bytes);
    }
    return hazard;
}

bool dg__bucket_raced(const dg_bucket *b, const dg_step *s) {
    for (int k = 0; k < b->n; k++)
        if (dg__step_races(s, b->item[k].in, b->item[k].out, b->item[k].count * sizeof(float))) return true;
    return false;
}
