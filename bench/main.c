/* main.c: the bench CLI: argument parsing and dispatch. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "list_ops.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: bench [options]\n"
            "\n"
            "  --list-ops        op coverage: forward/backward support per backend\n"
            "  -h, --help        this help\n");
}

int main(int argc, char **argv) {
    static const struct option opts[] = {
        {"list-ops", no_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c, list_ops = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'L': list_ops = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "bench: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (list_ops) return bench_list_ops(stdout);
    usage(stderr);
    return 2;
}
