/* precisions.c: the run's precision axis (--dtype): parsed into the
 * context, read by the runner, and the precisions a sweep has no rows in
 * said once as it ends. */
#include <stdio.h>
#include <string.h>

#include "runner/sweep.h"

int bench_precisions(const bench_ctx *ctx, dg_precision out[DG_PREC_COUNT]) {
    if (ctx->n_precisions <= 0) {
        out[0] = DG_PREC_FP32;
        return 1;
    }
    memcpy(out, ctx->precisions, (size_t)ctx->n_precisions * sizeof *out);
    return ctx->n_precisions;
}

dg_status bench_parse_precisions(const char *spec, bench_ctx *ctx) {
    char buf[64];
    if (strlen(spec) >= sizeof buf) return dg_fail(DG_ERR_INVALID, "--dtype is longer than %zu characters", sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", spec);
    ctx->n_precisions = 0;
    if (!strcmp(buf, "all")) {
        for (int p = 0; p < DG_PREC_COUNT; p++) ctx->precisions[ctx->n_precisions++] = (dg_precision)p;
        return DG_OK;
    }
    for (char *p = buf, *tok; (tok = strsep(&p, ",")) != NULL;) {
        dg_precision prec;
        if (dg_precision_parse(tok, &prec) != DG_OK)
            return dg_fail(DG_ERR_INVALID, "unknown precision '%s' in --dtype (fp32, tf32, bf16, fp16, or all)", tok);
        for (int i = 0; i < ctx->n_precisions; i++) /* each at most once: DG_PREC_COUNT entries hold any list */
            if (ctx->precisions[i] == prec) return dg_fail(DG_ERR_INVALID, "precision '%s' given twice in --dtype", tok);
        ctx->precisions[ctx->n_precisions++] = prec;
    }
    return DG_OK;
}

void bench_note_precisions(const bench_ctx *ctx) {
    dg_precision asked[DG_PREC_COUNT];
    int n = bench_precisions(ctx, asked);
    char missing[64] = "", has[64] = "";
    for (int i = 0; i < n; i++)
        if (!(ctx->precisions_run & 1u << asked[i]))
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s", *missing ? ", " : "",
                     dg_precision_name(asked[i]));
    for (int p = 0; p < DG_PREC_COUNT; p++)
        if (ctx->precisions_run & 1u << p)
            snprintf(has + strlen(has), sizeof has - strlen(has), "%s%s", *has ? ", " : "",
                     dg_precision_name((dg_precision)p));
    if (*missing && *has)
        fprintf(stderr, "bench: %s: no rows in %s (--dtype): the sweep runs in %s%s%s\n", ctx->sweep, missing, has,
                ctx->precisions_why ? ": " : "", ctx->precisions_why ? ctx->precisions_why : "");
}
