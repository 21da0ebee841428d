/*
 * The sandbox's programs: the jobs for a Python answer and for a C answer (compile, then run) and
 * the code block taken out of a model's Markdown answer. Pure: no I/O, no processes; the jobs
 * borrow the source, and nothing here runs them (st_sandbox_run does).
 */
#include "qual/sandbox.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"

/* ---- Programs. ---- */

void st_sandbox_limits_compile(struct st_sandbox_limits *lim)
{
    lim->cpu_s = 20;
    lim->wall_ms = 30000;
    lim->as_bytes = 2ull << 30;
    lim->fsize_bytes = 64ull << 20;
    lim->nofile = 128;
    lim->nproc = 32;
}

static const char *const argv_python[] = {"python3", "main.py", NULL};
static const char *const argv_gcc[] = {"gcc", "-O1", "-o", "prog", "main.c", NULL};
static const char *const argv_prog[] = {"./prog", NULL};

void st_sandbox_prog_python(struct st_sandbox_prog *p, const char *src, size_t len)
{
    memset(p, 0, sizeof(*p));
    p->file.name = "main.py";
    p->file.data = src;
    p->file.len = len;
    p->steps[0].argv = argv_python;
    p->job.files = &p->file;
    p->job.nfiles = 1;
    p->job.steps = p->steps;
    p->job.nsteps = 1;
}

void st_sandbox_prog_c(struct st_sandbox_prog *p, const char *src, size_t len,
                       const struct st_sandbox_limits *compile)
{
    memset(p, 0, sizeof(*p));
    p->file.name = "main.c";
    p->file.data = src;
    p->file.len = len;
    if (compile != NULL) {
        p->compile = *compile;
    } else {
        st_sandbox_limits_compile(&p->compile);
    }
    p->steps[0].argv = argv_gcc;
    p->steps[0].limits = &p->compile;
    p->steps[1].argv = argv_prog;
    p->job.files = &p->file;
    p->job.nfiles = 1;
    p->job.steps = p->steps;
    p->job.nsteps = 2;
}

/* ---- Code blocks in model answers. ---- */

/* Returns the length of the line starting at p (without its '\n'). */
static size_t line_len(const char *p, const char *end)
{
    const char *q = memchr(p, '\n', (size_t)(end - p));

    return q != NULL ? (size_t)(q - p) : (size_t)(end - p);
}

/* If line[0..n) opens or closes a fence, returns its run length and sets *ch; else 0. */
static size_t fence_run(const char *line, size_t n, char *ch, size_t *after)
{
    size_t i = 0, run = 0;

    while (i < n && i < 3 && line[i] == ' ') {
        i++;
    }
    if (i >= n || (line[i] != '`' && line[i] != '~')) {
        return 0;
    }
    *ch = line[i];
    while (i + run < n && line[i + run] == *ch) {
        run++;
    }
    if (run < 3) {
        return 0;
    }
    *after = i + run;
    return run;
}

static int tag_fits(const char *tag, size_t n, enum st_sandbox_lang lang)
{
    static const char *const py[] = {"python", "py", "python3", "", NULL};
    static const char *const cc[] = {"c", "", NULL};
    const char *const *list = lang == ST_SANDBOX_LANG_PYTHON ? py : cc;

    for (size_t i = 0; list[i] != NULL; i++) {
        if (strlen(list[i]) == n && strncasecmp(tag, list[i], n) == 0) {
            return 1;
        }
    }
    return 0;
}

int st_sandbox_extract_code(const char *answer, size_t len, enum st_sandbox_lang lang,
                            struct st_buf *out)
{
    const char *p = answer, *end = answer + len;

    st_buf_clear(out);
    if (len > ST_SANDBOX_MAX_ANSWER_BYTES) {
        return ST_ETOOBIG;
    }
    if (lang != ST_SANDBOX_LANG_PYTHON && lang != ST_SANDBOX_LANG_C) {
        return -EINVAL;
    }
    while (p < end) {
        size_t n = line_len(p, end), after = 0;
        char ch = 0;
        size_t run = fence_run(p, n, &ch, &after);
        const char *next = p + n + (p + n < end ? 1 : 0);
        if (run == 0) {
            p = next;
            continue;
        }
        /* The tag is the first word of the info string; a backtick fence's info has none. */
        const char *tag = p + after;
        size_t rest = n - after;
        while (rest > 0 && (*tag == ' ' || *tag == '\t')) {
            tag++;
            rest--;
        }
        size_t tn = 0;
        while (tn < rest && tag[tn] != ' ' && tag[tn] != '\t' && tag[tn] != '\r' &&
               tag[tn] != '{') {
            tn++;
        }
        if (ch == '`' && memchr(tag, '`', rest) != NULL) {
            p = next; /* ```x``` on one line is inline code, not a fence */
            continue;
        }
        int fits = tag_fits(tag, tn, lang);
        /* Find the closing fence: same character, at least as long, nothing but blanks after. */
        const char *body = next, *q = next, *close = NULL;
        while (q < end) {
            size_t qn = line_len(q, end), qa = 0;
            char qc = 0;
            size_t qr = fence_run(q, qn, &qc, &qa);
            int blank = 1;
            for (size_t i = qa; qr > 0 && i < qn; i++) {
                blank = blank && (q[i] == ' ' || q[i] == '\t' || q[i] == '\r');
            }
            if (qr >= run && qc == ch && blank) {
                close = q;
                break;
            }
            q += qn + (q + qn < end ? 1 : 0);
        }
        if (!fits) {
            if (close == NULL) {
                return ST_ENOTFOUND;
            }
            p = close + line_len(close, end);
            p += p < end ? 1 : 0;
            continue;
        }
        if (close == NULL) {
            return ST_EPARSE;
        }
        size_t blen = (size_t)(close - body);
        if (blen > ST_SANDBOX_MAX_CODE_BYTES) {
            return ST_ETOOBIG;
        }
        st_buf_append(out, body, blen);
        return 0;
    }
    return ST_ENOTFOUND;
}
