/* wait_policy.h: how idle OpenMP threads wait (spin or sleep), chosen on
 * purpose and recorded.
 *
 * libgomp reads OMP_WAIT_POLICY once, in a constructor that runs when the
 * library is loaded, before main: setting it in main changes nothing. So
 * the bench decides, puts the choice into the environment and executes
 * itself again; the new image's libgomp then reads it. A marker variable
 * (BENCH_WAIT_POLICY_MARK, holding the description) tells the second image
 * that the choice is made and in force. */
#ifndef DG_BENCH_WAIT_POLICY_H
#define DG_BENCH_WAIT_POLICY_H

#include <stddef.h>

#define BENCH_WAIT_POLICY_MARK "DG_WAIT_POLICY_WHY"

/* choice: "auto", "active" or "passive". Where the environment already sets
 * OMP_WAIT_POLICY or GOMP_SPINCOUNT (the user's choice), or this image is
 * the one executed again, nothing changes. Otherwise the policy is decided
 * ("auto": passive when bench_env_loaded says the machine is loaded, else
 * active), set, and /proc/self/exe is executed with argv (argv[argc] must
 * be NULL, as main's is): on success the call does not return.
 * Returns 0 with why = the policy in force and its reason, as
 * bench_wait_policy_describe words it; 1 when the new image could not be
 * executed (why: the warning, and the policy libgomp keeps; the
 * environment is restored); -1 for an unknown choice (why says so). */
int bench_wait_policy_apply(const char *choice, char **argv, char *why, size_t n);
/* the same, executing `exe` instead of /proc/self/exe (tests run a small
 * program that prints what it was given) */
int bench_wait_policy_apply_exe(const char *choice, const char *exe, char **argv, char *why, size_t n);
/* The policy in force in this process and why, from the environment it
 * started with: "passive (auto: load 1.90 (1 min) on 2 online cores)",
 * "active (set by the user: OMP_WAIT_POLICY=active)", or libgomp's default
 * when nothing set it. */
void bench_wait_policy_describe(char *why, size_t n);

#endif
