/* cpu_all_reduce.c: see cpu_all_reduce.h. */
#include "cpu_all_reduce.h"

#include <stdlib.h>
#include <string.h>

#include "../core/comm_bucket.h"
#include "../core/graph.h"
#include "../core/status_internal.h"

/* a bucket in flight: its tensors packed into buf (count floats), the
 * sum's request; a retired one keeps its buffer for the next */
typedef struct flight {
    float         *buf;
    size_t         buf_floats;     /* buf's room                   */
    size_t         count;
    void          *req;
    dg_bucket_item item[DG_BUCKET_MAX_MEMBERS];
    int            n;
} flight;

struct cpu_comm {
    dg_cpu_sum_fn    sum;          /* blocking, or NULL            */
    void            *sum_arg;
    dg_cpu_async_sum async;        /* overlapped: start non-NULL   */
    int              processes;
    dg_bucket        queue;
    flight          *fl;           /* [0, n_fl) in flight, [n_fl, cap) retired */
    int              n_fl, cap;
};

dg_status dg__cpu_comm_new(cpu_comm **out, dg_cpu_sum_fn sum, void *sum_arg, const dg_cpu_async_sum *async,
                           int processes, long long bucket_bytes) {
    cpu_comm *m = calloc(1, sizeof *m);
    if (!m) return dg__fail(DG_ERR_OOM, "cpu: out of memory for the all-reduce");
    m->sum = sum;
    m->sum_arg = sum_arg;
    if (async) m->async = *async;
    m->processes = processes;
    m->queue.cap = bucket_bytes < 0    ? 0
                   : bucket_bytes == 0 ? (size_t)DG_CPU_BUCKET_BYTES_DEFAULT
                                       : (size_t)bucket_bytes;
    *out = m;
    return DG_OK;
}

/* in flight k done: its mean unpacked into its outputs, k retired */
static dg_status unpack(cpu_comm *m, int k) {
    flight *f = &m->fl[k];
    float inv = 1.0f / (float)m->processes;
    size_t at = 0;
    for (int j = 0; j < f->n; j++) {
        const dg_bucket_item *it = &f->item[j];
        for (size_t i = 0; i < it->count; i++) it->out[i] = f->buf[at + i] * inv;
        at += it->count;
    }
    flight t = *f; /* its buffer kept at the end of the retired ones */
    *f = m->fl[--m->n_fl];
    m->fl[m->n_fl] = t;
    return DG_OK;
}

static dg_status finish(cpu_comm *m, int k) {
    dg_status st = m->async.wait(m->fl[k].req, m->async.arg);
    return st == DG_OK ? unpack(m, k) : st;
}

/* the queue packed into a bucket of its own, its sum started */
static dg_status flush(cpu_comm *m) {
    if (!m->queue.n) return DG_OK;
    if (m->n_fl == m->cap) {
        int cap = m->cap ? 2 * m->cap : 8;
        flight *fl = realloc(m->fl, (size_t)cap * sizeof *fl);
        if (!fl) return dg__fail(DG_ERR_OOM, "cpu: out of memory for the all-reduces in flight");
        memset(fl + m->cap, 0, (size_t)(cap - m->cap) * sizeof *fl);
        m->fl = fl;
        m->cap = cap;
    }
    flight *f = &m->fl[m->n_fl];
    size_t count = m->queue.bytes / sizeof(float);
    if (f->buf_floats < count) {
        float *buf = realloc(f->buf, count * sizeof *buf);
        if (!buf) return dg__fail(DG_ERR_OOM, "cpu: out of memory for a bucket of %zu bytes", m->queue.bytes);
        f->buf = buf;
        f->buf_floats = count;
    }
    size_t at = 0;
    for (int j = 0; j < m->queue.n; j++) {
        const dg_bucket_item *it = &m->queue.item[j];
        memcpy(f->buf + at, it->in, it->count * sizeof(float));
        f->item[j] = *it;
        at += it->count;
    }
    f->n = m->queue.n;
    f->count = count;
    dg__bucket_clear(&m->queue);
    dg_status st = m->async.start(f->buf, count, m->async.arg, &f->req);
    if (st == DG_OK) m->n_fl++;
    return st;
}

static bool touches(const flight *f, const dg_step *s) {
    for (int j = 0; j < f->n; j++)
        if (dg__step_races(s, f->item[j].in, f->item[j].out, f->item[j].count * sizeof(float))) return true;
    return false;
}

dg_status dg__cpu_comm_before(cpu_comm *m, const dg_step *s) {
    if (!m || !m->async.start) return DG_OK;
    dg_status st = dg__bucket_raced(&m->queue, s) ? flush(m) : DG_OK;
    for (int k = m->n_fl - 1; k >= 0 && st == DG_OK; k--) {
        bool done = false;
        if (touches(&m->fl[k], s)) st = finish(m, k);
        else if ((st = m->async.test(m->fl[k].req, m->async.arg, &done)) == DG_OK && done) st = unpack(m, k);
    }
    return st;
}

dg_status dg__cpu_comm_join(cpu_comm *m) {
    if (!m || !m->async.start) return DG_OK;
    dg_status st = flush(m);
    while (st == DG_OK && m->n_fl) st = finish(m, m->n_fl - 1);
    return st;
}

/* blocking: copied, summed in place, divided */
static dg_status blocking(const cpu_comm *m, const dg_step *s) {
    size_t count = dg_node_bytes(s->node) / sizeof(float);
    float *y = s->out;
    memcpy(y, s->in[0], count * sizeof *y);
    if (!m) return DG_OK;
    dg_status st = m->sum(y, count, m->sum_arg);
    if (st != DG_OK) return st;
    float inv = 1.0f / (float)m->processes;
    for (size_t i = 0; i < count; i++) y[i] *= inv;
    return DG_OK;
}

dg_status dg__cpu_all_reduce(cpu_comm *m, const dg_step *s, bool in_run) {
    if (!m || !m->async.start) return blocking(m, s);
    size_t count = dg_node_bytes(s->node) / sizeof(float);
    dg_status st = dg__bucket_full_for(&m->queue, count * sizeof(float)) ? flush(m) : DG_OK;
    if (st != DG_OK) return st;
    if (dg__bucket_add(&m->queue, s->in[0], s->out, count)) st = flush(m); /* full, or one of the bucket's size */
    /* a step outside a plan's run: nothing joins later */
    return st == DG_OK && !in_run ? dg__cpu_comm_join(m) : st;
}

void dg__cpu_comm_free(cpu_comm *m) {
    if (!m) return;
    for (int k = 0; k < m->n_fl; k++) m->async.wait(m->fl[k].req, m->async.arg); /* MPI must not write freed memory */
    for (int k = 0; k < m->cap; k++) free(m->fl[k].buf);
    free(m->fl);
    free(m);
}
