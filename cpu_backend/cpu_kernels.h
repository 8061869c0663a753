/* cpu_kernels.h: the CPU kernels behind the dispatch switch in
 * cpu_backend.c. Each takes the step (node + resolved buffers). */
#ifndef DG_CPU_KERNELS_H
#define DG_CPU_KERNELS_H

#include "../core/backend.h"

void dg__cpu_unary(const dg_step *s);          /* neg ... gelu, scalar ops     */
void dg__cpu_binary(const dg_step *s);         /* add sub mul div, broadcasting */
void dg__cpu_unary_backward(const dg_step *s); /* (dy, x|y) -> dx               */
void dg__cpu_broadcast_to(const dg_step *s);
void dg__cpu_permute(const dg_step *s);
void dg__cpu_reduce(const dg_step *s);         /* sum, mean                     */
void dg__cpu_softmax(const dg_step *s);        /* softmax, log_softmax          */
void dg__cpu_softmax_backward(const dg_step *s);
void dg__cpu_softmax_ce(const dg_step *s);
void dg__cpu_softmax_ce_backward(const dg_step *s);
void dg__cpu_update(const dg_step *s);         /* sgd, momentum, adam           */

#endif
