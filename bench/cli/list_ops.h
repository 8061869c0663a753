#ifndef DG_BENCH_LIST_OPS_H
#define DG_BENCH_LIST_OPS_H
#include <stdio.h>
/* Prints every forward op with its forward and backward support on the cpu
 * and gpu backends; returns 0, or 1 if a backend lacks something. */
int bench_list_ops(FILE *out);
#endif
