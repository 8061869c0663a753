/* cpu_onednn_engine.h: the CPU engine and stream every oneDNN cache of the
 * backend makes (the GEMM's, cpu_onednn.c; the convolutions',
 * cpu_onednn_conv.c). Internal: it needs oneDNN's headers. */
#ifndef DG_CPU_ONEDNN_ENGINE_H
#define DG_CPU_ONEDNN_ENGINE_H

#include <oneapi/dnnl/dnnl.h>

#include "../core/status.h"

/* *engine and *stream, or DG_ERR_BACKEND naming oneDNN's reason (nothing
 * left to destroy then) */
dg_status dg__onednn_engine_new(dnnl_engine_t *engine, dnnl_stream_t *stream);

#endif
