/*
 * The report's document writer (doc.h): number formats by metric name, then the Markdown and
 * HTML forms of each element. Nothing here knows the summary.
 */
#include "report/doc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/svg.h"
/* ---- number formats: by the metric's name ---- */

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

struct st_doc_fmt st_doc_fmt_of(const char *mname)
{
    if (ends_with(mname, "_tps")) {
        return (struct st_doc_fmt){2, "tokens/s"};
    }
    if (ends_with(mname, "_tokens")) {
        return (struct st_doc_fmt){0, "tokens"};
    }
    if (ends_with(mname, "_bytes")) {
        return (struct st_doc_fmt){0, "bytes"};
    }
    if (ends_with(mname, "_s")) {
        return (struct st_doc_fmt){3, "s"};
    }
    if (strcmp(mname, "completed") == 0 || strcmp(mname, "queued") == 0) {
        return (struct st_doc_fmt){0, "requests"};
    }
    if (strcmp(mname, "max_docs") == 0) {
        return (struct st_doc_fmt){0, "documents"};
    }
    if (strcmp(mname, "pass_count") == 0 || strcmp(mname, "fail_count") == 0) {
        return (struct st_doc_fmt){0, "checks"};
    }
    if (strcmp(mname, "spec_accept_rate") == 0) {
        return (struct st_doc_fmt){2, ""};
    }
    if (ends_with(mname, "_rate")) {
        return (struct st_doc_fmt){4, ""};
    }
    return (struct st_doc_fmt){3, ""};
}

/* The metric-name part of "STEP.METRIC@POINT" into out (at most cap bytes). */
void st_doc_mname(const char *full, char *out, size_t cap)
{
    const char *dot = strchr(full, '.');
    const char *p = dot ? dot + 1 : full;
    size_t n = strcspn(p, "@");
    snprintf(out, cap, "%.*s", (int)n, p);
}

/* v with dec decimals; magnitudes no measurement has (a summary may say 1e300) in %g form so a
 * cell stays short. */
void st_doc_num(struct st_buf *b, double v, int dec)
{
    if (fabs(v) < 1e15) {
        st_buf_printf(b, "%.*f", dec, v);
    } else {
        st_buf_printf(b, "%.6g", v);
    }
}

/* ---- one renderer, two syntaxes ---- */

/* Text in the current syntax: HTML-escaped, or for Markdown with '|' escaped and line breaks
 * flattened (so a string never breaks a table row). */
void st_doc_text(struct st_doc *d, const char *s)
{
    if (d->html) {
        st_svg_esc(d->b, s);
        return;
    }
    for (const char *p = s; *p != '\0'; p++) {
        if (*p == '|') {
            st_buf_puts(d->b, "\\|");
        } else if (*p == '\n' || *p == '\r') {
            st_buf_putc(d->b, ' ');
        } else {
            st_buf_putc(d->b, *p);
        }
    }
}

void st_doc_raw(struct st_doc *d, const char *md, const char *html)
{
    st_buf_puts(d->b, d->html ? html : md);
}

void st_doc_code(struct st_doc *d, const char *s)
{
    st_doc_raw(d, "`", "<code>");
    st_doc_text(d, s);
    st_doc_raw(d, "`", "</code>");
}

void st_doc_strong(struct st_doc *d, const char *s)
{
    st_doc_raw(d, "**", "<strong>");
    st_doc_text(d, s);
    st_doc_raw(d, "**", "</strong>");
}

void st_doc_h(struct st_doc *d, int level, const char *s)
{
    if (d->html) {
        st_buf_printf(d->b, "<h%d>", level);
        st_svg_esc(d->b, s);
        st_buf_printf(d->b, "</h%d>\n", level);
        return;
    }
    for (int i = 0; i < level; i++) {
        st_buf_putc(d->b, '#');
    }
    st_buf_putc(d->b, ' ');
    st_doc_text(d, s);
    st_buf_puts(d->b, "\n\n");
}

void st_doc_p_open(struct st_doc *d)
{
    st_doc_raw(d, "", "<p>");
}

void st_doc_p_close(struct st_doc *d)
{
    st_doc_raw(d, "\n\n", "</p>\n");
}

void st_doc_table(struct st_doc *d, size_t ncols, const char *const *heads, const char *align)
{
    d->align = align;
    if (d->html) {
        st_buf_puts(d->b, "<table>\n<thead><tr>");
        for (size_t i = 0; i < ncols; i++) {
            st_buf_puts(d->b, align[i] == 'r' ? "<th class=\"num\">" : "<th>");
            st_svg_esc(d->b, heads[i]);
            st_buf_puts(d->b, "</th>");
        }
        st_buf_puts(d->b, "</tr></thead>\n<tbody>\n");
        return;
    }
    st_buf_puts(d->b, "|");
    for (size_t i = 0; i < ncols; i++) {
        st_buf_putc(d->b, ' ');
        st_doc_text(d, heads[i]);
        st_buf_puts(d->b, " |");
    }
    st_buf_puts(d->b, "\n|");
    for (size_t i = 0; i < ncols; i++) {
        st_buf_puts(d->b, align[i] == 'r' ? "---:|" : "---|");
    }
    st_buf_putc(d->b, '\n');
}

void st_doc_row(struct st_doc *d)
{
    d->col = 0;
    st_doc_raw(d, "|", "<tr>");
}

void st_doc_row_end(struct st_doc *d)
{
    st_doc_raw(d, "\n", "</tr>\n");
}

/* Opens the next cell; cls (HTML only) adds a class. */
void st_doc_cell(struct st_doc *d, const char *cls)
{
    if (d->html) {
        int num = d->align[d->col] == 'r';
        if (num || cls != NULL) {
            st_buf_printf(d->b, "<td class=\"%s%s%s\">", num ? "num" : "", num && cls ? " " : "",
                          cls ? cls : "");
        } else {
            st_buf_puts(d->b, "<td>");
        }
    } else {
        st_buf_putc(d->b, ' ');
    }
    d->col++;
}

void st_doc_cell_end(struct st_doc *d)
{
    st_doc_raw(d, " |", "</td>");
}

void st_doc_cell_s(struct st_doc *d, const char *s)
{
    st_doc_cell(d, NULL);
    st_doc_text(d, s);
    st_doc_cell_end(d);
}

void st_doc_table_end(struct st_doc *d)
{
    st_doc_raw(d, "\n", "</tbody>\n</table>\n");
}
