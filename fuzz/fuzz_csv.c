/* fuzz_csv.c: bench_csv_read (bench plot and bench compare read result
 * folders with it) on any bytes, through its public API only. A failure
 * must return no rows and a message naming the file; a success, rows whose
 * text fields are terminated strings. */
#include "writers/csv.h"
#include "core/status.h"
#include "fuzz_util.h"

static char path[600];

/* a text field must end inside its array, whatever the input held */
#define TERMINATED(a) (memchr((a), '\0', sizeof(a)) != NULL)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!*path) snprintf(path, sizeof path, "%s/in.csv", fuzz_tmp_dir());
    fuzz_write(path, data, size);
    int n = -1;
    csv_rec *r = bench_csv_read(path, &n);
    if (!r) {
        if (n != 0) abort();
        fuzz_check_message(dg_last_error(), path);
        return 0;
    }
    if (n < 0) abort();
    for (int i = 0; i < n; i++)
        if (!TERMINATED(r[i].sweep) || !TERMINATED(r[i].name) || !TERMINATED(r[i].impl) ||
            !TERMINATED(r[i].backend) || !TERMINATED(r[i].status))
            abort();
    free(r);
    return 0;
}
