/* data.h: IDX files (the MNIST / Fashion-MNIST format), gzip-compressed or
 * not, read through zlib with strict validation, and the Fashion-MNIST
 * splits as float images in [0, 1] and int32 labels. */
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

#ifdef __cplusplus
}
#endif
#endif
