/* wait_policy.h: how idle OpenMP threads wait (spin or sleep), chosen on
 * purpose and recorded.
 *
 * libgomp reads OMP_WAIT_POLICY once, in a constructor that runs when the
 * library is loaded, before main: setting it in main changes nothing. So
 * the bench decides, puts the choice into the environment and executes
 * itself again (reexec.h); the new image's libgomp then reads it. A
 * marker variable (BENCH_WAIT_POLICY_MARK, holding the description) tells
 * the second image that the choice is made and in force. */
#ifndef DG_BENCH_WAIT_POLICY_H
#define DG_BENCH_WAIT_POLICY_H

#include <stddef.h>

#define BENCH_WAIT_POLICY_MARK "DG_WAIT_POLICY_WHY"

/* choice: "auto", "active" or "passive". Where the environment already sets
 * OMP_WAIT_POLICY or GOMP_SPINCOUNT (the user's choice), or this image is
 * the one executed again, nothing changes: returns 0. Otherwise the policy
 * is decided ("auto": passive when bench_env_loaded says the machine is
 * loaded, else active) and set with the marker: returns 1, and the caller
 * executes the bench again (reexec.h). -1 for an unknown choice. why: the
 * policy and its reason as bench_wait_policy_describe words it, or what
 * was wrong with the choice. */
int bench_wait_policy_decide(const char *choice, char *why, size_t n);
/* The executed image could not start: the environment restored, and
 * `failure` said by bench_wait_policy_describe beside what libgomp keeps. */
void bench_wait_policy_undo(const char *failure);
/* The policy in force in this process and why, from the environment it
 * started with: "passive (auto: load 1.90 (1 min) on 2 online cores)",
 * "active (set by the user: OMP_WAIT_POLICY=active)", or libgomp's default
 * when nothing set it. */
void bench_wait_policy_describe(char *why, size_t n);

#endif
