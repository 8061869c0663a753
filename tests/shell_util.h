/* shell_util.h: files, folders and shell commands for the suites that run
 * the bench CLI (test_bench, test_csv). Each helper fails the test on an
 * I/O error instead of returning one. */
#ifndef DG_TEST_SHELL_UTIL_H
#define DG_TEST_SHELL_UTIL_H

#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* runs `cmd` with stderr merged into stdout; its exit code; the output into
 * out (n bytes at most, NUL-terminated) when out is not NULL */
static inline int sh(const char *cmd, char *out, size_t n) {
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    cr_assert_not_null(p);
    size_t got = 0, r;
    char buf[4096];
    while ((r = fread(buf, 1, sizeof buf, p)) > 0)
        if (out && got + 1 < n) {
            size_t k = r < n - 1 - got ? r : n - 1 - got;
            memcpy(out + got, buf, k);
            got += k;
        }
    if (out) out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* the whole file, NUL-terminated; the caller frees it */
static inline char *read_file(const char *path) {
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert_not_null(s);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

#ifdef DG_BENCH_PATH
/* `bench plot dir` (asserted to exit 0), then dir/summary.md's text; the
 * caller frees it */
static inline char *plot_summary(const char *dir) {
    char cmd[1024], out[8192], path[1024];
    snprintf(cmd, sizeof cmd, "%s plot %s", DG_BENCH_PATH, dir);
    cr_assert_eq(sh(cmd, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/summary.md", dir);
    return read_file(path);
}
#endif

static inline void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* dir: a mkdtemp template ("/tmp/dg-x-XXXXXX"), replaced by the folder made */
static inline void tmp_dir(char *dir) { cr_assert_not_null(mkdtemp(dir), "mkdtemp %s", dir); }

static inline void remove_dir(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* A forked child whose stdout goes to a temporary file, so a test can run
 * code that may execute another program (a re-exec) and read what came
 * out: child_capture_fork returns true in the child (stdout redirected; it
 * ends with _exit), false in the parent, which then calls
 * child_capture_finish: the child must exit 0, and what it printed lands
 * in out. */
typedef struct child_capture {
    char  path[32];
    int   fd;
    pid_t pid;
} child_capture;

static inline bool child_capture_fork(child_capture *c) {
    snprintf(c->path, sizeof c->path, "/tmp/dg-child-XXXXXX");
    c->fd = mkstemp(c->path);
    cr_assert_geq(c->fd, 0, "mkstemp: %s", strerror(errno));
    fflush(NULL);
    c->pid = fork();
    cr_assert_neq(c->pid, -1, "fork: %s", strerror(errno));
    if (c->pid == 0) dup2(c->fd, STDOUT_FILENO);
    return c->pid == 0;
}

static inline void child_capture_finish(child_capture *c, char *out, size_t n) {
    int st;
    cr_assert_eq(waitpid(c->pid, &st, 0), c->pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    char *text = read_file(c->path);
    snprintf(out, n, "%s", text);
    free(text);
    close(c->fd);
    remove(c->path);
}

/* Starts argv[0] with argv, no shell in between (the arguments reach it as
 * they are), inside folder cwd, stdout and stderr into the files out_path
 * and err_path. */
static inline pid_t spawn_in(const char *cwd, char *const argv[], const char *out_path, const char *err_path) {
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1, "fork: %s", strerror(errno));
    if (pid == 0) { /* the child: only calls that are safe after fork, then exec */
        int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0 || err < 0 || chdir(cwd) || dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* the exit code of pid (128 + signal when a signal ended it); -1 when it was
 * still running after timeout_s seconds (it is then killed) */
static inline int wait_exit(pid_t pid, double timeout_s) {
    struct timespec nap = {0, 20 * 1000 * 1000};
    for (double waited = 0; waited < timeout_s; waited += 0.02) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        cr_assert_neq(r, -1, "waitpid: %s", strerror(errno));
        if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        nanosleep(&nap, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* runs the bench with args (NULL-terminated) inside cwd; its exit code, the
 * stdout and stderr text into out and err (4 KiB each at most) */
static inline int run_bench(const char *cwd, const char *const *args, char *out, char *err, double timeout_s) {
    char *argv[32] = {DG_BENCH_PATH};
    int n = 1;
    for (; args[n - 1] && n < 31; n++) argv[n] = (char *)args[n - 1];
    argv[n] = NULL;
    char out_path[] = "/tmp/dg-out-XXXXXX", err_path[] = "/tmp/dg-err-XXXXXX";
    int fo = mkstemp(out_path), fe = mkstemp(err_path);
    cr_assert(fo >= 0 && fe >= 0, "mkstemp: %s", strerror(errno));
    close(fo);
    close(fe);
    int rc = wait_exit(spawn_in(cwd, argv, out_path, err_path), timeout_s);
    char *o = read_file(out_path), *e = read_file(err_path);
    snprintf(out, 4096, "%s", o);
    snprintf(err, 4096, "%s", e);
    free(o);
    free(e);
    remove(out_path);
    remove(err_path);
    return rc;
}

#endif
