/*
 * Workload kinds: the names of enum st_wl_kind (workload.h) and their parser. A leaf: the window
 * map (windows.c) and the build (workload.c) both name kinds, and neither calls the other for it.
 */
#include "workload/workload.h"

#include <string.h>

static const char *const kind_names[] = {
    NULL, "fixed", "shared-prefix", "distinct", "long", "multi-turn", "mixed", "dataset", "trace",
};

const char *st_wl_kind_name(enum st_wl_kind k)
{
    if ((int)k < ST_WL_FIXED || (int)k > ST_WL_TRACE) {
        return "?";
    }
    return kind_names[k];
}

int st_wl_kind_parse(const char *s, enum st_wl_kind *out)
{
    for (int k = ST_WL_FIXED; k <= ST_WL_TRACE; k++) {
        if (strcmp(s, kind_names[k]) == 0) {
            *out = (enum st_wl_kind)k;
            return 0;
        }
    }
    return ST_EUSAGE;
}
