/* onnx_tensor.c: a TensorProto's values as a host tensor (and a
 * serialized one from a file: dg_onnx_tensor_load). The values are
 * either in raw_data (little-endian bytes, this machine's order on x86-64
 * and arm64) or in the typed repeated field; either must hold exactly the
 * product of the dims. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../status_internal.h"
#include "onnx_internal.h"

const char *dg__onnx_dtype_name(int t) {
    static const char *const names[] = {"undefined", "float32", "uint8", "int8", "uint16", "int16", "int32",
                                        "int64", "string", "bool", "float16", "float64", "uint32", "uint64",
                                        "complex64", "complex128", "bfloat16"};
    return t >= 0 && t < (int)(sizeof names / sizeof *names) ? names[t] : "unknown";
}

void dg__onnx_tensor_clear(ox_tensor *t) {
    free(t->f);
    free(t->i);
    t->f = NULL;
    t->i = NULL;
}

dg_status dg__onnx_tensor(const Onnx__TensorProto *p, const char *what, ox_tensor *t) {
    *t = (ox_tensor){.name = p->name ? p->name : "", .dtype = OX_OTHER, .onnx_dtype = p->data_type};
    if (p->n_dims > OX_MAX_RANK)
        return dg__fail(DG_ERR_INVALID, "%s: %zu dims (at most %d)", what, p->n_dims, OX_MAX_RANK);
    t->ndim = (int)p->n_dims;
    t->numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        t->dims[d] = p->dims[d];
        /* each dim bounded too: a zero-sized tensor's others would become
         * shape entries past any size (Shape, Gather, Squeeze fold them) */
        if (p->dims[d] < 0 || p->dims[d] > DG_MAX_NUMEL || (p->dims[d] > 0 && t->numel > DG_MAX_NUMEL / p->dims[d]))
            return dg__fail(DG_ERR_INVALID, "%s: dimension %d is %lld (0 to 2^40 elements in all)", what, d,
                            (long long)p->dims[d]);
        t->numel *= p->dims[d];
    }
    if (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return dg__fail(DG_ERR_INVALID, "%s: its data is in an external file (not supported: save the model "
                        "with its weights inside)", what);
    size_t esize;
    size_t typed;
    if (p->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
        t->dtype = OX_F32;
        esize = sizeof(float);
        typed = p->n_float_data;
    } else if (p->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
        t->dtype = OX_I64;
        esize = sizeof(int64_t);
        typed = p->n_int64_data;
    } else {
        return DG_OK; /* refused where it is read, naming the operator */
    }
    size_t n = (size_t)t->numel, have = p->has_raw_data ? p->raw_data.len / esize : typed;
    if ((p->has_raw_data && p->raw_data.len % esize) || have != n)
        return dg__fail(DG_ERR_INVALID, "%s: %s tensor of %lld elements holds %zu bytes of data (%zu expected)", what,
                        dg__onnx_dtype_name(p->data_type), (long long)t->numel,
                        p->has_raw_data ? p->raw_data.len : typed * esize, n * esize);
    void *dst = malloc(n ? n * esize : 1);
    if (!dst) return dg__fail(DG_ERR_OOM, "%s: out of memory for %zu bytes", what, n * esize);
    const void *src = p->has_raw_data ? (const void *)p->raw_data.data
                      : t->dtype == OX_F32 ? (const void *)p->float_data : (const void *)p->int64_data;
    if (n) memcpy(dst, src, n * esize);
    if (t->dtype == OX_F32) t->f = dst;
    else t->i = dst;
    return DG_OK;
}

dg_status dg__onnx_open(const char *path, const char *what, FILE **out) {
    *out = NULL;
    /* non-blocking: a pipe opens at once (and is refused below); a
     * regular file reads as usual */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return dg__fail(DG_ERR_IO, "%s '%s': cannot open: %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return dg__fail(DG_ERR_IO, "%s '%s': cannot stat: %s", what, path, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode)) {
        const char *kind = S_ISDIR(sb.st_mode) ? "a directory" : S_ISFIFO(sb.st_mode) ? "a pipe"
                           : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device" : "a special file";
        close(fd);
        return dg__fail(DG_ERR_IO, "%s '%s': %s, not a file", what, path, kind);
    }
    if (!(*out = fdopen(fd, "rb"))) {
        close(fd);
        return dg__fail(DG_ERR_IO, "%s '%s': cannot open: %s", what, path, strerror(errno));
    }
    return DG_OK;
}

dg_status dg_onnx_tensor_load(const char *path, dg_onnx_tensor *out) {
    if (!path || !out) return dg__fail(DG_ERR_INVALID, "dg_onnx_tensor_load: NULL %s", !path ? "path" : "out");
    *out = (dg_onnx_tensor){0};
    FILE *f;
    dg_status st0 = dg__onnx_open(path, "onnx tensor", &f);
    if (st0 != DG_OK) return st0;
    /* a test's tensor: small, read whole */
    uint8_t *buf = NULL;
    size_t n = 0;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)size + 1)))
        n = fread(buf, 1, (size_t)size, f);
    fclose(f);
    if (!buf || size < 0 || n != (size_t)size) {
        free(buf);
        return dg__fail(DG_ERR_IO, "onnx tensor '%s': cannot read it", path);
    }
    Onnx__TensorProto *p = onnx__tensor_proto__unpack(NULL, n, buf);
    free(buf);
    if (!p) return dg__fail(DG_ERR_IO, "onnx tensor '%s' (%zu bytes): not a TensorProto", path, n);
    char what[600];
    snprintf(what, sizeof what, "onnx tensor '%s'", path);
    ox_tensor t;
    dg_status st = dg__onnx_tensor(p, what, &t);
    if (st == DG_OK && t.dtype == OX_OTHER)
        st = dg__fail(DG_ERR_INVALID, "%s: %s values (float32 or int64 read)", what, dg__onnx_dtype_name(t.onnx_dtype));
    if (st == DG_OK) {
        snprintf(out->name, sizeof out->name, "%s", t.name);
        out->ndim = t.ndim;
        memcpy(out->dims, t.dims, sizeof out->dims);
        out->numel = t.numel;
        out->f = t.f;
        out->i = t.i;
    } else {
        dg__onnx_tensor_clear(&t);
    }
    onnx__tensor_proto__free_unpacked(p, NULL);
    return st;
}

void dg_onnx_tensor_free(dg_onnx_tensor *t) {
    if (!t) return;
    free(t->f);
    free(t->i);
    t->f = NULL;
    t->i = NULL;
}
