/* train_charlm.c: `bench train --model charlm`: the character-level
 * transformer language model (core/nn/transformer.h) trained on a text
 * file (core/nn/lm_trainer.h), on the CPU or the GPU from the same seed
 * (the same initial weights and windows: the first step's loss agrees
 * across backends to float rounding). Prints the text's unigram entropy,
 * the bar a model that learns anything beyond character frequencies must
 * get under, and the held-out loss as training goes; writes
 * train-charlm-BACKEND.csv (one row per evaluation, the text's unigram
 * entropy in each: the report draws it as the bar to beat). */
#include "train/train_charlm.h"

#include <float.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/nn/lm_trainer.h"
#include "train/train_csv.h"
#include "writers/csv.h"
#include "cli/options.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench train --model charlm [options]\n"
            "\n"
            "  --text FILE       plain text to learn (default " DG_TEXT_DEFAULT ")\n"
            "  --backend B       cpu | gpu (default cpu)\n"
            "  --steps N         training steps (default 600)\n"
            "  --batch B         windows per step (default 32)\n"
            "  --context T       characters per window (default 128)\n"
            "  --width C         model width (default 128)\n"
            "  --heads H         attention heads, dividing the width (default 4)\n"
            "  --layers L        transformer blocks (default 2)\n"
            "  --attention A     fused | composed (default fused)\n"
            "  --lr X            Adam's rate (default 2e-3)\n"
            "  --dtype P         fp32 | tf32 | bf16 | fp16 (default fp32): the step's precision policy\n"
            "                    (bench train --help)\n"
            "  --eval-every N    steps between held-out evaluations (default 50)\n"
            "  --seed S          initial weights and windows (default 1)\n"
            "  --threads N       CPU threads\n"
            "  --out DIR         CSV folder (default reports/latest); file train-charlm-BACKEND[-DTYPE].csv\n"
            "\n"
            "Losses are cross-entropies in nats per character: train is the mean of the steps since the\n"
            "last evaluation, held-out the mean over fixed windows of the text's last tenth. TF32 only under\n"
            "--dtype tf32.\n");
}

static int bad(const char *what, const char *arg) {
    return bench_usage_error("bench train", "bad %s '%.80s'", what, arg);
}

typedef struct curve_out { FILE *csv; const char *backend, *dtype; double unigram_nats; } curve_out;

static void on_eval(const dg_lm_stats *s, void *arg) {
    curve_out *c = arg;
    printf("step %5d  train loss %.4f  held-out loss %.4f  %.2f s\n", s->step, s->train_loss, s->val_loss,
           s->train_s);
    fflush(stdout);
    fprintf(c->csv, "%d,charlm,%s,%.6f,%.6f,%.6f,%.6f,%s\n", s->step, c->backend, s->train_loss, s->val_loss,
            s->train_s, c->unigram_nats, c->dtype);
    fflush(c->csv);
}

int bench_train_charlm_main(int argc, char **argv) {
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'M'}, {"text", required_argument, NULL, 'x'},
        {"backend", required_argument, NULL, 'b'}, {"steps", required_argument, NULL, 'n'},
        {"batch", required_argument, NULL, 'B'}, {"context", required_argument, NULL, 'T'},
        {"width", required_argument, NULL, 'C'}, {"heads", required_argument, NULL, 'H'},
        {"layers", required_argument, NULL, 'L'}, {"attention", required_argument, NULL, 'a'},
        {"lr", required_argument, NULL, 'l'}, {"eval-every", required_argument, NULL, 'e'},
        {"dtype", required_argument, NULL, 'D'},
        {"seed", required_argument, NULL, 's'}, {"threads", required_argument, NULL, 't'},
        {"out", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    const char *text_path = DG_TEXT_DEFAULT, *backend = "cpu", *out = "reports/latest";
    dg_lm_train_opts o = {.model = {.context = 128, .width = 128, .heads = 4, .layers = 2},
                          .steps = 600, .batch = 32, .eval_every = 50, .eval_batches = 4, .seed = 1};
    double lr = 2e-3;
    int threads = 0, c;
    long long v;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'M': if (strcmp(optarg, "charlm")) return bad("--model", optarg); break;
        case 'x': if (!*optarg || strlen(optarg) > BENCH_MAX_PATH) return bad("--text", optarg); text_path = optarg; break;
        case 'b': if (strcmp(optarg, "cpu") && strcmp(optarg, "gpu")) return bad("--backend", optarg); backend = optarg; break;
        case 'n': if (!bench_parse_long(optarg, 1, 1000000, &v)) return bad("--steps (1 to 1000000)", optarg); o.steps = (int)v; break;
        case 'B': if (!bench_parse_long(optarg, 1, 1024, &v)) return bad("--batch (1 to 1024)", optarg); o.batch = (int)v; break;
        case 'T': if (!bench_parse_long(optarg, 1, 65536, &v)) return bad("--context (1 to 65536)", optarg); o.model.context = (int)v; break;
        case 'C': if (!bench_parse_long(optarg, 1, 16384, &v)) return bad("--width (1 to 16384)", optarg); o.model.width = (int)v; break;
        case 'H': if (!bench_parse_long(optarg, 1, 1024, &v)) return bad("--heads (1 to 1024)", optarg); o.model.heads = (int)v; break;
        case 'L': if (!bench_parse_long(optarg, 1, DG_TRANSFORMER_MAX_LAYERS, &v)) return bad("--layers", optarg); o.model.layers = (int)v; break;
        case 'a':
            if (strcmp(optarg, "fused") && strcmp(optarg, "composed")) return bad("--attention (fused | composed)", optarg);
            o.model.composed = !strcmp(optarg, "composed");
            break;
        case 'l': if (!bench_parse_double(optarg, FLT_MIN, 99.99, &lr)) return bad("--lr (a float in (0, 100))", optarg); break;
        case 'e': if (!bench_parse_long(optarg, 1, 1000000, &v)) return bad("--eval-every (1 to 1000000)", optarg); o.eval_every = (int)v; break;
        case 's': if (!bench_parse_long(optarg, 0, LLONG_MAX, &v)) return bad("--seed (0 to 2^63-1)", optarg); o.seed = (uint64_t)v; break;
        case 't': if (!bench_parse_long(optarg, 1, 1024, &v)) return bad("--threads (1 to 1024)", optarg); threads = (int)v; break;
        case 'D': if (dg_precision_parse(optarg, &o.precision) != DG_OK) return bad("--dtype (fp32, tf32, bf16 or fp16)", optarg); break;
        case 'o': if (!*optarg || strlen(optarg) > BENCH_MAX_PATH) return bad("--out", optarg); out = optarg; break;
        case 'h': usage(stdout); return 0;
        default: return bench_option_error("bench train", opts, c, argv);
        }
    }
    if (optind < argc) return bad("argument", argv[optind]);
    if (o.model.width % o.model.heads)
        return bench_usage_error("bench train", "%d heads do not divide the width %d", o.model.heads, o.model.width);
    o.optim = dg_optim_default(DG_OPTIM_ADAM, (float)lr);
    dg_text text;
    if (dg_text_load(text_path, &text) != DG_OK) {
        fprintf(stderr, "bench train: %s\n", dg_last_error());
        return 1;
    }
    char name[64];
    /* a precision other than fp32 names its file too, beside fp32's */
    snprintf(name, sizeof name, "train-charlm-%s%s%s", backend, o.precision != DG_PREC_FP32 ? "-" : "",
             o.precision != DG_PREC_FP32 ? dg_precision_name(o.precision) : "");
    dg_backend *be = NULL;
    FILE *csv = bench_train_open(backend, threads, out, name,
                                 "step,model,backend,train_loss,val_loss,train_s,unigram_nats,dtype", NULL, argc, argv, &be);
    if (!csv) {
        dg_text_free(&text);
        return 1;
    }
    printf("text %s: %lld characters, %d distinct; unigram entropy %.4f nats per character (the loss of "
           "a model of character frequencies alone)\n", text_path, (long long)text.n, text.vocab,
           text.unigram_nats);
    printf("training charlm (width %d, %d heads, %d layers, context %d, %s attention) on %s in %s: %d steps, "
           "batch %d, adam lr %g, seed %llu\n", o.model.width, o.model.heads, o.model.layers, o.model.context,
           o.model.composed ? "composed" : "fused", backend, dg_precision_name(o.precision), o.steps, o.batch, lr,
           (unsigned long long)o.seed);
    curve_out co = {csv, backend, dg_precision_name(o.precision), text.unigram_nats};
    dg_lm_stats last;
    double first;
    dg_status st = bench_train_close(csv, out, name, dg_lm_train(be, &o, &text, on_eval, &co, &last, &first));
    if (st == DG_OK) {
        printf("first step loss %.6f; final held-out loss %.4f against the unigram entropy %.4f (%s) after %d "
               "steps (%.2f s of training) -> %s/%s.csv\n", first, last.val_loss, text.unigram_nats,
               last.val_loss < text.unigram_nats ? "below" : "NOT below", last.step, last.train_s, out, name);
    }
    dg_backend_free(be);
    dg_text_free(&text);
    return st == DG_OK ? 0 : 1;
}
