/* test_profile.c: bench profile on the CPU. The per-node table matches the
 * graph (names, ops, phases), the op table's FLOP and byte formulas hold
 * on shapes worked by hand, the node times add up to the profiled step
 * exactly, the memory figures are the plan's, bound and % of ceiling
 * follow the ridge, and the CLI writes a valid Chrome trace with one slice
 * per node per step, CSV files with one row per node, and refuses bad
 * options. In bf16 and fp16 (--dtype) the step is the precision policy's,
 * passes its float64 check, names each node's dtype and writes files of
 * its own; a wrong 16-bit GEMM fails the check; tf32 on the CPU is
 * refused. On a GPU: the same bookkeeping, every precision's check, and
 * the plan's replayed CUDA graph still computes the same steps after
 * per-node profiling. */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/autodiff.h"
#include "core/backend_impl.h"
#include "core/graph.h"
#include "core/layout.h"
#include "cpu_backend/cpu_backend.h"
#include "charts/gnuplot.h"
#include "gpu_util.h"
#include "profile/profile.h"
#include "shell_util.h"
#include "test_util.h"

typedef struct fixture { dg_backend *cpu; bench_profile p; } fixture;

static void profile_model(fixture *f, const char *model, int batch, int steps) {
    ASSERT_OK(dg_cpu_backend_new(&f->cpu, 2));
    bench_prof_opts o = {.model = bench_prof_model_find(model), .batch = batch, .steps = steps, .warmup = 1,
                         .peak_gflops = NAN, .peak_gbps = NAN};
    cr_assert_not_null(o.model, "model %s", model);
    ASSERT_OK(bench_profile_run(f->cpu, &o, &f->p));
    cr_assert(f->p.check_ok, "%s failed its check: %g", model, f->p.rel_err);
}

static void fixture_free(fixture *f) {
    bench_profile_free(&f->p);
    dg_backend_free(f->cpu);
}

Test(profile, nodes_are_the_plans_steps_with_their_phases) {
    fixture f = {0};
    profile_model(&f, "mlp", 16, 3);
    int n_steps;
    const dg_step *steps = dg_plan_steps(f.p.step.p, &n_steps);
    cr_assert_eq(f.p.n_nodes, n_steps);
    const dg_train_step *ts = &f.p.step.ts;
    int per_phase[BENCH_N_PHASES] = {0};
    for (int i = 0; i < f.p.n_nodes; i++) {
        const bench_prof_node *x = &f.p.nodes[i];
        cr_assert_eq(x->node, steps[i].node, "node %d is not the plan's step %d", i, i);
        per_phase[x->phase]++;
        dg_op op = x->node->op;
        /* the loss and everything before it is the forward; the gradient's
         * softmax-CE backward follows; Adam's updates close the step */
        if (x->node->id <= ts->loss->id) cr_assert_eq(x->phase, BENCH_PHASE_FORWARD, "%s", x->node->name);
        if (op == DG_OP_SOFTMAX_CE_BACKWARD || op == DG_OP_RELU_BACKWARD)
            cr_assert_eq(x->phase, BENCH_PHASE_BACKWARD, "%s", x->node->name);
        if (op == DG_OP_ADAM_UPDATE) cr_assert_eq(x->phase, BENCH_PHASE_OPTIMIZER, "%s", x->node->name);
    }
    /* 784-256-100-10: 3 matmuls, 3 bias adds, 2 ReLUs, the loss; 6 updates */
    cr_assert_eq(per_phase[BENCH_PHASE_FORWARD], 9);
    cr_assert_eq(per_phase[BENCH_PHASE_OPTIMIZER], 7, "6 Adam updates and the step counter: %d",
                 per_phase[BENCH_PHASE_OPTIMIZER]);
    cr_assert_gt(per_phase[BENCH_PHASE_BACKWARD], 6);
    fixture_free(&f);
}

/* The char-LM, fused and composed, batch 1: the fused step profiles one
 * attention node per block in the forward and one attention_backward per
 * block in the backward, each counted at the attention FLOPs of its shape;
 * the composed step has none (its scores are matmul and causal softmax
 * nodes); the check ran at the reduced context. */
/* Each node names what its step ran as, from the plan (dg_plan_node_impl):
 * the CNN's matmuls OpenBLAS's sgemm, its convolutions oneDNN's under
 * --conv vendor (where built with it), the own strategies under --conv
 * own, else the backend's default per node (DG_CPU_CONV_AUTO: oneDNN for
 * the 32->64 channel layer, the own strategies for the 1-channel one; the
 * own everywhere without oneDNN);
 * the other ops the backend's name. Catches a column filled from the
 * backend's settings instead of the profiled plan's choices, or one that
 * names the setting (AUTO) instead of what each node ran. */
Test(profile, each_node_names_its_implementation) {
    static const dg_conv_impl choices[3] = {DG_CONV_DEFAULT, DG_CONV_OWN, DG_CONV_VENDOR};
    for (int ch = 0; ch < 3; ch++) {
        bool vendor = choices[ch] == DG_CONV_VENDOR, own = choices[ch] == DG_CONV_OWN;
        fixture f = {0};
        ASSERT_OK(dg_cpu_backend_new(&f.cpu, 2));
        if (vendor && !dg_cpu_has_onednn()) cr_skip_test("built without oneDNN: no vendor convolution to profile");
        bench_prof_opts o = {.model = bench_prof_model_find("cnn"), .batch = 2, .steps = 2, .warmup = 0,
                             .peak_gflops = NAN, .peak_gbps = NAN, .conv = choices[ch]};
        ASSERT_OK(bench_profile_run(f.cpu, &o, &f.p));
        int convs = 0;
        for (int i = 0; i < f.p.n_nodes; i++) {
            const bench_prof_node *x = &f.p.nodes[i];
            dg_op op = x->node->op;
            if (op == DG_OP_MATMUL) cr_assert_str_eq(x->impl, "cpu-openblas", "%s", x->name);
            else if (op == DG_OP_CONV2D || op == DG_OP_CONV2D_BACKWARD_DATA || op == DG_OP_CONV2D_BACKWARD_WEIGHT) {
                convs++;
                bool onednn = !strncmp(x->impl, "cpu-onednn", 10);
                bool want = vendor || (!own && dg_cpu_has_onednn() && dg_conv_dims_of(x->node).cg >= 16);
                cr_assert(onednn == want && !strncmp(x->impl, "cpu-", 4), "%s runs as %s", x->name, x->impl);
            } else cr_assert_str_eq(x->impl, "cpu", "%s (%s)", x->name, x->op);
        }
        cr_assert_gt(convs, 3);
        fixture_free(&f);
    }
}

Test(profile, charlm_attention_nodes_fused_and_composed) {
    static const char *const models[2] = {"charlm", "charlm-composed"};
    for (int m = 0; m < 2; m++) {
        fixture f = {0};
        profile_model(&f, models[m], 1, 1);
        cr_assert_str_eq(f.p.check, "f64-step@b2t64+finite");
        int fwd = 0, bwd = 0, softmax = 0;
        for (int i = 0; i < f.p.n_nodes; i++) {
            const bench_prof_node *x = &f.p.nodes[i];
            const dg_node *n = x->node;
            if (n->op == DG_OP_SOFTMAX) softmax++;
            if (n->op != DG_OP_ATTENTION && n->op != DG_OP_ATTENTION_BACKWARD) continue;
            bool forward = n->op == DG_OP_ATTENTION;
            fwd += forward;
            bwd += !forward;
            cr_assert_eq(x->phase, forward ? BENCH_PHASE_FORWARD : BENCH_PHASE_BACKWARD, "%s", n->name);
            /* q [1, 4 heads, 256, 64], causal: 4 B H T^2 Dh (T + 1) / 2T forward, 10 for the backward */
            double t = 256, full = 4.0 * 4 * t * t * 64 * (t + 1) / (2 * t);
            cr_assert_float_eq(x->flops, forward ? full : 2.5 * full, 1e-6 * full, "%s: %g", n->name, x->flops);
        }
        cr_assert_eq(fwd, m ? 0 : 4, "%s: %d attention nodes", models[m], fwd);
        cr_assert_eq(bwd, m ? 0 : 4, "%s: %d attention_backward nodes", models[m], bwd);
        cr_assert_eq(softmax, m ? 4 : 0, "%s: %d softmax nodes", models[m], softmax);
        fixture_free(&f);
    }
}

Test(profile, op_table_costs_on_shapes_worked_by_hand) {
    dg_graph *g = dg_graph_new();
    dg_node *a = dg_input(g, "a", DG_SHAPE(8, 32)), *b = dg_input(g, "b", DG_SHAPE(32, 16));
    dg_node *mm = dg_matmul(g, a, b, false, false);             /* [8,16] */
    dg_node *sum = dg_add(g, mm, mm);
    dg_node *x = dg_input(g, "x", DG_SHAPE(2, 3, 10, 10)), *w = dg_input(g, "w", DG_SHAPE(4, 3, 3, 3));
    dg_node *conv = dg_conv2d(g, x, w, NULL, (dg_conv2d_opts){.pad = {1, 1}}); /* [2,4,10,10] */
    ASSERT_OK(dg_graph_status(g));
    dg_cost c = dg_node_cost(mm);
    cr_assert_eq(c.flops, 2.0 * 8 * 16 * 32, "matmul: 2 m n k, got %g", c.flops);
    cr_assert_eq(c.bytes, 4.0 * (8 * 32 + 32 * 16 + 8 * 16), "matmul: A, B and C once, got %g", c.bytes);
    c = dg_node_cost(sum);
    cr_assert_eq(c.flops, 8.0 * 16, "add: one per element, got %g", c.flops);
    cr_assert_eq(c.bytes, 3 * 4.0 * 8 * 16, "add: two reads, one write, got %g", c.bytes);
    c = dg_node_cost(conv);
    cr_assert_eq(c.flops, 2.0 * 2 * 4 * 100 * 3 * 9, "conv: 2 N O OH OW C KH KW, got %g", c.flops);
    cr_assert_eq(c.bytes, 4.0 * (2 * 3 * 100 + 4 * 27 + 2 * 4 * 100), "conv: x, w and y once, got %g", c.bytes);
    dg_graph_free(g);
}

Test(profile, node_times_add_up_to_the_profiled_step) {
    fixture f = {0};
    profile_model(&f, "logreg", 32, 4);
    cr_assert_eq(f.p.steps, 4);
    for (int s = 0; s < f.p.steps; s++) {
        double sum = 0, prev_end = f.p.step_start_ms[s];
        for (int i = 0; i < f.p.n_nodes; i++) {
            const bench_prof_node *x = &f.p.nodes[i];
            cr_assert(x->dur_ms[s] >= 0, "node %d step %d: %g ms", i, s, x->dur_ms[s]);
            /* the events are back to back: each node starts where the last ended */
            cr_assert(fabs(x->start_ms[s] - prev_end) < 1e-9, "node %d of step %d starts at %g, the last ended at %g",
                      i, s, x->start_ms[s], prev_end);
            prev_end = x->start_ms[s] + x->dur_ms[s];
            sum += x->dur_ms[s];
        }
        if (s > 0) cr_assert_gt(f.p.step_start_ms[s], f.p.step_start_ms[s - 1]);
    }
    double sum = 0;
    for (int i = 0; i < f.p.n_nodes; i++) {
        const bench_prof_node *x = &f.p.nodes[i];
        double least = INFINITY;
        for (int s = 0; s < f.p.steps; s++) least = fmin(least, x->dur_ms[s]);
        cr_assert_eq(x->min_ms, least, "node %d: min %g, its fastest step %g", i, x->min_ms, least);
        /* 4 steps: the median is the mean of the middle two */
        double v[4];
        memcpy(v, x->dur_ms, sizeof v);
        for (int a = 1; a < 4; a++)
            for (int b = a; b > 0 && v[b] < v[b - 1]; b--) {
                double t = v[b];
                v[b] = v[b - 1];
                v[b - 1] = t;
            }
        cr_assert(fabs(x->median_ms - 0.5 * (v[1] + v[2])) < 1e-12, "node %d: median %g, want %g", i, x->median_ms,
                  0.5 * (v[1] + v[2]));
        sum += x->median_ms;
    }
    cr_assert(fabs(sum - f.p.sum_ms) < 1e-9 * fmax(1, sum));
    cr_assert(f.p.plan_ms > 0 && f.p.profiled_ms > 0, "un-profiled %g, profiled %g", f.p.plan_ms, f.p.profiled_ms);
    cr_assert(isnan(f.p.plan_nodes_ms), "node by node without events is the GPU's figure only");
    fixture_free(&f);
}

Test(profile, memory_is_the_plans_own_accounting) {
    fixture f = {0};
    profile_model(&f, "cnn", 8, 2);
    dg_plan_stats ps = dg_plan_stats_get(f.p.step.p);
    cr_assert_eq(f.p.arena_bytes, ps.arena_bytes);
    cr_assert_eq(f.p.live_peak_bytes, ps.live_bytes);
    cr_assert_eq(f.p.persistent_bytes, ps.persistent_bytes);
    cr_assert_eq(f.p.allocs_during_runs, 0, "the plan allocated %lld times while running", f.p.allocs_during_runs);
    size_t most = 0;
    for (int i = 0; i < f.p.n_nodes; i++)
        if (f.p.nodes[i].live_bytes > most) most = f.p.nodes[i].live_bytes;
    cr_assert_eq(most, ps.live_bytes, "the most alive at one node %zu, the plan's peak %zu", most, ps.live_bytes);
    /* conv1.w 32x1x3x3, conv2.w 64x32x3x3, fc1 3136x128 + 128, fc2 128x10 + 10; each batch norm's
     * scale, shift, running mean and variance */
    size_t params = 4 * (288 + 18432 + 3136 * 128 + 128 + 1280 + 10 + 4 * 32 + 4 * 64);
    cr_assert_eq(f.p.param_bytes, params, "%zu", f.p.param_bytes);
    cr_assert_eq(f.p.input_bytes, 4 * (8 * 28 * 28 + 8));
    cr_assert(f.p.persistent_bytes > f.p.param_bytes + f.p.input_bytes, "momentum buffers are persistent too");
    fixture_free(&f);
}

Test(profile, bound_and_ceiling_follow_the_ridge) {
    bench_profile p = {.peak_gflops = 100, .peak_gbps = 10}; /* ridge at 10 FLOP per byte */
    bench_prof_node mm = {.flops = 2e9, .bytes = 1e8, .median_ms = 40}; /* 20 FLOP/B: 50 GFLOP/s */
    bench_prof_node add = {.flops = 1e6, .bytes = 1.2e7, .median_ms = 2}; /* 6 GB/s */
    cr_assert_str_eq(bench_prof_bound(&p, &mm), "compute");
    cr_assert(fabs(bench_prof_ceiling_frac(&p, &mm) - 0.5) < 1e-12, "%g", bench_prof_ceiling_frac(&p, &mm));
    cr_assert_str_eq(bench_prof_bound(&p, &add), "memory");
    cr_assert(fabs(bench_prof_ceiling_frac(&p, &add) - 0.6) < 1e-12, "%g", bench_prof_ceiling_frac(&p, &add));
    p.peak_gbps = NAN;
    cr_assert_str_eq(bench_prof_bound(&p, &mm), "-");
    cr_assert(isnan(bench_prof_ceiling_frac(&p, &mm)));
}

/* the CLI's tests need the bench at its build path, which a packed copy
 * of the suite (the GPU machine's) does not have */
static void bench_or_skip(void) {
    if (access(DG_BENCH_PATH, X_OK)) cr_skip_test("%s is missing (a packed copy of the suite has no bench)", DG_BENCH_PATH);
}

/* the lines of a file that are not '#' metadata, the header included */
/* The fields of one CSV line, a comma inside double quotes not counting */
static int csv_fields(const char *l, const char *end) {
    int n = 1;
    bool quoted = false;
    for (; l < end; l++) {
        if (*l == '"') quoted = !quoted;
        if (*l == ',' && !quoted) n++;
    }
    return n;
}

/* The lines of a CSV file that are not '#' comments; each must have as
 * many fields as the first (the header) */
static int data_lines(const char *path) {
    char *text = read_file(path);
    int n = 0, header_fields = 0;
    for (char *l = text; l && *l;) {
        char *nl = strchr(l, '\n'), *end = nl ? nl : l + strlen(l);
        if (*l != '#') {
            int fields = csv_fields(l, end);
            if (!n++) header_fields = fields;
            cr_assert_eq(fields, header_fields, "%s: %d fields where the header has %d: %.*s", path, fields,
                         header_fields, (int)(end - l), l);
        }
        l = nl ? nl + 1 : end;
    }
    free(text);
    return n;
}

Test(profile, cli_writes_a_trace_with_one_slice_per_node_per_step) {
    bench_or_skip();
    char dir[] = "/tmp/dg-profile-XXXXXX", cmd[1024], out[1 << 16], path[256];
    tmp_dir(dir);
    /* --ceilings at a folder without ceiling.csv: no bounds, nothing measured */
    snprintf(cmd, sizeof cmd, "%s profile --model logreg --backend cpu --batch 16 --steps 3 --warmup 0 --top 5 "
             "--ceilings %s --out %s", DG_BENCH_PATH, dir, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "top 5 of ") && strstr(out, "check f64-step: ok") && strstr(out, "allocations during"),
              "%s", out);
    /* without ceilings, bound and %ceil say '-', never nan% */
    cr_assert(!strstr(out, "nan") && strstr(out, "ceilings: not measured"), "%s", out);
    fixture f = {0};
    profile_model(&f, "logreg", 16, 1); /* the same graph: its node names */
    snprintf(path, sizeof path, "%s/profile-logreg-trace.json", dir);
    char *text = read_file(path);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "the trace is not valid JSON");
    cJSON *ev = cJSON_GetObjectItem(root, "traceEvents"), *e;
    cr_assert(cJSON_IsArray(ev));
    int slices = 0, steps = 0, per_node[64] = {0};
    cr_assert_leq(f.p.n_nodes, 64);
    cJSON_ArrayForEach(e, ev) {
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
        cr_assert_not_null(ph);
        if (strcmp(ph, "X")) continue;
        cr_assert(cJSON_GetObjectItem(e, "ts")->valuedouble >= 0 && cJSON_GetObjectItem(e, "dur")->valuedouble >= 0);
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
        if (cJSON_GetObjectItem(e, "tid")->valueint == 1) {
            steps++;
            continue;
        }
        slices++;
        int i = 0;
        while (i < f.p.n_nodes && strcmp(f.p.nodes[i].node->name, name)) i++;
        cr_assert_lt(i, f.p.n_nodes, "slice '%s' names no node", name);
        per_node[i]++;
        cJSON *args = cJSON_GetObjectItem(e, "args");
        cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(args, "phase")), bench_phase_name(f.p.nodes[i].phase));
        cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(args, "op")), dg_op_name(f.p.nodes[i].node->op));
    }
    cr_assert_eq(steps, 3);
    cr_assert_eq(slices, 3 * f.p.n_nodes, "%d slices for %d nodes x 3 steps", slices, f.p.n_nodes);
    for (int i = 0; i < f.p.n_nodes; i++) cr_assert_eq(per_node[i], 3, "%s: %d slices", f.p.nodes[i].node->name, per_node[i]);
    cJSON_Delete(root);
    free(text);
    snprintf(path, sizeof path, "%s/profile-logreg-cpu-nodes.csv", dir);
    cr_assert_eq(data_lines(path), 1 + f.p.n_nodes, "a header and one row per node");
    snprintf(path, sizeof path, "%s/profile-logreg.json", dir);
    text = read_file(path);
    root = cJSON_Parse(text);
    cr_assert_not_null(root, "profile-logreg.json is not valid JSON");
    cJSON *prof = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "profiles"), 0);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(prof, "nodes")), f.p.n_nodes);
    cJSON_Delete(root);
    free(text);
    fixture_free(&f);
    remove_dir(dir);
}

Test(profile, cli_refuses_bad_options) {
    bench_or_skip();
    static const char *bad[] = {"--model nope", "--batch 0", "--backend tpu", "--steps x", "stray", "--top -1"};
    char cmd[512], out[4096];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(cmd, sizeof cmd, "%s profile %s --out /nonexistent/never", DG_BENCH_PATH, bad[i]);
        cr_assert_eq(sh(cmd, out, sizeof out), 2, "'%s' should be a usage error: %s", bad[i], out);
        cr_assert(strstr(out, "bench profile: bad"), "'%s': %s", bad[i], out);
    }
    snprintf(cmd, sizeof cmd, "%s profile --help", DG_BENCH_PATH);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "resnet18-cifar") && strstr(out, "--run-once") && strstr(out, "--dtype D"), "%s", out);
}

/* ---- precisions (--dtype) ---- */

/* one profile of model in precision prec on the CPU at batch 16, 2 steps */
static dg_status profile_in(fixture *f, const char *model, dg_precision prec) {
    ASSERT_OK(dg_cpu_backend_new(&f->cpu, 2));
    bench_prof_opts o = {.model = bench_prof_model_find(model), .batch = 16, .steps = 2, .warmup = 0,
                         .precision = prec, .peak_gflops = NAN, .peak_gbps = NAN};
    return bench_profile_run(f->cpu, &o, &f->p);
}

/* The MLP in bf16 and fp16 on the CPU: the step is the policy's (every
 * matmul's operands cast from float32, the product returning float32, the
 * loss and Adam float32; fp16 adds its loss scaling's overflow test), it
 * passes its float64 check at the precision's tolerances, each node names
 * its dtype, the op table splits by it, and the files' stem carries the
 * precision. Catches a --dtype that builds the fp32 step (no casts), a
 * dtype column filled from the output alone (the products would read f32)
 * and a stem without the precision. */
Test(profile, mlp_in_bf16_and_fp16_shows_16_bit_nodes_and_passes_its_check) {
    static const dg_precision precs[2] = {DG_PREC_BF16, DG_PREC_FP16};
    for (int k = 0; k < 2; k++) {
        fixture f = {0};
        const char *d = dg_dtype_name(dg_precision_dtype(precs[k]));
        ASSERT_OK(profile_in(&f, "mlp", precs[k]));
        cr_assert(f.p.check_ok, "%s: the step failed its check: %g", d, f.p.rel_err);
        char stem[80], to16[16], from16[16];
        snprintf(stem, sizeof stem, "mlp-%s", dg_precision_name(precs[k]));
        cr_assert_str_eq(f.p.stem, stem);
        snprintf(to16, sizeof to16, "f32->%s", d);
        snprintf(from16, sizeof from16, "%s->f32", d);
        int casts = 0, products = 0, found_inf = 0;
        for (int i = 0; i < f.p.n_nodes; i++) {
            const bench_prof_node *x = &f.p.nodes[i];
            dg_op op = x->node->op;
            if (op == DG_OP_CAST && !strcmp(x->dtype, to16)) casts++;
            if (op == DG_OP_MATMUL) {
                cr_assert_str_eq(x->dtype, from16, "%s: the product %s", d, x->name);
                products++;
            }
            if (op == DG_OP_FOUND_INF) found_inf++;
            if (op == DG_OP_SOFTMAX_CE || op == DG_OP_ADAM_UPDATE) cr_assert_str_eq(x->dtype, "f32", "%s", x->name);
        }
        /* 3 layers: forward products, and the backward's two per layer but
         * the first's input gradient; each weight and activation cast */
        cr_assert_geq(products, 8, "%s: %d products", d, products);
        cr_assert_geq(casts, 6, "%s: %d casts to 16 bits", d, casts);
        /* the 6 parameters' gradients tested by one node of up to 7 */
        const int want_found = precs[k] == DG_PREC_FP16 ? (6 + DG_FOUND_INF_MAX - 1) / DG_FOUND_INF_MAX : 0;
        cr_assert_eq(found_inf, want_found, "%s: %d overflow tests, want %d", d, found_inf, want_found);
        bench_prof_group g[64];
        int n = bench_prof_groups(&f.p, false, g, 64), mm = 0;
        for (int i = 0; i < n; i++)
            if (!strcmp(g[i].key, "matmul")) {
                cr_assert_str_eq(g[i].dtype, from16);
                mm += g[i].nodes;
            }
        cr_assert_eq(mm, products, "the op table's matmul rows hold every product");
        fixture_free(&f);
    }
}

/* a planted fault: every 16-bit GEMM's float32 result 2% too large */
static const dg_backend_i *cpu_iface;
static dg_status gemm16_off(dg_backend *be, const dg_step *s) {
    dg_status st = cpu_iface->compute(be, s);
    if (st != DG_OK || s->node->op != DG_OP_MATMUL || s->node->in[0]->dtype == DG_F32) return st;
    float *c = s->out;
    for (int64_t i = 0; i < dg_node_numel(s->node); i++) c[i] *= 1.02f;
    return st;
}

/* The bf16 profile's check is sharp: with every 16-bit product 2% off the
 * step fails against float64, nothing is timed, and the CLI's message
 * (profile_cli.c) has what it needs. Fails if the profile checked the
 * fp32 step (no 16-bit product to be wrong) or tolerated the error. */
Test(profile, a_wrong_16_bit_gemm_fails_the_bf16_check) {
    fixture f = {0};
    ASSERT_OK(dg_cpu_backend_new(&f.cpu, 2));
    cpu_iface = f.cpu->iface;
    dg_backend_i planted = *f.cpu->iface;
    planted.compute = gemm16_off;
    f.cpu->iface = &planted;
    bench_prof_opts o = {.model = bench_prof_model_find("mlp"), .batch = 16, .steps = 2, .warmup = 0,
                         .precision = DG_PREC_BF16, .peak_gflops = NAN, .peak_gbps = NAN};
    dg_status st = bench_profile_run(f.cpu, &o, &f.p);
    f.cpu->iface = cpu_iface;
    ASSERT_OK(st);
    cr_assert(!f.p.check_ok, "a 2%% wrong bf16 GEMM passes the check: max rel err %g", f.p.rel_err);
    cr_assert_str_eq(f.p.check, "f64-step");
    cr_assert_gt(f.p.rel_err, 2e-2, "above bf16's loss tolerance: %g", f.p.rel_err);
    cr_assert(f.p.n_nodes == 0 && isnan(f.p.plan_ms), "a step that failed its check is not timed");
    fixture_free(&f);
}

/* tf32 on the CPU: the library refuses it naming the backend, and the CLI
 * (--backend cpu, or both, the default) before anything runs, exit 2;
 * --tf32 is --dtype tf32; an unknown dtype is a usage error. */
Test(profile, tf32_on_the_cpu_is_refused) {
    fixture f = {0};
    cr_assert_eq(profile_in(&f, "logreg", DG_PREC_TF32), DG_ERR_UNSUPPORTED);
    cr_assert(strstr(dg_last_error(), "no TF32 mode") && strstr(dg_last_error(), "cpu"), "%s", dg_last_error());
    fixture_free(&f);
    bench_or_skip();
    static const char *refused[] = {"--dtype tf32 --backend cpu", "--dtype tf32", "--tf32 --backend cpu"};
    char cmd[512], out[4096];
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        snprintf(cmd, sizeof cmd, "%s profile %s --out /nonexistent/never", DG_BENCH_PATH, refused[i]);
        cr_assert_eq(sh(cmd, out, sizeof out), 2, "'%s': %s", refused[i], out);
        cr_assert(strstr(out, "the CPU has no TF32 mode") && strstr(out, "--backend gpu"), "'%s': %s", refused[i], out);
    }
    snprintf(cmd, sizeof cmd, "%s profile --dtype fp8 --out /nonexistent/never", DG_BENCH_PATH);
    cr_assert_eq(sh(cmd, out, sizeof out), 2, "%s", out);
    cr_assert(strstr(out, "bad --dtype (fp32, tf32, bf16, fp16) 'fp8'"), "%s", out);
}

/* `bench profile --dtype bf16` beside an fp32 run in the same folder:
 * neither overwrites the other (the bf16 files are profile-MODEL-bf16*),
 * the tables and files carry each node's dtype and the precision, the
 * JSON reads back with its stem; and an ONNX file's model the same. */
Test(profile, cli_bf16_files_sit_beside_the_fp32_ones) {
    bench_or_skip();
    char dir[] = "/tmp/dg-profprec-XXXXXX", cmd[2048], out[1 << 16], path[256];
    tmp_dir(dir);
    static const char *runs[3] = {"--model logreg", "--model logreg --dtype bf16",
                                  "--model " DG_SOURCE_DIR "/tests/data/onnx/mlp.onnx --dtype bf16"};
    for (int r = 0; r < 3; r++) {
        snprintf(cmd, sizeof cmd, "%s profile %s --backend cpu --batch 8 --steps 2 --warmup 0 --ceilings %s "
                 "--out %s", DG_BENCH_PATH, runs[r], dir, dir);
        cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s: %s", runs[r], out);
        /* the ONNX file's check runs at batch 2, as the CNN's */
        if (r) cr_assert(strstr(out, r == 1 ? "bf16 mixed precision; check f64-step: ok" :
                                              "bf16 mixed precision; check f64-step@b2+finite: ok") &&
                         strstr(out, "f32->bf16") &&
                         strstr(out, "bf16->f32"), "%s: %s", runs[r], out);
    }
    static const char *files[] = {"profile-logreg-cpu-nodes.csv", "profile-logreg-bf16-cpu-nodes.csv",
                                  "profile-logreg-bf16-cpu-ops.csv", "profile-logreg-bf16-trace.json",
                                  "profile-logreg.json", "profile-onnx-mlp-bf16-cpu-nodes.csv"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        cr_assert_eq(access(path, R_OK), 0, "%s is missing", files[i]);
    }
    snprintf(path, sizeof path, "%s/profile-logreg-bf16-cpu-nodes.csv", dir);
    char *csv = read_file(path);
    cr_assert(strstr(csv, "\nmodel,precision,backend,batch,index,node_id,name,op,dtype,") &&
              strstr(csv, "logreg,bf16,cpu,8,") && strstr(csv, ",matmul,bf16->f32,"), "%.3000s", csv);
    free(csv);
    snprintf(path, sizeof path, "%s/profile-logreg-bf16.json", dir);
    bench_profile p[2];
    char model[64];
    int n;
    ASSERT_OK(bench_profile_read(path, model, NULL, 0, p, &n));
    cr_assert(n == 1 && !strcmp(model, "logreg") && p[0].precision == DG_PREC_BF16 &&
              !strcmp(p[0].stem, "logreg-bf16"), "%s %s", model, p[0].stem);
    int bf16 = 0;
    for (int i = 0; i < p[0].n_nodes; i++) bf16 += !strcmp(p[0].nodes[i].dtype, "bf16->f32");
    cr_assert_gt(bf16, 0, "no bf16 product read back");
    bench_profile_read_free(p, n);
    remove_dir(dir);
}

/* A profile JSON as bench profile writes it, with `model` and one node
 * named `node` (both written raw: the test's own escapes) */
static void write_profile_json(const char *path, const char *model, const char *node) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"model\": \"%s\", \"context\": \"# cpu: Test CPU\\n# git commit: abc1234\\n\", "
             "\"profiles\": [{\"backend\": \"cpu\", \"batch\": 4, \"step_ms\": "
             "{\"sum_of_nodes\": 0.5}, \"ceilings\": {\"gflops\": 100, \"gbps\": 10}, \"memory_bytes\": "
             "{\"arena\": 4096}, \"nodes\": [{\"name\": \"%s\", \"op\": \"matmul\", \"phase\": \"forward\", "
             "\"flops\": 2e6, \"bytes\": 1e5, \"median_ms\": 0.5, \"live_bytes\": 2048}]}]}",
             model, node);
    write_file(path, text);
}

/* The model's name becomes part of file names: a name that is not a plain
 * file name is refused with the file and the value named, whatever else
 * the profile holds. Fails, without the check, on the first name. */
Test(profile, read_refuses_a_model_name_that_is_not_a_file_name) {
    static const char *bad[] = {"a/../../../X", "..", ".hidden", "", "a b", "x'y",
                                "a234567890123456789012345678901234567890123456789012345678901234"};
    char dir[] = "/tmp/dg-profread-XXXXXX", path[256];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/profile-x.json", dir);
    bench_profile p[2];
    char model[64];
    int n;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_profile_json(path, bad[i], "fc1");
        cr_assert_eq(bench_profile_read(path, model, NULL, 0, p, &n), DG_ERR_IO, "model '%s' was accepted", bad[i]);
        cr_assert_eq(n, 0);
        cr_assert(strstr(dg_last_error(), path) && strstr(dg_last_error(), "\"model\""), "%s", dg_last_error());
        if (*bad[i]) cr_assert(strstr(dg_last_error(), bad[i]), "the message names the value: %s", dg_last_error());
    }
    /* the precision joins the stem: an unknown one is refused, naming the key */
    char text[512];
    snprintf(text, sizeof text, "{\"model\": \"mlp\", \"precision\": \"/../x\", \"profiles\": [{}]}");
    write_file(path, text);
    cr_assert_eq(bench_profile_read(path, model, NULL, 0, p, &n), DG_ERR_IO);
    cr_assert(strstr(dg_last_error(), "\"precision\""), "%s", dg_last_error());
    write_profile_json(path, "mlp-2.b_c", "fc1");
    ASSERT_OK(bench_profile_read(path, model, NULL, 0, p, &n));
    cr_assert(n == 1 && !strcmp(model, "mlp-2.b_c") && p[0].n_nodes == 1 && !strcmp(p[0].nodes[0].name, "fc1"));
    bench_profile_read_free(p, n);
    remove_dir(dir);
}

/* `bench plot DIR` on a profile whose model climbs out of DIR: exit 1,
 * the file and the value named, nothing written beside DIR or above it
 * (the folder the path climbs through exists, as an attacker would make
 * it). A node name holding a newline, blanks and '#' stays one token of
 * one row of the roofline's data file. */
Test(profile, plot_writes_nothing_outside_the_folder_and_escapes_node_names) {
    bench_or_skip();
    char top[] = "/tmp/dg-profplot-XXXXXX", dir[256], path[512], cmd[1024], out[8192];
    tmp_dir(top);
    snprintf(dir, sizeof dir, "%s/res", top);
    cr_assert_eq(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/plot-data", dir);
    cr_assert_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/plot-data/profile-a", dir);
    cr_assert_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/profile-evil.json", dir);
    write_profile_json(path, "a/../../../X", "fc1");
    snprintf(cmd, sizeof cmd, "%s plot %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 1, "%s", out);
    cr_assert(strstr(out, "profile-evil.json") && strstr(out, "a/../../../X"), "%s", out);
    static const char *const ext[] = {"ops.gp", "ops.dat", "ops.png", "live.gp", "live.dat", "roofline-cpu.gp",
                                      "roofline-cpu.dat", "roofline-cpu.png"};
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
        snprintf(path, sizeof path, "%s/X-%s", top, ext[i]);
        cr_assert(access(path, F_OK) != 0, "bench plot wrote %s, outside %s", path, dir);
        snprintf(path, sizeof path, "%s/X-%s", dir, ext[i]);
        cr_assert(access(path, F_OK) != 0, "bench plot wrote %s", path);
    }
    if (!bench_gnuplot_found()) {
        remove_dir(top);
        cr_skip_test("gnuplot not found: the data files of a good profile are not written");
    }
    snprintf(path, sizeof path, "%s/profile-evil.json", dir);
    remove(path);
    snprintf(path, sizeof path, "%s/profile-ok.json", dir);
    write_profile_json(path, "ok", "n 1\\n7 7 injected #c \\\"q\\\"");
    sh(cmd, out, sizeof out); /* exit 1: the folder has no sweep CSV */
    snprintf(path, sizeof path, "%s/plot-data/profile-ok-roofline-cpu.dat", dir);
    char *text = read_file(path);
    int rows = 0;
    for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
        if (*l == '#' || strstr(l, "nan nan none")) continue;
        char a[64], b[64], name[64], extra[64];
        cr_assert_eq(sscanf(l, "%63s %63s %63s %63s", a, b, name, extra), 3, "not one row of 3 columns: '%s'", l);
        cr_assert_str_eq(name, "n_1_7_7_injected__c__q_");
        rows++;
    }
    cr_assert_eq(rows, 1, "one node, %d rows", rows);
    free(text);
    /* the run's metadata (the JSON's context) on the chart */
    snprintf(path, sizeof path, "%s/plot-data/profile-ok-ops.gp", dir);
    text = read_file(path);
    cr_assert(strstr(text, "set label 'cpu Test CPU (? cores), gpu ?, date ?, commit abc1234' at screen"), "%s", text);
    free(text);
    remove_dir(top);
}

/* The MLP on the GPU in tf32, bf16 and fp16: each passes its check at the
 * precision's tolerances, with no allocation during the runs; in bf16
 * and fp16 the products name their 16-bit inputs. Fails where a GPU
 * kernel of the 16-bit path, or the profiler's events around it, is wrong. */
Test(profile, gpu_profiles_in_every_precision_pass_their_checks) {
    dg_backend *gpu = test_backend_open(true);
    static const dg_precision precs[3] = {DG_PREC_TF32, DG_PREC_BF16, DG_PREC_FP16};
    for (int k = 0; k < 3; k++) {
        bench_prof_opts o = {.model = bench_prof_model_find("mlp"), .batch = 64, .steps = 2, .warmup = 1,
                             .precision = precs[k], .peak_gflops = NAN, .peak_gbps = NAN};
        bench_profile p;
        ASSERT_OK(bench_profile_run(gpu, &o, &p));
        const char *name = dg_precision_name(precs[k]);
        cr_assert(p.check_ok, "%s: the GPU step failed its check: %g", name, p.rel_err);
        cr_assert_eq(p.allocs_during_runs, 0, "%s", name);
        int products16 = 0;
        for (int i = 0; i < p.n_nodes; i++)
            if (p.nodes[i].node->op == DG_OP_MATMUL) products16 += strcmp(p.nodes[i].dtype, "f32") != 0;
        cr_assert(precs[k] == DG_PREC_TF32 ? products16 == 0 : products16 >= 8, "%s: %d 16-bit products", name,
                  products16);
        bench_profile_free(&p);
    }
    dg_backend_free(gpu);
}

/* A profile on the GPU interleaves three ways of running the same plan:
 * its replayed CUDA graph, its steps queued one by one, and the profiled
 * steps with events between nodes. All of them must compute the same
 * training steps: after the profile, the parameters must equal those of a
 * plan run node by node (no replay) the same number of times. */
Test(profile, gpu_profile_keeps_replay_and_steps_intact) {
    dg_backend *gpu = test_backend_open(true);
    bench_prof_opts o = {.model = bench_prof_model_find("mlp"), .batch = 64, .steps = 3, .warmup = 2,
                         .peak_gflops = NAN, .peak_gbps = NAN};
    bench_profile p;
    ASSERT_OK(bench_profile_run(gpu, &o, &p));
    cr_assert(p.check_ok, "the GPU step failed its check: %g", p.rel_err);
    cr_assert_eq(p.allocs_during_runs, 0);
    cr_assert(p.plan_ms > 0 && p.plan_nodes_ms > 0 && p.profiled_ms > 0, "%g %g %g", p.plan_ms, p.plan_nodes_ms,
              p.profiled_ms);
    for (int s = 0; s < p.steps; s++) {
        double sum = 0;
        for (int i = 0; i < p.n_nodes; i++) sum += p.nodes[i].dur_ms[s];
        double profiled = p.nodes[p.n_nodes - 1].start_ms[s] + p.nodes[p.n_nodes - 1].dur_ms[s] - p.step_start_ms[s];
        cr_assert(fabs(sum - profiled) < 1e-3 * profiled, "step %d: nodes %g ms, step %g ms", s, sum, profiled);
    }
    /* the runs so far: the check, the warm-up, and per round the replayed
     * plan, the steps one by one and the profiled steps */
    int runs = 1 + o.warmup + 3 * o.steps;
    bench_step ref = {0};
    dg_mlp_cfg cfg = {{784, 256, 100, 10}, 4};
    bench_step_spec spec = bench_mlp_step(&cfg);
    int64_t nx = 64 * 784;
    float *x = malloc((size_t)nx * sizeof *x);
    int32_t y[64];
    /* profile_run.c's synthetic batch for this batch size comes from its own
     * seed: read the profiled plan's inputs back instead */
    ASSERT_OK(dg_plan_get(p.step.p, p.step.ts.x, x, (size_t)nx * sizeof *x));
    ASSERT_OK(dg_plan_get(p.step.p, p.step.ts.y, y, sizeof y));
    ASSERT_OK(bench_step_build(&ref, gpu, &spec, 64, x, y, &(dg_plan_opts){.no_replay = true}));
    for (int r = 0; r < runs; r++) ASSERT_OK(dg_plan_run(ref.p));
    for (int i = 0; i < p.step.model.n_params; i++) {
        size_t n = (size_t)dg_node_numel(p.step.model.params[i]);
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        ASSERT_OK(dg_plan_get(p.step.p, p.step.model.params[i], a, n * sizeof *a));
        ASSERT_OK(dg_plan_get(ref.p, ref.model.params[i], b, n * sizeof *b));
        double num = 0, den = 0;
        for (size_t j = 0; j < n; j++) {
            num += ((double)a[j] - b[j]) * ((double)a[j] - b[j]);
            den += (double)b[j] * b[j];
        }
        cr_assert(sqrt(num / fmax(den, 1e-300)) < 1e-6, "parameter %d differs after %d steps: %g", i, runs,
                  sqrt(num / fmax(den, 1e-300)));
        free(a);
        free(b);
    }
    free(x);
    bench_step_free(&ref);
    bench_profile_free(&p);
    dg_backend_free(gpu);
}
