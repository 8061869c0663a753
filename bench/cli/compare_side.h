/* compare_side.h: one result folder's rows of one result file, as
 * `bench compare` pairs them: NAME.json's (with every repetition), then
 * the rows of NAME.csv that NAME.json lacks (medians only). */
#ifndef DG_BENCH_COMPARE_SIDE_H
#define DG_BENCH_COMPARE_SIDE_H

#include <stdbool.h>
#include <stddef.h>

#include "writers/json.h"

/* The peers append their rows to the sweep's CSV after the sweep wrote its
 * JSON (the peers of bench/peers/), so NAME.csv may hold rows NAME.json has not;
 * a folder may also have NAME.csv alone (a committed one). */
typedef struct bench_side {
    bench_json_rec *recs;     /* NAME.json's rows first, then NAME.csv's others */
    int             n;
    bool            json;     /* NAME.json was read                              */
    int             csv_only; /* rows from NAME.csv alone: medians, no samples   */
} bench_side;

/* dir/NAME.json and dir/NAME.csv into *s: 1 loaded, 0 neither present, -1
 * unreadable (message on stderr). Free s->recs with bench_json_recs_free. */
int bench_compare_load(const char *dir, const char *name, bench_side *s);

/* dir/NAME.csv, else dir/NAME.json, into path (n bytes): the file whose
 * metadata names the machine; false when neither is there */
bool bench_result_file(const char *dir, const char *name, char *path, size_t n);

/* the same measurement: every column that defines what was timed */
bool bench_same_case(const bench_json_rec *x, const bench_json_rec *y);

#endif
