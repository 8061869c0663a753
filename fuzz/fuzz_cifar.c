/* fuzz_cifar.c: dg_cifar10_load_file (bench train --data on CIFAR-10's
 * binary batches, plain or gzip: the stream layer tells them by their
 * magic) on any bytes. A success must hold n whole records: pixels in
 * [0, 1] and labels below 10; a failure nothing allocated and a message
 * naming the file. */
#include "core/data/dataset.h"
#include "core/status.h"
#include "fuzz_util.h"

static char path[600];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!*path) snprintf(path, sizeof path, "%s/data_batch_1.bin", fuzz_tmp_dir());
    fuzz_write(path, data, size);
    dg_dataset d;
    dg_status st = dg_cifar10_load_file(path, &d);
    if (st != DG_OK) {
        if (d.x || d.y || d.n) abort();
        fuzz_check_message(dg_last_error(), path);
        return 0;
    }
    if (d.n < 1 || d.classes != 10 || !d.x || !d.y) abort();
    for (size_t i = 0; i < (size_t)d.n * (DG_CIFAR10_RECORD_BYTES - 1); i++)
        if (!(d.x[i] >= 0.0f && d.x[i] <= 1.0f)) abort();
    for (int i = 0; i < d.n; i++)
        if (d.y[i] < 0 || d.y[i] >= 10) abort();
    dg_dataset_free(&d);
    return 0;
}
