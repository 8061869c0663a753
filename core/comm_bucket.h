/* comm_bucket.h: how a backend that overlaps its all_reduce nodes with
 * the backward cuts them into buckets and keeps its steps off the memory
 * an all-reduce still reads or writes. Shared by the GPU's NCCL path
 * (gpu_backend/gpu_collective.cu) and the CPU's across processes
 * (cpu_backend/cpu_all_reduce.c).
 *
 * An all-reduce is queued, not issued; the queue goes as one bucket when
 * the next tensor would take it past the backend's bucket bytes, when it
 * holds DG_BUCKET_MAX_MEMBERS, when it reaches the bucket bytes (a tensor
 * of the bucket size or more goes alone), when a step touches a queued
 * tensor's memory, or at a join (the end of a run, a download). Every
 * replica runs the same steps on the same arena layout, so every one cuts
 * the same buckets and the collectives pair up in the same order. */
#ifndef DG_CORE_COMM_BUCKET_H
#define DG_CORE_COMM_BUCKET_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* the most tensors in one bucket (the GPU's pack kernel takes their
 * pointers as its argument: 24 bytes each, within the 4 KiB a launch
 * passes) */
#define DG_BUCKET_MAX_MEMBERS 64

/* an all-reduce queued: in[0, count) averaged into out */
typedef struct dg_bucket_item { const float *in; float *out; size_t count; } dg_bucket_item;

typedef struct dg_bucket {
    dg_bucket_item item[DG_BUCKET_MAX_MEMBERS];
    int            n;
    size_t         bytes;          /* of the queued tensors              */
    size_t         cap;            /* a bucket's most bytes; 0: every all-reduce alone */
} dg_bucket;

/* whether the queue must go before a tensor of `bytes` joins it */
bool dg__bucket_full_for(const dg_bucket *b, size_t bytes);
/* in -> out (count floats) queued (dg__bucket_full_for was false); whether
 * the queue must go now: it reached b->cap */
bool dg__bucket_add(dg_bucket *b, const float *in, float *out, size_t count);
/* the queue emptied (it went) */
void dg__bucket_clear(dg_bucket *b);

/* Whether step s, run now, would race an all-reduce of in -> out (bytes
 * each): it writes either (its output, scratch, side outputs or an input
 * written in place), or reads the output. The plan may hand a dead
 * gradient's bytes to a later node while the exchange still reads them. */
bool dg__step_races(const dg_step *s, const void *in, const void *out, size_t bytes);
/* whether s races any queued all-reduce of b */
bool dg__bucket_raced(const dg_bucket *b, const dg_step *s);

#ifdef __cplusplus
}
#endif

#endif
