/* eta.c: see eta.h. */
#include "runner/eta.h"

double bench_eta_row_s(const bench_timing *t, double run_s) {
    if (!(run_s > 0)) return 0;
    if (t->run_cap_s > 0 && run_s > t->run_cap_s) return 2 * run_s; /* one warm-up, one timed run */
    double timed = t->min_reps * run_s;
    if (timed < t->min_time_s) timed = t->max_reps * run_s < t->min_time_s ? t->max_reps * run_s : t->min_time_s;
    return t->warmup * run_s + timed;
}

void bench_eta_record(bench_eta *e, double estimated_s, double wall_s) {
    if (estimated_s > 0) {
        e->est_s += estimated_s;
        e->ran_s += wall_s;
    } else {
        e->other_s += wall_s;
        e->other_n++;
    }
}

double bench_eta_left(const bench_eta *e, double predicted_s, int n_unpredicted) {
    bool know_other = e->other_n > 0 || n_unpredicted == 0;
    if (!know_other) return -1;
    double scale = e->est_s > 0 ? e->ran_s / e->est_s : 1; /* how far the estimates missed so far */
    double other = e->other_n > 0 ? e->other_s / e->other_n * n_unpredicted : 0;
    return scale * predicted_s + other;
}
