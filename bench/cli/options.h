/* options.h: the bench command line, parsed and checked before anything
 * runs: a bad value is exit code 2 with a message on stderr, nothing
 * written. Parsing has no other effect than printing (--help, --list), so
 * the fuzzer and the CLI table test can call it over and over. */
#ifndef DG_BENCH_OPTIONS_H
#define DG_BENCH_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

#include "runner/sweep.h"

#define BENCH_MAX_SWEEPS 16
#define BENCH_MAX_PATH   900 /* --out, --data: room for "/plot-data/NAME.gp" in a 1024-byte path */

/* what to run, besides the settings that go into bench_ctx */
typedef struct bench_choice {
    const sweep_def *sweeps[BENCH_MAX_SWEEPS];
    int              n_sweeps;
    bool             want_cpu, want_gpu;
} bench_choice;

/* the parse ended the work (help, a list, a usage error): its exit code */
#define BENCH_OPTS_RUN (-1)

/* Parses argv (the main form: no subcommand) into ctx's settings and *ch.
 * BENCH_OPTS_RUN: go on; otherwise the exit code: 0 after --help, --list,
 * --list-ops; 2 after a usage error (message on stderr). With --list and a
 * sweep (bench --list SWEEP, or --list --sweep LIST), BENCH_OPTS_RUN and
 * ctx->list set: the caller lists the sweeps' rows instead of running. */
int bench_parse_options(int argc, char **argv, bench_ctx *ctx, bench_choice *ch);

/* every setting at its default (what an empty command line gives) */
bench_ctx bench_default_ctx(void);

/* strict numbers: the whole string, no sign where lo >= 0, within [lo, hi] */
bool bench_parse_long(const char *s, long long lo, long long hi, long long *out);
bool bench_parse_double(const char *s, double lo, double hi, double *out);
struct option;
/* The usage error of getopt_long's answer c ('?' or ':'; the parse's
 * optstring starts with ':' so that a value that is missing reads ':'):
 * "missing value for --x", "--x takes no value" or "unknown option '...'",
 * from opts and argv[optind - 1]; returns 2. */
int  bench_option_error(const char *prog, const struct option *opts, int c, char *const *argv);
/* prints "PROG: <fmt, ...>\n(see PROG --help)" to stderr; returns 2 */
int  bench_usage_error(const char *prog, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
