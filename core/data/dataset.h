/* data.h: IDX files (the MNIST / Fashion-MNIST format), gzip-compressed or
 * not, read through zlib with strict validation, and the Fashion-MNIST
 * splits and CIFAR-10's binary batches (cifar.c) as float images in [0, 1]
 * and int32 labels. */
#ifndef DG_DATA_H
#define DG_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "../status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DG_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* One IDX file: unsigned bytes, 1 to 4 dimensions. */
typedef struct dg_idx {
    int      ndim;
    uint32_t dims[4];
    size_t   count;     /* product of dims */
    uint8_t *data;
} dg_idx;

/* Reads and validates path (magic 0x0000, type 0x08 = unsigned byte, 1-4
 * dims, body exactly the dims' product, nothing after it). A gzip file (one
 * member or several back to back) must pass its CRC and length checks and
 * have nothing after its last member. DG_ERR_IO with a message naming the
 * file and the problem. Memory grows with the bytes that arrive, not with
 * the size the header announces. */
dg_status dg_idx_read(const char *path, dg_idx *out);
void      dg_idx_free(dg_idx *idx);

typedef struct dg_dataset {
    int      n, rows, cols;   /* n images of rows x cols             */
    int      classes;         /* 10                                  */
    float   *x;               /* [n, rows*cols], pixel / 255         */
    int32_t *y;               /* [n], in [0, classes)                */
} dg_dataset;

/* split "train" or "t10k" from dir (NULL: DG_FASHION_MNIST_DIR): the
 * images and labels files must agree in count, images must be 3-D, labels
 * 1-D and below 10. DG_ERR_INVALID when a file's path would not fit 1023
 * bytes. */
dg_status dg_dataset_load(const char *dir, const char *split, dg_dataset *out);
void      dg_dataset_free(dg_dataset *d);

/* CIFAR-10, binary version: a batch file is records of 1 label byte (0 to 9)
 * then 3072 pixel bytes, the red, green and blue planes of 32x32 row-major.
 * Loaded as images [n, 3, 32, 32], channels first as the bytes come, pixel
 * / 255: in dg_dataset's terms rows = 3 * 32 (the planes stacked) and cols =
 * 32, so rows * cols is an example's 3072 features; a model takes them as
 * in_shape [3, 32, 32]. Freed with dg_dataset_free. */
#define DG_CIFAR10_CHANNELS     3
#define DG_CIFAR10_SIDE         32
#define DG_CIFAR10_RECORD_BYTES (1 + DG_CIFAR10_CHANNELS * DG_CIFAR10_SIDE * DG_CIFAR10_SIDE)

/* One batch file, plain or gzip. DG_ERR_IO with a message naming the file
 * for: an empty file, a size that is not a whole number of records, a final
 * record cut short (seen while reading: a gzip file's size says nothing), a
 * label above 9, more records than an int counts as floats, or a file that
 * cannot be opened or read; *out is then zeroed. */
dg_status dg_cifar10_load_file(const char *path, dg_dataset *out);

/* split "train" (data_batch_1.bin to data_batch_5.bin, in that order) or
 * "test" (test_batch.bin) from dir, the folder the binary version unpacks
 * to. Every file is looked for before any is read: DG_ERR_IO naming a
 * missing one and where the data set comes from. DG_ERR_INVALID for a NULL
 * dir or split, another split, or a path that would not fit 1023 bytes. */
dg_status dg_cifar10_load(const char *dir, const char *split, dg_dataset *out);

#ifdef __cplusplus
}
#endif
#endif
