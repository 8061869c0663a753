/* onnx_run.c: see onnx_run.h. The forward is the importer's model in
 * evaluation mode (batch norm with the file's running statistics, Dropout
 * the identity), planned once on the backend for the batch the input file
 * holds. Files are raw little-endian float32 (numpy's tofile and
 * fromfile): the input [batch, example...], the batch its size over one
 * example's bytes; the output [batch, ...] as the chosen graph output. */
#include "cli/onnx_run.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/backends.h"
#include "cli/options.h"
#include "core/onnx/onnx.h"
#include "core/plan.h"
#include "core/status.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench onnx-run FILE.onnx --input X.f32 --out Y.f32 [--backend cpu|gpu] [--output NAME]\n"
            "\n"
            "Runs the forward of an ONNX model (core/onnx/onnx.h: opset >= 13, one float32 input whose\n"
            "first axis is the batch) in evaluation mode (batch norm with the file's running statistics)\n"
            "on the examples of X.f32 and writes the output to Y.f32. Both files are raw little-endian\n"
            "float32, row-major (numpy: x.astype('<f4').tofile(path), np.fromfile(path, '<f4')): X.f32\n"
            "holds [batch, example shape...], its batch being its size over one example's; Y.f32 the\n"
            "output's values. stdout: the input's and the output's shapes.\n"
            "\n"
            "  --input X.f32    the examples\n"
            "  --out Y.f32      where the output goes (replaced whole, or left as it was on failure)\n"
            "  --backend B      cpu (default) or gpu\n"
            "  --output NAME    the graph output to write (default: the first)\n"
            "\n"
            "Exit: 0; 1 a file that cannot be read, loaded or run (the reason on stderr); 2 usage;\n"
            "%d the backend asked for is not on this machine (built without CUDA, no device).\n",
            BENCH_ONNX_RUN_NO_BACKEND);
}

/* the whole of path into *buf (freed by the caller); its size, or -1 with
 * the reason in dg_last_error() */
static long read_all(const char *path, void **buf) {
    *buf = NULL;
    /* a regular file only: a pipe without a writer would block the open
     * (O_NONBLOCK lets it return), /dev/zero reads as 0 bytes from ftell */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        dg_fail(DG_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return dg_fail(DG_ERR_IO, "%s: %s, not a file", path, S_ISDIR(sb.st_mode) ? "a directory" : "a device or pipe"),
               -1;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return dg_fail(DG_ERR_IO, "cannot open %s: %s", path, strerror(errno)), -1;
    }
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (*buf = malloc(n ? (size_t)n : 1)) != NULL &&
        fread(*buf, 1, (size_t)n, f) == (size_t)n) {
        fclose(f);
        return n;
    }
    fclose(f);
    free(*buf);
    *buf = NULL;
    return dg_fail(DG_ERR_IO, "cannot read %s", path), -1;
}

/* bytes into path, whole or not at all: written beside it under a
 * temporary name, then renamed over it, so that a full disk or a file
 * size limit leaves no half-written output (nor erases an earlier one).
 * A device or pipe (/dev/stdout) is written as it is: it cannot be
 * renamed over. */
static dg_status write_all(const char *path, const void *data, size_t bytes) {
    struct stat sb;
    bool exists = stat(path, &sb) == 0, special = exists && !S_ISREG(sb.st_mode);
    if (special && S_ISDIR(sb.st_mode)) return dg_fail(DG_ERR_IO, "cannot write %s: it is a directory", path);
    /* a symbolic link to a file: its target is replaced, the link stays */
    char real[PATH_MAX];
    const char *target = exists && !special && realpath(path, real) ? real : path;
    char tmp[PATH_MAX + 16];
    if (snprintf(tmp, sizeof tmp, "%s%s", target, special ? "" : ".XXXXXX") >= (int)sizeof tmp)
        return dg_fail(DG_ERR_IO, "cannot write %.200s...: the name is too long", path);
    int fd = special ? open(path, O_WRONLY) : mkstemp(tmp);
    if (fd < 0) return dg_fail(DG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    /* mkstemp makes it 0600: the output is as readable as any other file */
    mode_t mask = umask(0);
    umask(mask);
    bool ok = special || fchmod(fd, 0666 & ~mask) == 0;
    FILE *f = ok ? fdopen(fd, "wb") : NULL;
    ok = f && fwrite(data, 1, bytes, f) == bytes;
    int err = ok ? 0 : errno; /* a buffered write's error comes at fclose */
    if (f ? fclose(f) != 0 : close(fd) != 0) {
        if (ok) err = errno;
        ok = false;
    }
    if (ok && !special && rename(tmp, target) != 0) ok = false, err = errno;
    if (!ok) {
        if (!special) unlink(tmp);
        return dg_fail(DG_ERR_IO, "cannot write %s: %s", path, strerror(err));
    }
    return DG_OK;
}

/* the forward of o at the input file's batch on be, its output into out */
static dg_status run(const dg_onnx *o, dg_backend *be, const char *in_path, const char *out_path) {
    void *x_host = NULL;
    long bytes = read_all(in_path, &x_host);
    if (bytes < 0) return DG_ERR_IO;
    char s[96];
    int64_t example = dg_shape_numel(dg_onnx_example_shape(o)) * (int64_t)sizeof(float);
    if (bytes == 0 || bytes % example) {
        free(x_host);
        return dg_fail(DG_ERR_INVALID, "%s: %ld bytes, not a whole number of examples %s of float32 (%lld bytes)",
                       in_path, bytes, dg_shape_str(dg_onnx_example_shape(o), s, sizeof s), (long long)example);
    }
    int64_t batch = bytes / example;
    dg_graph *g = dg_graph_new();
    dg_model m;
    dg_shape xs;
    dg_plan *p = NULL;
    float *y_host = NULL;
    dg_node *x = NULL, *y = NULL;
    dg_status st = g ? dg_onnx_model_new(g, o, 0, &m) : dg_fail(DG_ERR_OOM, "onnx-run: out of memory");
    if (st == DG_OK && !dg_model_input_shape(&m, batch, &xs)) st = dg_fail(DG_ERR_INVALID, "input of too many axes");
    if (st == DG_OK) {
        x = dg_input(g, dg_onnx_input_name(o), xs);
        y = dg_model_forward(g, &m, x, NULL);
        st = dg_graph_status(g);
    }
    if (st == DG_OK) st = dg_plan_new(&p, g, be, &y, 1, NULL);
    if (st == DG_OK) st = dg_plan_set(p, x, x_host, (size_t)bytes);
    if (st == DG_OK) st = dg_plan_run(p);
    if (st == DG_OK && !(y_host = malloc(dg_node_bytes(y)))) st = dg_fail(DG_ERR_OOM, "onnx-run: out of memory");
    if (st == DG_OK) st = dg_plan_get(p, y, y_host, dg_node_bytes(y));
    if (st == DG_OK) st = write_all(out_path, y_host, dg_node_bytes(y));
    if (st == DG_OK) {
        char t[96];
        printf("input '%s' %s\noutput '%s' %s\n", dg_onnx_input_name(o), dg_shape_str(xs, s, sizeof s),
               dg_onnx_output_name(o), dg_shape_str(y->shape, t, sizeof t));
    }
    free(y_host);
    dg_plan_free(p);
    dg_graph_free(g);
    free(x_host);
    return st;
}

int bench_onnx_run_main(int argc, char **argv) {
    static const struct option opts[] = {
        {"input", required_argument, NULL, 'i'}, {"out", required_argument, NULL, 'o'},
        {"backend", required_argument, NULL, 'b'}, {"output", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    const char *in = NULL, *out = NULL, *backend = "cpu";
    dg_onnx_opts lo = {0};
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'i': in = optarg; break;
        case 'o': out = optarg; break;
        case 'n': lo.output = optarg; break;
        case 'b':
            if (strcmp(optarg, "cpu") && strcmp(optarg, "gpu"))
                return bench_usage_error("bench onnx-run", "bad --backend '%.80s' (cpu or gpu)", optarg);
            backend = optarg;
            break;
        case 'h': usage(stdout); return 0;
        default: return bench_option_error("bench onnx-run", opts, c, argv);
        }
    }
    if (optind != argc - 1) return bench_usage_error("bench onnx-run", "takes one FILE.onnx");
    if (!in || !out) return bench_usage_error("bench onnx-run", "needs --input X.f32 and --out Y.f32");
    dg_onnx *o;
    if (dg_onnx_load(argv[optind], &lo, &o) != DG_OK) {
        fprintf(stderr, "bench onnx-run: %s\n", dg_last_error());
        return 1;
    }
    dg_backend *be;
    dg_status st = bench_backend_open(backend, 0, &be);
    if (st != DG_OK) {
        fprintf(stderr, "bench onnx-run: %s backend: %s\n", backend, dg_last_error());
        dg_onnx_free(o);
        return st == DG_ERR_NO_DEVICE ? BENCH_ONNX_RUN_NO_BACKEND : 1;
    }
    st = run(o, be, in, out);
    if (st != DG_OK) fprintf(stderr, "bench onnx-run: %s\n", dg_last_error());
    dg_backend_free(be);
    dg_onnx_free(o); /* after the plan and graph: they read its weights */
    return st != DG_OK;
}
