/* fuzz_profile.c: bench_profile_read (bench plot DIR redraws the charts of
 * each profile-MODEL.json in DIR, a folder that may come from anywhere) on
 * any bytes. A failure must leave nothing to free and a message naming the
 * file; a success a model name safe as a file name, one or two profiles
 * with a batch of at least 1, a positive step time and terminated node
 * names. */
#include <math.h>

#include "charts/gnuplot.h"
#include "core/status.h"
#include "profile/profile.h"
#include "runner/timing.h"
#include "fuzz_util.h"

/* json.c's reader of benchmark records sums samples with this; the profile
 * reader never reaches it */
bench_stats bench_stats_of(double *v, int n) {
    (void)v;
    (void)n;
    abort();
}

static char path[600];

#define TERMINATED(a) (memchr((a), '\0', sizeof(a)) != NULL)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!*path) snprintf(path, sizeof path, "%s/profile-x.json", fuzz_tmp_dir());
    fuzz_write(path, data, size);
    bench_profile p[2];
    char model[64], context[512];
    int n = -1;
    if (bench_profile_read(path, model, context, sizeof context, p, &n) != DG_OK) {
        if (n != 0 || p[0].nodes || p[1].nodes) abort();
        fuzz_check_message(dg_last_error(), path);
        return 0;
    }
    if (n < 1 || n > 2 || !bench_file_name_ok(model) || !TERMINATED(context)) abort();
    for (int i = 0; i < n; i++) {
        if (p[i].batch < 1 || !(p[i].sum_ms > 0) || p[i].n_nodes < 0 || !p[i].nodes || !TERMINATED(p[i].backend))
            abort();
        for (int j = 0; j < p[i].n_nodes; j++)
            if (!TERMINATED(p[i].nodes[j].name) || !TERMINATED(p[i].nodes[j].op) ||
                (unsigned)p[i].nodes[j].phase >= BENCH_N_PHASES)
                abort();
    }
    bench_profile_read_free(p, n);
    return 0;
}
