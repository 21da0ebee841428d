/*
 * The drift check of --compare-with (internal to src/report; the entry points are report.h's
 * st_report_compare and st_report_drift_md): this campaign's baseline against an earlier one's,
 * and the section that shows it in both reports.
 */
#ifndef ST_REPORT_DRIFT_H
#define ST_REPORT_DRIFT_H

#include "report/doc.h"
#include "report/summary.h"

/* The "Drift against an earlier campaign" section of c (borrowed); this_hash (may be NULL: the
 * CLI's table of a compare object alone) says whether it was the same plan. */
void st_drift_section(struct st_doc *d, const struct st_sum_cmp *c, const char *this_hash);

#endif
