/* sweep_scaling.h: what the scaling sweep (sweep_scaling.c) and its report
 * (sweep_scaling_report.c) share. */
#ifndef DG_BENCH_SWEEP_SCALING_H
#define DG_BENCH_SWEEP_SCALING_H

/* the GPU counts swept, those the machine has */
#define SCALING_N_COUNTS 4
extern const int scaling_counts[SCALING_N_COUNTS]; /* 1, 2, 4, 8 */

#endif
