/* train.c: `bench train`: logistic regression or an MLP on Fashion-MNIST,
 * on the CPU, the GPU, data parallel over several GPUs or over MPI ranks
 * (train_mpi.h: a CPU or a GPU each), from the same seed (same initial weights, same
 * batches); per-epoch loss, test accuracy and time to stdout and CSV. */
#include "train/train.h"

#include <float.h>
#include <limits.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/backends.h"
#include "core/nn/cnn.h"
#include "core/nn/data_parallel.h"
#include "core/nn/mlp.h"
#include "core/nn/resnet.h"
#include "core/nn/trainer.h"
#include "core/onnx/onnx.h"
#include "profile/profile.h"
#include "train/train_charlm.h"
#include "train/train_csv.h"
#include "train/train_mpi.h"
#include "writers/csv.h"
#include "machine/env.h"
#include "cli/options.h"
#ifdef DG_HAVE_CUDA
#include "gpu_backend/gpu_backend.h"
#endif

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench train [options]\n"
            "\n"
            "  --model M         logreg | mlp | cnn | resnet18-cifar | charlm (default mlp); cnn: two\n"
            "                    conv-bn-relu-maxpool blocks, then two linear layers (core/nn/cnn.h);\n"
            "                    resnet18-cifar: ResNet-18 with the 3x3 stem on CIFAR-10 (needs --data);\n"
            "                    charlm: a character-level transformer on a text file (its own options:\n"
            "                    bench train --model charlm --help); FILE.onnx: an ONNX model\n"
            "                    (core/onnx/onnx.h) on Fashion-MNIST, or CIFAR-10 (--data) for 3x32x32 inputs\n"
            "  --widths W        MLP layer widths (default 784-256-100-10)\n"
            "  --backend B       cpu | gpu (default cpu)\n"
            "  --gpus N          data parallel over GPUs 0..N-1 (1 to 16, default 1; needs --backend gpu): --batch\n"
            "                    is the global batch, split evenly over the GPUs; file train-MODEL-gpuN[-copy].csv\n"
            "  --epochs N        (default 10)\n"
            "  --batch B         (default 128)\n"
            "  --optimizer O     sgd | momentum | adam (default adam)\n"
            "  --dtype P         fp32 | tf32 | bf16 | fp16 (default fp32): the step's precision policy; bf16 and\n"
            "                    fp16 cast every matmul's and convolution's operands (float32 masters,\n"
            "                    optimizer state, loss, batch norm), fp16 with dynamic loss scaling; tf32\n"
            "                    lets the GPU's matmuls use TF32\n"
            "  --lr X            (default: adam 1e-3, momentum 0.01, sgd 0.1)\n"
            "  --weight-decay X  L2 penalty added to every gradient as X w (default 0; 5e-4 is usual for\n"
            "                    resnet18-cifar)\n"
            "  --seed S          initial weights and shuffling (default 1)\n"
            "  --copy-batches    upload each batch from the host instead of gathering it from the data set\n"
            "                    uploaded once to the backend\n"
            "  --subset N        train on the first N examples only\n"
            "  --threads N       CPU threads\n"
            "  --data DIR        Fashion-MNIST folder (default " DG_FASHION_MNIST_DIR "), or for\n"
            "                    resnet18-cifar the folder of CIFAR-10's binary batches (data_batch_1.bin ...)\n"
            "  --out DIR         CSV folder (default reports/latest); file train-MODEL-BACKEND[-copy][-DTYPE].csv\n"
            "\n"
            "Under mpirun (or srun), one process per rank: each rank trains its slice of --batch, the global\n"
            "batch, on its CPU (gradients averaged as --allreduce says) or, with --backend gpu, on its local\n"
            "rank's GPU (by NCCL; no --gpus); --batch must be a multiple of the rank count (equal slices;\n"
            "otherwise refused at start). Every rank needs the same build and options (checked at start);\n"
            "rank 0 alone writes train-MODEL-BACKEND-mpiN.csv, whose rows time the slowest rank (the spread\n"
            "in the note) and whose metadata names every rank's host and device. A rank that fails ends\n"
            "every rank with its message and a non-zero exit.\n"
            "  --allreduce A     CPU ranks: overlapped (default: gradients in buckets of up to 1 MiB, each\n"
            "                    bucket's MPI_Iallreduce started as it fills while the backward goes on) or\n"
            "                    blocking (each gradient's MPI_Allreduce in its node; faster where the\n"
            "                    gradients make one bucket, as the default MLP's: docs/PERF.md)\n"
            "\n"
            "The training loss of an epoch is the mean of every step's loss; epoch time is wall time of the\n"
            "training steps with the backend synchronised (evaluation excluded); TF32 only under --dtype\n"
            "tf32. OpenMP's waiting threads sleep when the machine is loaded and spin otherwise\n"
            "(OMP_WAIT_POLICY wins).\n");
}

/* a usage error naming the option (what) and its value */
static int bad(const char *what, const char *arg) {
    return bench_usage_error("bench train", "bad %s '%.80s'", what, arg);
}

typedef struct epoch_out {
    FILE *csv;                /* rank 0's; NULL on the other ranks */
    const char *model, *backend, *opt, *dtype, *mode;
    int batch;
    double lr;
    unsigned long long seed;
    const bench_mpi *mpi;
    const char *exchange;     /* under MPI, how the ranks average: overlapped, blocking, nccl */
    double total_s;           /* under MPI: the sum of the slowest ranks' epochs */
    dg_status st;             /* a failed gathering of the ranks' times */
} epoch_out;

/* Under MPI every rank comes here after each epoch (the trainer's
 * collectives keep them in step): the epoch's time is the slowest rank's,
 * the least and most in the row's note. */
static void on_epoch(const dg_epoch_stats *s, void *arg) {
    epoch_out *e = arg;
    double epoch_s = s->epoch_s, total_s = s->total_s, least = epoch_s;
    int slowest = 0;
    char note[160] = "";
    if (e->mpi->on && e->st == DG_OK) {
        e->st = bench_mpi_spread(e->mpi, s->epoch_s, &least, &epoch_s, &slowest);
        total_s = e->total_s += epoch_s;
        snprintf(note, sizeof note, ",slowest rank %d; epoch_s over %d ranks %.3f..%.3f s; all-reduce %s", slowest,
                 e->mpi->ranks, least, epoch_s, e->exchange);
    }
    if (!e->csv) return;
    printf("epoch %2d  loss %.4f  test acc %.2f%%  epoch %.2f s  total %.2f s\n", s->epoch, s->train_loss,
           100 * s->test_acc, epoch_s, total_s);
    fflush(stdout);
    fprintf(e->csv, "%d,%s,%s,%s,%s,%s,%d,%g,%llu,%.6f,%.6f,%.6f,%.6f%s\n", s->epoch, e->model, e->backend, e->opt,
            e->dtype, e->mode, e->batch, e->lr, e->seed, s->train_loss, s->test_acc, epoch_s, total_s, note);
    fflush(e->csv);
}

/* frees the replicas' backends bes[0..n) (NULL ones skipped) */
static void close_replicas(dg_backend **bes, int n) {
    for (int i = 0; i < n; i++) dg_backend_free(bes[i]);
}

/* `--gpus n`, n >= 2: replicas 1..n-1 on devices 1..n-1 into bes[1..n)
 * (replica 0, on device 0, opens with the result file), before the data
 * set is read. 1, with the reason on stderr and nothing left open, where
 * fewer than n devices answer. */
static int open_replicas(int n, dg_backend **bes) {
#ifdef DG_HAVE_CUDA
    char why[512];
    if (dg_gpu_probe(why, sizeof why) != DG_GPU_PRESENT) {
        fprintf(stderr, "bench train: --gpus %d: %s\n", n, why);
        return 1;
    }
    int have = dg_gpu_device_count();
    if (n > have) {
        fprintf(stderr, "bench train: --gpus %d, but this machine has %d CUDA device%s\n", n, have,
                have == 1 ? "" : "s");
        return 1;
    }
    for (int i = 1; i < n; i++)
        if (dg_gpu_backend_new(&bes[i], &(dg_gpu_opts){.device = i}) != DG_OK) {
            fprintf(stderr, "bench train: gpu backend on device %d: %s\n", i, dg_last_error());
            close_replicas(bes, i);
            return 1;
        }
    return 0;
#else
    (void)bes;
    fprintf(stderr, "bench train: --gpus %d: built without CUDA: no CUDA device can be used\n", n);
    return 1;
#endif
}

/* Under MPI (m->on): the checks of the launch, then the same build and
 * configuration on every rank (config), every rank's host into hosts.
 * 0, or the exit status with the reason on stderr. */
static int start_ranks(const bench_mpi *m, const char *backend, bool gpus_given, int batch, const char *config,
                       char *hosts, size_t n) {
    if (!m->on) return 0;
    if (gpus_given)
        return bench_usage_error("bench train", "under MPI each rank drives one device: no --gpus (one rank per GPU, "
                                 "each on its local rank's)");
    if (batch % m->ranks)
        return bench_usage_error("bench train", "--batch %d does not split evenly over %d MPI ranks (each rank takes "
                                 "an equal slice of the global batch: make it a multiple of %d)", batch, m->ranks,
                                 m->ranks);
    char device[32] = "cpu";
    if (!strcmp(backend, "gpu")) snprintf(device, sizeof device, "gpu %d", m->local_rank);
    dg_status st = bench_mpi_agree(m, config);
    if (st == DG_OK) st = bench_mpi_hosts(m, device, hosts, n);
    if (st != DG_OK) {
        fprintf(stderr, "bench train: rank %d: %s\n", m->rank, dg_last_error());
        return 1;
    }
    return 0;
}

static int train_main(int argc, char **argv, const bench_mpi *mpi) {
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'M'}, {"widths", required_argument, NULL, 'W'},
        {"backend", required_argument, NULL, 'b'}, {"epochs", required_argument, NULL, 'e'},
        {"batch", required_argument, NULL, 'B'}, {"optimizer", required_argument, NULL, 'O'},
        {"dtype", required_argument, NULL, 'D'},
        {"lr", required_argument, NULL, 'l'}, {"weight-decay", required_argument, NULL, 'w'},
        {"seed", required_argument, NULL, 's'},
        {"copy-batches", no_argument, NULL, 'c'}, {"subset", required_argument, NULL, 'S'},
        {"threads", required_argument, NULL, 't'}, {"gpus", required_argument, NULL, 'g'},
        {"data", required_argument, NULL, 'd'}, {"allreduce", required_argument, NULL, 'A'},
        {"out", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    const char *model = "mlp", *widths = "784-256-100-10", *backend = "cpu", *data = NULL, *out = "reports/latest";
    dg_train_opts o = {.epochs = 10, .batch = 128, .seed = 1, .loss_every = 1};
    dg_optim_kind kind = DG_OPTIM_ADAM;
    double lr = NAN, weight_decay = 0;
    int threads = 0, gpus = 1, c;
    bool gpus_given = false, overlap = true, allreduce_given = false;
    long long v;
    optind = 0; /* glibc: start over */
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'M':
            if (strcmp(optarg, "mlp") && strcmp(optarg, "logreg") && strcmp(optarg, "cnn") &&
                strcmp(optarg, "resnet18-cifar") && !bench_prof_onnx_model(optarg))
                return bad("--model", optarg);
            model = optarg;
            break;
        case 'W': widths = optarg; break;
        case 'b': if (strcmp(optarg, "cpu") && strcmp(optarg, "gpu")) return bad("--backend", optarg); backend = optarg; break;
        case 'e': if (!bench_parse_long(optarg, 1, 10000, &v)) return bad("--epochs (1 to 10000)", optarg); o.epochs = (int)v; break;
        case 'B': if (!bench_parse_long(optarg, 1, 60000, &v)) return bad("--batch (1 to 60000)", optarg); o.batch = (int)v; break;
        case 'O': if (dg_optim_parse(optarg, &kind) != DG_OK) return bad("--optimizer", optarg); break;
        case 'D': if (dg_precision_parse(optarg, &o.precision) != DG_OK) return bad("--dtype (fp32, tf32, bf16 or fp16)", optarg); break;
        /* a rate that rounds to 0 or to a subnormal float would not train */
        case 'l': if (!bench_parse_double(optarg, FLT_MIN, 99.99, &lr)) return bad("--lr (a float in (0, 100))", optarg); break;
        case 'w': if (!bench_parse_double(optarg, 0, 1, &weight_decay)) return bad("--weight-decay (0 to 1)", optarg); break;
        case 's': if (!bench_parse_long(optarg, 0, LLONG_MAX, &v)) return bad("--seed (0 to 2^63-1)", optarg); o.seed = (uint64_t)v; break;
        case 'c': o.copy_batches = true; break;
        case 'S': if (!bench_parse_long(optarg, 1, INT_MAX, &v)) return bad("--subset", optarg); o.subset = (int)v; break;
        case 't': if (!bench_parse_long(optarg, 1, 1024, &v)) return bad("--threads (1 to 1024)", optarg); threads = (int)v; break;
        case 'g':
            if (!bench_parse_long(optarg, 1, DG_DP_MAX_REPLICAS, &v))
                return bench_usage_error("bench train", "bad --gpus (1 to %d) '%.80s'", DG_DP_MAX_REPLICAS, optarg);
            gpus = (int)v;
            gpus_given = true;
            break;
        case 'A':
            if (strcmp(optarg, "overlapped") && strcmp(optarg, "blocking"))
                return bad("--allreduce (overlapped or blocking)", optarg);
            overlap = !strcmp(optarg, "overlapped");
            allreduce_given = true;
            break;
        case 'd': if (!*optarg || strlen(optarg) > BENCH_MAX_PATH) return bad("--data", optarg); data = optarg; break;
        case 'o': if (!*optarg || strlen(optarg) > BENCH_MAX_PATH) return bad("--out", optarg); out = optarg; break;
        case 'h': usage(stdout); return 0;
        default: return bench_option_error("bench train", opts, c, argv);
        }
    }
    if (optind < argc) return bad("argument", argv[optind]);
    if (gpus_given && strcmp(backend, "gpu"))
        return bench_usage_error("bench train", "--gpus needs --backend gpu (the %s backend has no collectives)",
                                 backend);
    if (allreduce_given && (!mpi->on || strcmp(backend, "cpu")))
        return bench_usage_error("bench train", "--allreduce chooses how CPU ranks under MPI average their "
                                 "gradients: %s", mpi->on ? "GPU ranks average by NCCL" : "not launched by MPI");
    if (o.batch % gpus) /* the trainer would refuse it too, after the data set was read */
        return bench_usage_error("bench train", "--batch %d does not split evenly over --gpus %d", o.batch, gpus);
    dg_mlp_cfg cfg;
    dg_cnn_cfg cnn = dg_cnn_default();
    dg_resnet_cfg resnet = dg_resnet18_default(DG_RESNET_CIFAR);
    bool cifar = !strcmp(model, "resnet18-cifar");
    /* --model FILE.onnx: the file's model on the data set its input takes
     * (3x32x32: CIFAR-10 from --data; else Fashion-MNIST; the trainer
     * refuses a model whose examples or classes the data set lacks) */
    dg_onnx *onnx = NULL;
    char about[160];
    if (bench_prof_onnx_model(model)) {
        if (dg_onnx_load(model, NULL, &onnx) != DG_OK) {
            fprintf(stderr, "bench train: %s\n", dg_last_error());
            return 1;
        }
        cifar = dg_shape_numel(dg_onnx_example_shape(onnx)) == 3 * 32 * 32;
        if (cifar && !data) {
            dg_onnx_free(onnx);
            return bench_usage_error("bench train", "%s takes 3x32x32 examples: CIFAR-10, which no package installs "
                                     "(--data DIR)", model);
        }
        snprintf(about, sizeof about, "ONNX %s", dg_onnx_digest(onnx));
        widths = about;
        o.model = dg_onnx_model_new;
        o.model_cfg = onnx;
        model = bench_prof_onnx_model(model)->name; /* onnx-STEM: the file names' */
    } else if (cifar) {
        if (!data)
            return bench_usage_error("bench train", "--model resnet18-cifar needs CIFAR-10, which no package "
                                     "installs: download its binary version and pass --data DIR (the folder of "
                                     "data_batch_1.bin ... test_batch.bin)");
        o.model = dg_resnet18_new;
        o.model_cfg = &resnet;
        widths = "3x32x32, 3x3 stem, 11,173,962 parameters";
    } else if (!strcmp(model, "cnn")) {
        o.model = dg_cnn_new;
        o.model_cfg = &cnn;
        widths = "1x28x28, conv 32, 64, linear 128, 10";
    } else {
        if (!strcmp(model, "logreg")) widths = "784-10";
        if (dg_mlp_parse_widths(widths, &cfg) != DG_OK)
            return bench_usage_error("bench train", "%s", dg_last_error());
        o.model = dg_mlp_new;
        o.model_cfg = &cfg;
    }
    if (isnan(lr)) lr = kind == DG_OPTIM_ADAM ? 1e-3 : kind == DG_OPTIM_MOMENTUM ? 0.01 : 0.1;
    o.optim = dg_optim_default(kind, (float)lr);
    o.optim.weight_decay = (float)weight_decay;
    /* what shapes the training, compared over the ranks; not the paths nor
     * the threads, which may differ from host to host */
    char config[512], hosts[4096] = "";
    snprintf(config, sizeof config, "model %s widths %s batch %d epochs %d optimizer %s lr %.9g weight-decay %.9g "
             "seed %llu dtype %s subset %d copy %d ranks %d allreduce %d", model, widths, o.batch, o.epochs,
             dg_optim_name(kind), lr, weight_decay, (unsigned long long)o.seed,
             dg_precision_name(o.precision), o.subset, o.copy_batches, mpi->ranks, overlap);
    int started = start_ranks(mpi, backend, gpus_given, o.batch, config, hosts, sizeof hosts);
    if (started) return started;
    o.rank = mpi->rank;
    o.ranks = mpi->ranks;

    dg_backend *bes[DG_DP_MAX_REPLICAS] = {0};
    if (gpus > 1 && open_replicas(gpus, bes) != 0) {
        dg_onnx_free(onnx);
        return 1;
    }
    dg_dataset train, test;
    dg_status loaded = cifar ? dg_cifar10_load(data, "train", &train) : dg_dataset_load(data, "train", &train);
    if (loaded == DG_OK) {
        loaded = cifar ? dg_cifar10_load(data, "test", &test) : dg_dataset_load(data, "t10k", &test);
        if (loaded != DG_OK) dg_dataset_free(&train);
    }
    if (loaded != DG_OK) {
        fprintf(stderr, "bench train: %s\n", dg_last_error());
        close_replicas(bes, gpus);
        dg_onnx_free(onnx);
        return 1;
    }
    /* the backend's name in the file name and the rows: gpuN for N replicas */
    char label[24], name[64];
    if (mpi->on) snprintf(label, sizeof label, "%s-mpi%d", backend, mpi->ranks);
    else if (gpus > 1) snprintf(label, sizeof label, "gpu%d", gpus);
    else snprintf(label, sizeof label, "%s", backend);
    /* a precision other than fp32 names its file too, beside fp32's */
    snprintf(name, sizeof name, "train-%s-%s%s%s%s", model, label, o.copy_batches ? "-copy" : "",
             o.precision != DG_PREC_FP32 ? "-" : "", o.precision != DG_PREC_FP32 ? dg_precision_name(o.precision) : "");
    /* replica 0 on device 0, whose description goes into the metadata; under
     * MPI rank 0 alone writes, the others open their backend only */
    char ranks[4200];
    snprintf(ranks, sizeof ranks, "%d (MPI, one process each): %s", mpi->ranks, hosts);
    FILE *csv = NULL;
    dg_status opened = DG_OK;
#ifdef DG_HAVE_CUDA
    /* a GPU rank on its local rank's device (bench_train_open keeps it) */
    if (mpi->on && !strcmp(backend, "gpu") &&
        (opened = dg_gpu_backend_new(&bes[0], &(dg_gpu_opts){.device = mpi->local_rank})) != DG_OK)
        fprintf(stderr, "bench train: rank %d: gpu backend on device %d (its local rank): %s\n", mpi->rank,
                mpi->local_rank, dg_last_error());
#endif
    /* under MPI a note names the slowest rank and the spread (on_epoch) */
    char header[160];
    snprintf(header, sizeof header, "epoch,model,backend,optimizer,dtype,data,batch,lr,seed,train_loss,test_acc,"
             "epoch_s,total_s%s", mpi->on ? ",note" : "");
    if (opened == DG_OK && mpi->rank == 0)
        csv = bench_train_open(backend, threads, out, name, header, mpi->on ? ranks : NULL, argc, argv, &bes[0]);
    else if (opened == DG_OK && !bes[0] && (opened = bench_backend_open(backend, threads, &bes[0])) != DG_OK)
        fprintf(stderr, "bench train: rank %d: %s backend: %s\n", mpi->rank, backend, dg_last_error());
    if (opened == DG_OK && mpi->rank == 0 && !csv) opened = DG_ERR_INVALID; /* bench_train_open said why */
    if (mpi->on && opened == DG_OK && (opened = bench_mpi_join(mpi, bes[0], overlap)) != DG_OK)
        fprintf(stderr, "bench train: rank %d: %s\n", mpi->rank, dg_last_error());
    if (opened != DG_OK) {
        if (csv) bench_train_close(csv, out, name, opened);
        close_replicas(bes, gpus);
        dg_dataset_free(&train);
        dg_dataset_free(&test);
        dg_onnx_free(onnx);
        return 1;
    }
    epoch_out eo = {csv, model, label, dg_optim_name(kind), dg_precision_name(o.precision),
                    o.copy_batches ? "copy" : "resident", o.batch, lr, (unsigned long long)o.seed, mpi,
                    mpi->ranks < 2            ? "none (one rank)"
                    : strcmp(backend, "cpu") ? "nccl"
                    : overlap                ? "overlapped"
                                             : "blocking",
                    0, DG_OK};
    if (mpi->rank == 0)
        printf("training %s (%s) on %s in %s: %d epochs, batch %d, %s lr %g weight decay %g, seed %llu, data %s\n",
               model, widths, backend, eo.dtype, o.epochs, o.batch, dg_optim_name(kind), lr, weight_decay,
               (unsigned long long)o.seed, eo.mode);
    if (gpus > 1)
        printf("on %d GPUs (data parallel, global batch %d, %d per GPU)\n", gpus, o.batch, o.batch / gpus);
    if (mpi->on && mpi->rank == 0)
        printf("on %d MPI ranks (data parallel, global batch %d, %d per rank): %s\n", mpi->ranks, o.batch,
               o.batch / mpi->ranks, hosts);
    dg_epoch_stats last;
    dg_status st = dg_train_multi(bes, gpus, &o, &train, &test, on_epoch, &eo, &last);
    if (st == DG_OK && eo.st != DG_OK) st = eo.st;
    if (csv) st = bench_train_close(csv, out, name, st);
    else if (st != DG_OK) fprintf(stderr, "bench train: rank %d: %s\n", mpi->rank, dg_last_error());
    if (st == DG_OK && csv) {
        printf("final test accuracy %.2f%% after %d epochs (%.2f s of training) -> %s/%s.csv\n",
               100 * last.test_acc, last.epoch, mpi->on ? eo.total_s : last.total_s, out, name);
    }
    close_replicas(bes, gpus);
    dg_dataset_free(&train);
    dg_dataset_free(&test);
    dg_onnx_free(onnx); /* after the trainer's graphs, which read its weights */
    return st == DG_OK ? 0 : 1;
}

int bench_train_main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) /* the language model takes options of its own */
        if ((!strcmp(argv[i], "--model") && i + 1 < argc && !strcmp(argv[i + 1], "charlm")) ||
            !strcmp(argv[i], "--model=charlm")) {
            if (bench_mpi_launched(NULL)) /* each rank would train alone and write the same file */
                return bench_usage_error("bench train", "--model charlm trains in one process: not under MPI");
            return bench_train_charlm_main(argc, argv);
        }
    bench_mpi mpi;
    if (bench_mpi_start(&mpi)) return 1;
    return bench_mpi_end(&mpi, train_main(argc, argv, &mpi));
}
