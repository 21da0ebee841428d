/*
 * Holm's procedure. See holm.h. Ties keep their input order (a stable insertion sort over the
 * indices: m is the number of hypotheses of one campaign stage, tens at most).
 */
#include "stats/holm.h"

#include <math.h>
#include <stdlib.h>

#include "base/xalloc.h"

static double pv(const double *p, size_t i)
{
    return isnan(p[i]) ? 1.0 : p[i];
}

size_t st_holm(const double *p, size_t m, double alpha, unsigned char *reject, double *level)
{
    if (m == 0) {
        return 0;
    }
    size_t *ord = st_xmalloc(m * sizeof(*ord));
    for (size_t i = 0; i < m; i++) {
        size_t j = i;
        while (j > 0 && pv(p, ord[j - 1]) > pv(p, i)) {
            ord[j] = ord[j - 1];
            j--;
        }
        ord[j] = i;
        reject[i] = 0;
    }
    size_t n = 0;
    int stopped = 0;
    double stop_level = alpha / (double)m;
    for (size_t r = 0; r < m; r++) {
        size_t i = ord[r];
        double lv = stopped ? stop_level : alpha / (double)(m - r);
        if (level) {
            level[i] = lv;
        }
        if (!stopped && pv(p, i) <= lv) {
            reject[i] = 1;
            n++;
        } else if (!stopped) {
            stopped = 1;
            stop_level = lv;
        }
    }
    free(ord);
    return n;
}
