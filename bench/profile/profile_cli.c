/* profile_cli.c: `bench profile`: options, the ceilings (measured by the
 * ceiling sweep in the same run, or read from an earlier run's folder),
 * then one profile per backend, printed, written and drawn. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/backends.h"
#include "cpu_backend/cpu_backend.h"
#include "machine/env.h"
#include "cli/options.h"
#include "machine/gpu_monitor.h"
#include "core/onnx/onnx.h"
#include "profile/profile.h"
#include "runner/energy_window.h"
#include "runner/sweep.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench profile [options]\n\n"
            "Profiles one training step (forward, loss, backward, optimizer) node by node: a backend event\n"
            "(CUDA event, or the monotonic clock on the CPU) between every two nodes. Prints the top nodes\n"
            "by time, the time per op type and per phase, the memory and the step with the profiler on and\n"
            "off; writes DIR/profile-MODEL-BACKEND-nodes.csv and -ops.csv, profile-MODEL.json,\n"
            "profile-MODEL-trace.json (Chrome trace: Perfetto, chrome://tracing), profile-MODEL-compare.csv\n"
            "(with both backends) and the charts (ops, roofline, live memory); MODEL is the model's name,\n"
            "with -DTYPE unless fp32 (profile-mlp-bf16.json). The step is built under --dtype's precision\n"
            "policy and checked against float64 first, at that precision's tolerances, as the sweeps' rows\n"
            "are; the data are seeded synthetic examples.\n\n"
            "  --model M        ");
    for (int i = 0; i < bench_n_prof_models; i++) fprintf(f, "%s%s", i ? " | " : "", bench_prof_models[i].name);
    fprintf(f, " | FILE.onnx (default mlp)\n");
    for (int i = 0; i < bench_n_prof_models; i++)
        fprintf(f, "                   %s: %s; batch %d\n", bench_prof_models[i].name, bench_prof_models[i].what,
                bench_prof_models[i].default_batch);
    fprintf(f, "                   FILE.onnx: an ONNX model (core/onnx/onnx.h: opset >= 13, its input's first axis\n"
               "                   the batch), trained by SGD momentum on synthetic data; batch 32\n");
    fprintf(f, "  --backend B      cpu | gpu | both (default both; without a GPU, both is the CPU alone)\n"
               "  --batch N        examples per step (default: the model's, above)\n"
               "  --steps N        profiled steps; each node's time is their median (default 10)\n"
               "  --warmup N       un-profiled steps first (default 3)\n"
               "  --top N          nodes in the printed table (default 15)\n"
               "  --dtype D        the step's precision policy (default fp32): fp32; tf32 (the GPU's matmuls on\n"
               "                   TF32 tensor cores; the CPU has none: refused there, use --backend gpu);\n"
               "                   bf16 or fp16 mixed precision (fp32 masters and optimizer, 16-bit matmul\n"
               "                   and convolution operands, fp32 statistics and loss; fp16 with dynamic loss\n"
               "                   scaling). Each node's row names its dtype (column dtype: f32, bf16, a cast\n"
               "                   f32->bf16, a 16-bit GEMM bf16->f32); the per-op and per-phase tables\n"
               "                   split by it; %% of ceiling is against the precision's GEMM ceiling\n"
               "  --tf32           the same as --dtype tf32 (kept for older command lines)\n"
               "  --conv C         the convolutions' implementation: default (the backend's choice per node:\n"
               "                   the CPU's oneDNN or own by precision, layer and oneDNN's ISA, the GPU's\n"
               "                   own or cuDNN by precision), own (the project's kernels alone: the CPU's\n"
               "                   own strategies, the GPU's implicit GEMM) or vendor (cuDNN on the GPU,\n"
               "                   oneDNN on the CPU); each node's row names what ran (column impl), so\n"
               "                   runs put the default, the own and the vendor's side by side\n"
               "  --gemm G         the matmuls': default (OpenBLAS, cuBLAS), own or vendor\n"
               "  --threads N      CPU threads (default: OpenMP's)\n"
               "  --ceilings DIR   read the ceilings from DIR/ceiling.csv (an earlier run on this machine)\n"
               "                   instead of measuring them (the ceiling sweep, into the output folder)\n"
               "  --run-once       one step, no warm-up, no check, no ceilings: for nsys / ncu, whose\n"
               "                   NVTX ranges carry the node names\n"
               "  --out DIR        output folder (default reports/latest)\n"
               "  -h, --help       this text\n");
}

static int bad(const char *what, const char *arg) { return bench_usage_error("bench profile", "bad %s '%.80s'", what, arg); }

typedef struct prof_cli {
    bench_prof_opts o;
    const char *backend, *out, *ceilings;
    const char *onnx_path; /* --model FILE.onnx */
    int threads, top;
    bool batch_given;
} prof_cli;

static int parse(int argc, char **argv, prof_cli *c) {
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'M'}, {"backend", required_argument, NULL, 'b'},
        {"batch", required_argument, NULL, 'B'}, {"steps", required_argument, NULL, 's'},
        {"warmup", required_argument, NULL, 'w'}, {"top", required_argument, NULL, 'n'},
        {"tf32", no_argument, NULL, 'T'}, {"dtype", required_argument, NULL, 'D'}, {"threads", required_argument, NULL, 't'},
        {"conv", required_argument, NULL, 'c'}, {"gemm", required_argument, NULL, 'g'},
        {"ceilings", required_argument, NULL, 'C'}, {"run-once", no_argument, NULL, '1'},
        {"out", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    *c = (prof_cli){.o = {.model = bench_prof_model_find("mlp"), .steps = 10, .warmup = 3, .peak_gflops = NAN,
                          .peak_gbps = NAN},
                    .backend = "both", .out = "reports/latest", .top = 15};
    long long v;
    int opt;
    optind = 0; /* glibc: start over */
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case 'M':
            c->onnx_path = bench_prof_onnx_model(optarg) ? optarg : NULL;
            c->o.model = c->onnx_path ? bench_prof_onnx_model(optarg) : bench_prof_model_find(optarg);
            if (!c->o.model) return bad("--model (see --help)", optarg);
            break;
        case 'b':
            if (strcmp(optarg, "cpu") && strcmp(optarg, "gpu") && strcmp(optarg, "both")) return bad("--backend (cpu, gpu, both)", optarg);
            c->backend = optarg;
            break;
        case 'B': if (!bench_parse_long(optarg, 1, 65536, &v)) return bad("--batch (1 to 65536)", optarg); c->o.batch = (int)v; break;
        case 's': if (!bench_parse_long(optarg, 1, 10000, &v)) return bad("--steps (1 to 10000)", optarg); c->o.steps = (int)v; break;
        case 'w': if (!bench_parse_long(optarg, 0, 10000, &v)) return bad("--warmup (0 to 10000)", optarg); c->o.warmup = (int)v; break;
        case 'n': if (!bench_parse_long(optarg, 1, 100000, &v)) return bad("--top (1 to 100000)", optarg); c->top = (int)v; break;
        case 'T': c->o.precision = DG_PREC_TF32; break;
        case 'D':
            if (dg_precision_parse(optarg, &c->o.precision) != DG_OK) return bad("--dtype (fp32, tf32, bf16, fp16)", optarg);
            break;
        case 'c':
            if (!strcmp(optarg, "vendor")) c->o.conv = DG_CONV_VENDOR;
            else if (!strcmp(optarg, "own")) c->o.conv = DG_CONV_OWN;
            else if (strcmp(optarg, "default")) return bad("--conv (default, own, vendor)", optarg);
            break;
        case 'g':
            if (!strcmp(optarg, "own")) c->o.gemm = DG_GEMM_OWN;
            else if (!strcmp(optarg, "vendor")) c->o.gemm = DG_GEMM_VENDOR;
            else if (strcmp(optarg, "default")) return bad("--gemm (default, own, vendor)", optarg);
            break;
        case 't': if (!bench_parse_long(optarg, 1, 1024, &v)) return bad("--threads (1 to 1024)", optarg); c->threads = (int)v; break;
        case 'C': if (!*optarg || strlen(optarg) > BENCH_MAX_PATH) return bad("--ceilings", optarg); c->ceilings = optarg; break;
        case '1': c->o.run_once = true; break;
        case 'o': if (!*optarg || strlen(optarg) > BENCH_MAX_PATH) return bad("--out", optarg); c->out = optarg; break;
        case 'h': usage(stdout); return 0;
        default: return bench_option_error("bench profile", opts, opt, argv);
        }
    }
    if (optind < argc) return bad("argument", argv[optind]);
    if (c->o.precision == DG_PREC_TF32 && strcmp(c->backend, "gpu"))
        return bench_usage_error("bench profile", "--dtype tf32 on the CPU (--backend %s): the CPU has no TF32 mode; "
                                 "profile the CPU in fp32, bf16 or fp16, and tf32 with --backend gpu", c->backend);
    if (!c->o.batch) c->o.batch = c->o.model->default_batch;
    return BENCH_OPTS_RUN;
}

/* the ceiling sweep into the output folder, with these backends */
static int measure_ceilings(const prof_cli *c, dg_backend *cpu, dg_backend *gpu, const char *meta) {
    bench_ctx ctx = bench_default_ctx();
    ctx.out_dir = c->out;
    ctx.cpu = cpu;
    ctx.gpu = gpu;
    ctx.threads = cpu ? dg_cpu_threads(cpu) : 0;
    /* fp32, and the GEMM ceiling of the step's precision its matmuls run against */
    ctx.precisions[ctx.n_precisions++] = DG_PREC_FP32;
    if (c->o.precision != DG_PREC_FP32) ctx.precisions[ctx.n_precisions++] = c->o.precision;
    snprintf(ctx.meta, sizeof ctx.meta, "%s", meta);
    for (int i = 0; i < bench_n_sweeps; i++)
        if (!strcmp(bench_sweeps[i].name, "ceiling")) {
            fprintf(stderr, "bench profile: measuring the ceilings (the ceiling sweep) into %s/ceiling.csv\n", c->out);
            return bench_run_sweep(&ctx, &bench_sweeps[i]);
        }
    return 1;
}

/* the backend's ceilings from DIR/ceiling.csv: the GEMM rate in the step's
 * precision (its matmuls' ceiling) and the copy rate */
static void read_ceilings(const char *dir, bool gpu, bench_prof_opts *o) {
    bench_table t = bench_table_load(dir, "ceiling");
    bench_ceilings ceil = BENCH_NO_CEILINGS;
    if (t.n > 0) bench_ceilings_read(&t, &ceil);
    free(t.r);
    o->peak_gflops = gpu ? ceil.gpu_gemm[o->precision] : ceil.cpu_gemm[o->precision];
    o->peak_gbps = gpu ? ceil.gpu_gbps : ceil.cpu_gbps;
    if (!(o->peak_gflops > 0) || !(o->peak_gbps > 0))
        fprintf(stderr, "bench profile: no %s ceilings in %s in %s/ceiling.csv: no bound or %% of ceiling\n",
                gpu ? "GPU" : "CPU", dg_precision_name(o->precision), dir);
}

/* one backend's profile: 0, or 1 (message printed) */
static int profile_one(const prof_cli *c, dg_backend *be, bool gpu, const char *ceil_dir, const bench_ctx *energy,
                       bench_profile *p) {
    bench_prof_opts o = c->o;
    o.energy = gpu ? energy->energy_gpu : energy->energy_cpu;
    o.energy_none = gpu ? energy->energy_gpu_short : energy->energy_cpu_short;
    if (ceil_dir) read_ceilings(ceil_dir, gpu, &o);
    fprintf(stderr, "bench profile: %s on %s in %s, batch %d: check, then %d profiled steps\n", o.model->name,
            dg_backend_name(be), dg_precision_name(o.precision), o.batch, o.run_once ? 1 : o.steps);
    dg_status st = bench_profile_run(be, &o, p);
    if (st != DG_OK) {
        fprintf(stderr, "bench profile: %s on %s: %s\n", o.model->name, dg_backend_name(be), dg_last_error());
        return 1;
    }
    if (!p->check_ok) {
        fprintf(stderr, "bench profile: %s on %s in %s: the step failed its check against float64 (%s, max rel err "
                "%.3g): nothing timed\n", o.model->name, dg_backend_name(be), dg_precision_name(o.precision), p->check,
                p->rel_err);
        return 1;
    }
    if (p->allocs_during_runs)
        fprintf(stderr, "bench profile: %s on %s: %lld allocations during the runs (the plan should make none)\n",
                o.model->name, dg_backend_name(be), p->allocs_during_runs);
    return 0;
}

static int open_backends(const prof_cli *c, dg_backend **cpu, dg_backend **gpu) {
    bool want_cpu = strcmp(c->backend, "gpu") != 0, want_gpu = strcmp(c->backend, "cpu") != 0;
    if (want_cpu && bench_backend_open("cpu", c->threads, cpu) != DG_OK) {
        fprintf(stderr, "bench profile: cpu backend: %s\n", dg_last_error());
        return 1;
    }
    if (want_gpu && bench_backend_open("gpu", 0, gpu) != DG_OK) {
        bool asked = !strcmp(c->backend, "gpu");
        fprintf(stderr, "bench profile: %s: %s\n", asked ? "gpu backend" : "GPU left out", dg_last_error());
        if (asked) return 1;
    }
    return 0;
}

int bench_profile_main(int argc, char **argv) {
    prof_cli c;
    int rc = parse(argc, argv, &c);
    if (rc != BENCH_OPTS_RUN) return rc;
    dg_onnx *onnx = NULL;
    if (c.onnx_path && dg_onnx_load(c.onnx_path, NULL, &onnx) != DG_OK) {
        fprintf(stderr, "bench profile: %s\n", dg_last_error());
        return 1;
    }
    c.o.onnx = onnx;
    dg_backend *cpu = NULL, *gpu = NULL;
    if (open_backends(&c, &cpu, &gpu)) {
        dg_onnx_free(onnx);
        dg_backend_free(cpu);
        return 1;
    }
    if (bench_mkdir_p(c.out)) {
        fprintf(stderr, "bench profile: cannot create %s: %s\n", c.out, strerror(errno));
        dg_onnx_free(onnx);
        dg_backend_free(cpu);
        dg_backend_free(gpu);
        return 1;
    }
    static char meta[8192];
    bench_env_meta(meta, sizeof meta, cpu ? dg_cpu_threads(cpu) : 0, gpu);
    bench_env_meta_more(meta, sizeof meta, argc, argv, gpu);
    /* the energy meters (their "# energy:" lines join the metadata) */
    static bench_ctx energy;
    energy = bench_default_ctx();
    energy.cpu = cpu;
    energy.gpu = gpu;
    energy.gpu_mon = bench_gpu_monitor_for(gpu);
    energy.meta[0] = '\0';
    bench_energy_open_all(&energy);
    size_t len = strlen(meta);
    snprintf(meta + len, sizeof meta - len, "%s", energy.meta);
    if (onnx) { /* which file the figures are of */
        len = strlen(meta);
        snprintf(meta + len, sizeof meta - len, "# model: %s (%s)\n", c.onnx_path, dg_onnx_digest(onnx));
    }
    const char *ceil_dir = c.ceilings;
    rc = 0;
    if (!ceil_dir && !c.o.run_once) {
        rc = measure_ceilings(&c, cpu, gpu, meta);
        ceil_dir = c.out;
    }
    bench_profile prof[2];
    memset(prof, 0, sizeof prof);
    bench_profile *done[2];
    int n = 0;
    dg_backend *bes[2] = {cpu, gpu};
    for (int b = 0; b < 2 && !bench_interrupted; b++) {
        if (!bes[b]) continue;
        if (profile_one(&c, bes[b], b == 1, ceil_dir, &energy, &prof[b])) rc = 1;
        else done[n++] = &prof[b];
    }
    for (int i = 0; i < n; i++) bench_profile_print(stdout, done[i], c.top);
    if (n == 2) bench_profile_print_compare(stdout, done[0], done[1]);
    if (n > 0) {
        if (bench_profile_write(c.out, meta, done, n) != DG_OK || bench_profile_trace(c.out, done, n) != DG_OK) {
            fprintf(stderr, "bench profile: %s\n", dg_last_error());
            rc = 1;
        }
        rc |= bench_profile_plot(c.out, meta, done, n);
        fprintf(stderr, "bench profile: %s: %d profile%s -> %s/profile-%s*\n", c.o.model->name, n, n == 1 ? "" : "s",
                c.out, done[0]->stem);
    }
    for (int b = 0; b < 2; b++) bench_profile_free(&prof[b]);
    bench_energy_close_all(&energy);
    bench_gpu_monitor_close(energy.gpu_mon);
    dg_backend_free(cpu);
    dg_backend_free(gpu);
    dg_onnx_free(onnx);
    return rc;
}
