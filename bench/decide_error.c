/*
 * The decision engine's error rates (issue 11's benchmark): st_rules_decide_stage driven with
 * synthetic repeats, the way the campaign runner drives it (src/campaign/runner.c): passes of one
 * repeat per arm and the baseline, looks from repeats.min on, another pass only for the arms whose
 * result says `more`, on_best_of arms after the plain ones, escalation and the final choice by
 * st_rules_escalate and st_rules_choose.
 *
 * Noise: every repeat of a metric is true value x B x exp(s Z), Z standard normal, s chosen so a
 * repeat's coefficient of variation is the cell's CV (s^2 = log(1 + CV^2)); B is the arm's
 * bring-up factor, lognormal with the cell's bring-up spread as its CV, drawn anew for every
 * bring-up (interleaved order: each pass brings every arm up again; blocked: the first min
 * repeats share one bring-up, each later pass is a new one). Metrics are independent.
 *
 * Shapes: "single" (one arm against the baseline, ranked metrics only); "seed000" (arms mtp1 and
 * mtp3, then batch1024 on the best of them, ranked decode speeds, two TTFT guards at 10%,
 * escalation best, the full stage on the escalated arm); "seed003" (four arms, ranked throughputs,
 * a 25% guard, escalation promoted, the full stage on every promoted arm). In the campaign shapes
 * the effect is carried by one arm (mtp3, resp. tp4pp2) on every ranked metric; the others are
 * identical to the baseline, and batch1024 changes nothing on top of its winner.
 *
 * Counted per cell: promote (single: the arm promoted; campaigns: a non-baseline arm chosen),
 * reject (single: the arm rejected; campaigns: the effect arm rejected in screening), the mean
 * repeats of the effect arm and of the baseline in screening. With --check the program exits 1
 * when a null or +2% cell's promotion rate exceeds 5% by more than three standard errors of the
 * trial count (README: `build/bench/decide_error`; CI runs `--null-only --trials 300 --check`,
 * the cells with no effect or +2% only).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "campaign/rules.h"

#define MAXA 6  /* arms, the baseline included */
#define MAXM 6  /* ranked metrics + guards */
#define MAXN 64 /* repeats */

enum shape { SINGLE, SEED000, SEED003 };

/* The repeats' design of every metric: looks from g_min_n to g_max_n (--repeats MIN:MAX). */
static uint32_t g_min_n = 3, g_max_n = 12;

struct cell {
    enum shape shape;
    int n_ranked;
    double cv, spread, effect;
    int blocked;
};

struct world {
    const struct cell *c;
    struct st_rng rng;
    struct st_rules_designs *designs; /* borrowed: g_designs */
    uint32_t min_n, max_n;
    int n_guards;
    double guard_max;
};

/* One arm's repeats in one stage. truth: its true multiplier on each ranked metric. */
struct sarm {
    double truth;
    double v[MAXM][MAXN];
    size_t n;
    double bup; /* the current bring-up's factor */
    int up_id;  /* the bring-up that factor belongs to */
    struct st_rules_samples s[MAXM];
};

static const char *const metric_names[MAXM] = {"m1", "m2", "m3", "g1", "g2", "g3"};

static double normal(struct st_rng *r)
{
    /* Box-Muller: two uniforms in (0, 1]. */
    double u1 = 1.0 - st_rng_unit(r), u2 = st_rng_unit(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static double lognormal(struct st_rng *r, double cv)
{
    if (cv <= 0) {
        return 1.0;
    }
    double s = sqrt(log1p(cv * cv));
    return exp(s * normal(r) - 0.5 * s * s);
}

/* The bring-up a pass runs on: a new one per pass, or the first min passes on one (blocked). */
static int up_of(const struct world *w, size_t pass)
{
    return w->c->blocked && pass < w->min_n ? 0 : (int)pass;
}

/* Adds repeat number a->n (pass a->n) to arm a. */
static void sample(struct world *w, struct sarm *a)
{
    size_t pass = a->n;
    int up = up_of(w, pass);
    if (pass == 0 || up != a->up_id) {
        a->bup = lognormal(&w->rng, w->c->spread);
        a->up_id = up;
    }
    int nm = w->c->n_ranked;
    for (int m = 0; m < nm + w->n_guards; m++) {
        double truth = m < nm ? 100.0 * a->truth : 10.0; /* guards: latencies, always null */
        /* A slower bring-up lowers throughput and raises latency. */
        double b = m < nm ? a->bup : 1.0 / a->bup;
        a->v[m][pass] = truth * b * lognormal(&w->rng, w->c->cv);
    }
    a->n++;
}

static void views(const struct world *w, struct sarm *a, struct st_rules_arm *out, const char *nm)
{
    int n = w->c->n_ranked + w->n_guards;
    for (int m = 0; m < n; m++) {
        a->s[m] = (struct st_rules_samples){metric_names[m], a->v[m], a->n};
    }
    *out = (struct st_rules_arm){nm, a->s, (size_t)n, NULL, 0};
}

struct cfgs {
    struct st_rules_metric metrics[MAXM];
    struct st_rules_guard guards[MAXM];
    struct st_rules_cfg cfg;
};

static void make_cfg(struct world *w, struct cfgs *k)
{
    memset(k, 0, sizeof(*k));
    int nm = w->c->n_ranked;
    for (int m = 0; m < nm; m++) {
        k->metrics[m] = (struct st_rules_metric){
            metric_names[m], ST_RULES_HIGHER, ST_RULES_MEDIAN, w->min_n, w->max_n, 1.0, 0};
    }
    for (int g = 0; g < w->n_guards; g++) {
        k->guards[g] = (struct st_rules_guard){metric_names[nm + g],
                                               ST_RULES_LOWER,
                                               ST_RULES_MEDIAN,
                                               w->guard_max,
                                               w->min_n,
                                               w->max_n,
                                               0};
    }
    k->cfg = (struct st_rules_cfg){.noise = 0.05,
                                   .alpha = 0.05,
                                   .metrics = k->metrics,
                                   .n_metrics = (size_t)nm,
                                   .guards = k->guards,
                                   .n_guards = (size_t)w->n_guards,
                                   .designs = w->designs};
}

static void decide(struct world *w, struct cfgs *k, struct sarm *base, struct sarm *arms,
                   const int *idx, size_t n, size_t family, struct st_rules_result *res)
{
    struct st_rules_arm b, a[MAXA];
    views(w, base, &b, "baseline");
    for (size_t i = 0; i < n; i++) {
        views(w, &arms[idx[i]], &a[i], metric_names[0]);
    }
    char err[256];
    if (st_rules_decide_stage(&k->cfg, &b, a, n, family, res, err, sizeof(err)) != 0) {
        fprintf(stderr, "decide_error: %s\n", err);
        exit(2);
    }
}

/*
 * One phase of a stage over arms idx[0..n): passes until no arm asks for more (the baseline
 * samples a pass only when it does not have it yet). all/n_all: every arm decided so far, whose
 * results (res, indexed like arms) stay frozen unless in idx. Returns nothing; res filled.
 */
static void phase(struct world *w, struct cfgs *k, struct sarm *base, struct sarm *arms,
                  const int *idx, size_t n, const int *all, size_t n_all, size_t family,
                  struct st_rules_result *res)
{
    int go[MAXA];
    for (size_t i = 0; i < n; i++) {
        go[i] = 1;
    }
    for (size_t pass = 0; pass < w->max_n; pass++) {
        int any = 0;
        for (size_t i = 0; i < n; i++) {
            any |= go[i];
        }
        if (!any) {
            break;
        }
        if (base->n <= pass) {
            sample(w, base);
        }
        for (size_t i = 0; i < n; i++) {
            if (go[i]) {
                sample(w, &arms[idx[i]]);
            }
        }
        if (pass + 1 < w->min_n) {
            continue;
        }
        struct st_rules_result tmp[MAXA];
        decide(w, k, base, arms, all, n_all, family, tmp);
        for (size_t i = 0; i < n; i++) {
            for (size_t j = 0; j < n_all; j++) {
                if (all[j] == idx[i] && go[i]) {
                    res[idx[i]] = tmp[j];
                    go[i] = tmp[j].more;
                }
            }
        }
    }
}

struct outcome {
    int promoted; /* single: promoted; campaigns: a non-baseline arm chosen */
    int good;     /* the choice is truly better than the baseline */
    int rejected; /* the effect arm rejected (in screening) */
    size_t n_arm, n_base;
};

static void trial_single(struct world *w, struct outcome *o)
{
    struct cfgs k;
    make_cfg(w, &k);
    struct sarm arms[2];
    memset(arms, 0, sizeof(arms));
    arms[0].truth = 1;
    arms[1].truth = 1 + w->c->effect;
    struct st_rules_result res[2];
    memset(res, 0, sizeof(res));
    int idx[1] = {1};
    phase(w, &k, &arms[0], arms, idx, 1, idx, 1, 1, res);
    o->promoted = res[1].verdict == ST_RULES_PROMOTE;
    o->good = o->promoted && w->c->effect > 0.05;
    o->rejected = res[1].verdict == ST_RULES_REJECT;
    o->n_arm = arms[1].n;
    o->n_base = arms[0].n;
}

/* The campaign shapes. Arm 0 is the baseline; effect_arm carries the effect. */
static void trial_campaign(struct world *w, struct outcome *o)
{
    struct cfgs k;
    make_cfg(w, &k);
    int seed0 = w->c->shape == SEED000;
    size_t n_plain = seed0 ? 2 : 4, n_arms = seed0 ? 4 : 5; /* incl. the baseline */
    int effect_arm = seed0 ? 2 : 1;
    double truth[MAXA];
    for (size_t a = 0; a < n_arms; a++) {
        truth[a] = a == (size_t)effect_arm ? 1 + w->c->effect : 1;
    }
    struct sarm scr[MAXA];
    memset(scr, 0, sizeof(scr));
    for (size_t a = 0; a < n_arms; a++) {
        scr[a].truth = truth[a];
    }
    struct st_rules_result res[MAXA];
    memset(res, 0, sizeof(res));
    int plain[MAXA], all[MAXA];
    for (size_t i = 0; i < n_plain; i++) {
        plain[i] = (int)i + 1;
        all[i] = (int)i + 1;
    }
    size_t family = n_arms - 1;
    phase(w, &k, &scr[0], scr, plain, n_plain, all, n_plain, family, res);
    size_t n_all = n_plain;
    if (seed0) {
        /* batch1024 on the best of baseline, mtp1, mtp3: the same truth as the winner. */
        struct st_rules_result pr[MAXA];
        for (size_t i = 0; i < n_plain; i++) {
            pr[i] = res[i + 1];
        }
        int win = st_rules_choose(pr, n_plain);
        int obo = 3;
        scr[obo].truth = win >= 0 ? truth[win + 1] : 1;
        all[n_all++] = obo;
        int idx[1] = {obo};
        phase(w, &k, &scr[0], scr, idx, 1, all, n_all, family, res);
    }
    o->rejected = res[effect_arm].verdict == ST_RULES_REJECT;
    o->n_arm = scr[effect_arm].n;
    o->n_base = scr[0].n;
    /* Escalation. */
    struct st_rules_result sres[MAXA];
    for (size_t i = 0; i + 1 < n_arms; i++) {
        sres[i] = res[i + 1];
    }
    unsigned char go[MAXA] = {0};
    size_t n_go = st_rules_escalate(seed0 ? ST_RULES_ESCALATE_BEST : ST_RULES_ESCALATE_PROMOTED,
                                    sres, n_arms - 1, go);
    o->promoted = 0;
    o->good = 0;
    if (n_go == 0) {
        return;
    }
    struct sarm full[MAXA];
    memset(full, 0, sizeof(full));
    full[0].truth = 1;
    int fidx[MAXA];
    size_t nf = 0;
    for (size_t i = 0; i + 1 < n_arms; i++) {
        if (go[i]) {
            full[i + 1].truth = scr[i + 1].truth;
            fidx[nf++] = (int)i + 1;
        }
    }
    struct st_rules_result fres[MAXA];
    memset(fres, 0, sizeof(fres));
    phase(w, &k, &full[0], full, fidx, nf, fidx, nf, nf, fres);
    struct st_rules_result fr[MAXA];
    for (size_t i = 0; i < nf; i++) {
        fr[i] = fres[fidx[i]];
    }
    int pick = st_rules_choose(fr, nf);
    if (pick >= 0) {
        o->promoted = 1;
        o->good = full[fidx[pick]].truth > 1.05;
    }
}

struct tally {
    long promoted, good, rejected, trials;
    double n_arm, n_base;
};

/* One cache of sequential designs for every cell (a design takes about 0.15 s to prepare). */
static struct st_rules_designs g_designs;

static void run_cell(const struct cell *c, long trials, uint64_t seed, struct tally *t)
{
    struct world w;
    memset(&w, 0, sizeof(w));
    w.designs = &g_designs;
    w.c = c;
    w.min_n = g_min_n;
    w.max_n = g_max_n;
    w.n_guards = c->shape == SEED000 ? 2 : c->shape == SEED003 ? 1 : 0;
    w.guard_max = c->shape == SEED003 ? 0.25 : 0.10;
    st_rng_seed(&w.rng, seed);
    memset(t, 0, sizeof(*t));
    for (long i = 0; i < trials; i++) {
        struct outcome o;
        memset(&o, 0, sizeof(o));
        if (c->shape == SINGLE) {
            trial_single(&w, &o);
        } else {
            trial_campaign(&w, &o);
        }
        t->promoted += o.promoted;
        t->good += o.good;
        t->rejected += o.rejected;
        t->n_arm += (double)o.n_arm;
        t->n_base += (double)o.n_base;
        t->trials++;
    }
}

static const char *shape_name(enum shape s)
{
    return s == SINGLE ? "single" : s == SEED000 ? "seed000" : "seed003";
}

static void usage(void)
{
    fprintf(stderr,
            "usage: decide_error [--trials N] [--seed S] [--shape single|seed000|seed003]"
            " [--metrics 1|3] [--order interleaved|blocked] [--repeats MIN:MAX] [--null-only]"
            " [--check]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    long trials = 10000;
    uint64_t seed = 11;
    int check = 0, only_shape = -1, only_metrics = 0, blocked = 0, null_only = 0, header = 1;
    double only_cv = -1, only_spread = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--trials") == 0 && i + 1 < argc) {
            trials = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
            const char *s = argv[++i];
            only_shape = strcmp(s, "single") == 0    ? SINGLE
                         : strcmp(s, "seed000") == 0 ? SEED000
                         : strcmp(s, "seed003") == 0 ? SEED003
                                                     : -2;
            if (only_shape == -2) {
                usage();
            }
        } else if (strcmp(argv[i], "--metrics") == 0 && i + 1 < argc) {
            only_metrics = (int)strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--order") == 0 && i + 1 < argc) {
            blocked = strcmp(argv[++i], "blocked") == 0;
        } else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
            unsigned lo = 0, hi = 0;
            if (sscanf(argv[++i], "%u:%u", &lo, &hi) != 2 || lo < 2 || hi < lo || hi >= MAXN) {
                usage();
            }
            g_min_n = lo;
            g_max_n = hi;
        } else if (strcmp(argv[i], "--check") == 0) {
            check = 1;
        } else if (strcmp(argv[i], "--null-only") == 0) {
            null_only = 1;
        } else if (strcmp(argv[i], "--cv") == 0 && i + 1 < argc) {
            only_cv = strtod(argv[++i], NULL);
        } else if (strcmp(argv[i], "--spread") == 0 && i + 1 < argc) {
            only_spread = strtod(argv[++i], NULL);
        } else if (strcmp(argv[i], "--no-header") == 0) {
            header = 0;
        } else {
            usage();
        }
    }
    if (trials < 1) {
        usage();
    }
    static const double cvs[] = {0.02, 0.05, 0.10, 0.20};
    static const double effects[] = {0, 0.02, 0.05, 0.10, -0.10};
    static const double spreads[] = {0, 0.03};
    static const int metrics[] = {1, 3};
    if (header) {
        printf(
            "| shape | order | ranked | CV | bring-up | effect | promote | reject | mean repeats "
            "arm / baseline |\n|---|---|---|---|---|---|---|---|---|\n");
    }
    int bad = 0;
    for (int sh = SINGLE; sh <= SEED003; sh++) {
        if (only_shape >= 0 && sh != only_shape) {
            continue;
        }
        for (size_t mi = 0; mi < 2; mi++) {
            if (only_metrics && metrics[mi] != only_metrics) {
                continue;
            }
            for (size_t si = 0; si < 2; si++) {
                for (size_t ci = 0; ci < 4; ci++) {
                    for (size_t ei = 0; ei < 5; ei++) {
                        struct cell c = {(enum shape)sh, metrics[mi], cvs[ci],
                                         spreads[si],    effects[ei], blocked};
                        if ((null_only && c.effect > 0.02) ||
                            (only_cv >= 0 && fabs(c.cv - only_cv) > 1e-9) ||
                            (only_spread >= 0 && fabs(c.spread - only_spread) > 1e-9)) {
                            continue;
                        }
                        /* A cell's seed follows from its coordinates alone, so any subset of
                         * the cells (in any order, in parallel) gives the same rows. */
                        uint64_t cell_seed = seed * 1000003u + (uint64_t)sh * 1000 + mi * 200 +
                                             si * 50 + ci * 10 + ei + (uint64_t)blocked * 7919;
                        struct tally t;
                        run_cell(&c, trials, cell_seed, &t);
                        double p = (double)t.promoted / (double)t.trials;
                        double r = (double)t.rejected / (double)t.trials;
                        printf("| %s | %s | %d | %.0f%% | %.0f%% | %+.0f%% | %.2f%% | %.2f%% | "
                               "%.2f / %.2f |\n",
                               shape_name(c.shape), blocked ? "blocked" : "interleaved", c.n_ranked,
                               100 * c.cv, 100 * c.spread, 100 * c.effect, 100 * p, 100 * r,
                               t.n_arm / (double)t.trials, t.n_base / (double)t.trials);
                        fflush(stdout);
                        double bound = 0.05 + 3 * sqrt(0.05 * 0.95 / (double)t.trials);
                        if (check && c.effect <= 0.02 && p > bound) {
                            fprintf(stderr,
                                    "decide_error: %s, %d ranked, CV %.0f%%, bring-up %.0f%%, "
                                    "effect %+.0f%%: promoted %.2f%% > %.2f%%\n",
                                    shape_name(c.shape), c.n_ranked, 100 * c.cv, 100 * c.spread,
                                    100 * c.effect, 100 * p, 100 * bound);
                            bad = 1;
                        }
                    }
                }
            }
        }
    }
    st_rules_designs_release(&g_designs);
    return bad;
}
