/* fuzz_dataset.c: dg_dataset_load over a folder that holds one split whose
 * two files come from the input:
 *   byte 0     bit 0: the images file is named .gz, bit 1: the labels file
 *              (the names only: the reader tells gzip by its magic)
 *   bytes 1-2  the images file's length, little-endian (cut to what is left)
 *   then       the images file, then the labels file.
 * A success must hold n*rows*cols pixels in [0, 1] and labels below 10; a
 * failure must leave nothing allocated and a message. */
#include <stdbool.h>

#include "core/data/dataset.h"
#include "fuzz_util.h"

static const char *const names[4] = {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz",
                                     "train-labels-idx1-ubyte", "train-labels-idx1-ubyte.gz"};

/* file 0 (images) or 1 (labels) under its plain or .gz name; the other
 * name is removed: the reader prefers .gz, so no earlier input may stay */
static void put(int file, bool gz, const uint8_t *data, size_t n) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", fuzz_tmp_dir(), names[2 * file + !gz]);
    unlink(path);
    snprintf(path, sizeof path, "%s/%s", fuzz_tmp_dir(), names[2 * file + gz]);
    fuzz_write(path, data, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    int flags = data[0];
    size_t split = (size_t)data[1] | (size_t)data[2] << 8;
    data += 3;
    size -= 3;
    if (split > size) split = size;
    put(0, flags & 1, data, split);
    put(1, flags & 2, data + split, size - split);
    dg_dataset d;
    dg_status st = dg_dataset_load(fuzz_tmp_dir(), "train", &d);
    if (st != DG_OK) {
        if ((st != DG_ERR_IO && st != DG_ERR_OOM) || d.x || d.y || !*dg_last_error()) abort();
        return 0;
    }
    if (d.n < 1 || d.rows < 1 || d.cols < 1 || d.classes != 10 || !d.x || !d.y) abort();
    for (size_t i = 0; i < (size_t)d.n * (size_t)d.rows * (size_t)d.cols; i++)
        if (!(d.x[i] >= 0.0f && d.x[i] <= 1.0f)) abort();
    for (int i = 0; i < d.n; i++)
        if (d.y[i] < 0 || d.y[i] >= d.classes) abort();
    dg_dataset_free(&d);
    return 0;
}
