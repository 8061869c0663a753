#ifndef DG_BENCH_TRAIN_CHARLM_H
#define DG_BENCH_TRAIN_CHARLM_H

/* `bench train --model charlm ...` (train_charlm.c), its own options;
 * bench_train_main hands it the whole command line. */
int bench_train_charlm_main(int argc, char **argv);
#endif
