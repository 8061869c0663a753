/* dtype.c: the element types' names and sizes (graph.h). */
#include "graph.h"

const char *dg_dtype_name(dg_dtype t) {
    switch (t) {
    case DG_F32:  return "f32";
    case DG_I32:  return "i32";
    case DG_BF16: return "bf16";
    case DG_F16:  return "f16";
    }
    return "?";
}

size_t dg_dtype_size(dg_dtype t) {
    switch (t) {
    case DG_F32: case DG_I32:  return 4;
    case DG_BF16: case DG_F16: return 2;
    }
    return 0;
}
