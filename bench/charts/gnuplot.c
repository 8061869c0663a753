/* gnuplot.c: see gnuplot.h. posix_spawnp replaces system(): the arguments
 * go to gnuplot as they are, with no shell to split or expand them. */
#define _GNU_SOURCE /* posix_spawn_file_actions_addchdir_np (glibc 2.29+) */
#include "charts/gnuplot.h"

#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

bool bench_gnuplot_found(void) {
    const char *path = getenv("PATH");
    if (!path) return false;
    char dir[4096], exe[4200];
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        if (n > 0 && n < sizeof dir) {
            memcpy(dir, p, n);
            dir[n] = '\0';
            snprintf(exe, sizeof exe, "%s/gnuplot", dir);
            if (access(exe, X_OK) == 0) return true;
        }
        p += n;
        if (*p == ':') p++;
    }
    return false;
}

void bench_gnuplot_quote(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\'') fputs("''", f);
        else fputc(c < 0x20 || c == 0x7f ? '?' : c, f);
    }
    fputc('\'', f);
}

#define NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

bool bench_file_name_ok(const char *s) {
    size_t n = strlen(s);
    return n >= 1 && n <= 63 && s[0] != '.' && strspn(s, NAME_CHARS) == n;
}

void bench_gnuplot_word(FILE *f, const char *s) {
    if (!*s) fputc('-', f);
    for (; *s; s++) fputc(strchr(NAME_CHARS "+:/()[]@=", *s) ? *s : '_', f);
}

/* Names relative to the result folder that the -e command line quotes
 * without escaping: components of NAME_CHARS joined by '/', none empty,
 * "." or "..": nothing written outside the folder. */
static bool plain_name(const char *s) {
    for (;;) {
        size_t n = strcspn(s, "/");
        if (n == 0 || strspn(s, NAME_CHARS) != n || (n == 1 && s[0] == '.') || (n == 2 && !strncmp(s, "..", 2)))
            return false;
        if (!s[n]) return true;
        s += n + 1;
    }
}

int bench_gnuplot_run(const char *dir, const char *script, const char *chart) {
    if (!plain_name(script) || !plain_name(chart)) {
        fprintf(stderr, "bench plot: refusing chart name '%s' / script '%s'\n", chart, script);
        return 1;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "set terminal pngcairo size 1000,600 noenhanced; set output '%s.png'; load '%s'; "
             "set terminal svg size 1000,600 noenhanced; set output '%s.svg'; replot",
             chart, script, chart);
    char *argv[] = {"gnuplot", "-e", cmd, NULL};
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa)) return 1;
    /* gnuplot's messages go to stderr, never into bench's stdout */
    int rc = posix_spawn_file_actions_addchdir_np(&fa, dir);
    if (!rc) rc = posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
    pid_t pid;
    if (!rc) rc = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) {
        fprintf(stderr, "bench plot: cannot run gnuplot: %s\n", strerror(rc));
        return 1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "bench plot: waiting for gnuplot: %s\n", strerror(errno));
            return 1;
        }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    /* a chdir failure in the child shows as exit 127 */
    fprintf(stderr, "bench plot: gnuplot failed on %s/%s (%s %d)\n", dir, script,
            WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return 1;
}
