#ifndef DG_BENCH_TRAIN_H
#define DG_BENCH_TRAIN_H
/* `bench train ...`: trains on Fashion-MNIST and writes per-epoch CSV. */
int bench_train_main(int argc, char **argv);
/* `bench train --model charlm ...` (train_charlm.c), its own options */
int bench_train_charlm_main(int argc, char **argv);
#endif
