#ifndef DG_BENCH_TRAIN_H
#define DG_BENCH_TRAIN_H

/* `bench train ...`: trains on Fashion-MNIST and writes per-epoch CSV;
 * `--model charlm` is handed to bench_train_charlm_main (train_charlm.h). */
int bench_train_main(int argc, char **argv);
#endif
