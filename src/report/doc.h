/*
 * One document writer, two syntaxes (internal to src/report): the report's sections write
 * headings, paragraphs and tables once through st_doc_*, and the same calls give Markdown
 * (report.md) or HTML (report.html), so the two reports cannot drift apart. Also the number
 * formats both use, chosen by a metric's name. Pure: appends to a caller's buffer.
 */
#ifndef ST_REPORT_DOC_H
#define ST_REPORT_DOC_H

#include <stddef.h>

#include "base/buf.h"

/* A document being written: b is borrowed (the caller's output); html 0 writes Markdown. */
struct st_doc {
    struct st_buf *b;
    int html;
    const char *align; /* of the open table: 'l' or 'r' per column; borrowed */
    size_t col;
};

/* How a metric's numbers are shown: decimals and unit ("" when none, static). */
struct st_doc_fmt {
    int decimals;
    const char *unit; /* "" when none */
};

/* The format of a metric by its name (the METRIC of STEP.METRIC@POINT): by its unit suffix
 * (_tps, _tokens, _bytes, _s, _rate) or a few known names; 3 decimals otherwise. */
struct st_doc_fmt st_doc_fmt_of(const char *mname);
/* The metric-name part of "STEP.METRIC@POINT" into out (at most cap bytes, terminated). */
void st_doc_mname(const char *full, char *out, size_t cap);
/* v with dec decimals, or %.6g beyond 1e15 in magnitude (a cell stays short). */
void st_doc_num(struct st_buf *b, double v, int dec);

/* Text, escaped for the syntax: HTML-escaped (st_svg_esc), or for Markdown with '|' escaped and
 * line breaks flattened so a string never breaks a table row. */
void st_doc_text(struct st_doc *d, const char *s);
/* md or html verbatim, whichever the document's syntax is. */
void st_doc_raw(struct st_doc *d, const char *md, const char *html);
void st_doc_code(struct st_doc *d, const char *s);
void st_doc_strong(struct st_doc *d, const char *s);
/* A heading of level 1..6. */
void st_doc_h(struct st_doc *d, int level, const char *s);
void st_doc_p_open(struct st_doc *d);
void st_doc_p_close(struct st_doc *d);
/* Opens a table of ncols columns: heads[i] and align[i] ('l' or 'r'; borrowed until
 * st_doc_table_end). Rows: st_doc_row, cells (st_doc_cell .. st_doc_cell_end, or st_doc_cell_s),
 * st_doc_row_end. */
void st_doc_table(struct st_doc *d, size_t ncols, const char *const *heads, const char *align);
void st_doc_row(struct st_doc *d);
void st_doc_row_end(struct st_doc *d);
/* Opens the next cell; cls (HTML only, may be NULL) adds a class. */
void st_doc_cell(struct st_doc *d, const char *cls);
void st_doc_cell_end(struct st_doc *d);
/* A cell holding text s. */
void st_doc_cell_s(struct st_doc *d, const char *s);
void st_doc_table_end(struct st_doc *d);

#endif
